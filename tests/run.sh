#!/bin/sh
# Runs test binaries and test scripts, adds up their PASS/FAIL lines and ends
# with "N passed, N failed"; exits non-zero on any failure.
#
#   tests/run.sh [--prefix "qemu-aarch64 ..."] [--label L] TEST...
#
# A test that exits non-zero without printing a FAIL line (a crash, a
# sanitizer report, a timeout) counts as one failure. Each test gets
# SKY_TEST_TIMEOUT seconds (default 900). Set SKY_TEST_TOTALS=file to append
# this run's counts to a file (make check sums several runs).
set -u
prefix=""
label=""
while [ $# -gt 0 ]; do
	case "$1" in
	--prefix) prefix="$2"; shift 2 ;;
	--label) label="$2 "; shift 2 ;;
	*) break ;;
	esac
done
timeout_s="${SKY_TEST_TIMEOUT:-900}"
passed=0
failed=0
log=$(mktemp)
for t in "$@"; do
	name=$(basename "$t")
	start=$(date +%s)
	# shellcheck disable=SC2086 # the prefix is a command line
	timeout "$timeout_s" $prefix "$t" >"$log" 2>&1
	rc=$?
	p=$(grep -c '^PASS ' "$log")
	f=$(grep -c '^FAIL ' "$log")
	if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
		f=1
		if [ "$rc" -eq 124 ]; then
			echo "FAIL ${label}$name: timed out after ${timeout_s}s" >>"$log"
		elif [ "$rc" -eq 137 ]; then # a prefix's `timeout -s KILL` (or another SIGKILL)
			echo "FAIL ${label}$name: killed (SIGKILL: past its timeout -s KILL bound?)" >>"$log"
		else
			echo "FAIL ${label}$name: exited with status $rc" >>"$log"
		fi
	fi
	passed=$((passed + p))
	failed=$((failed + f))
	secs=$(( $(date +%s) - start ))
	if [ "$f" -gt 0 ]; then
		echo "== ${label}$name: $p passed, $f failed (${secs}s)"
		sed 's/^/   /' "$log"
	else
		echo "== ${label}$name: $p passed (${secs}s)"
	fi
done
rm -f "$log"
[ -n "${SKY_TEST_TOTALS:-}" ] && echo "$passed $failed" >>"$SKY_TEST_TOTALS"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
