#!/bin/sh
# Runs test binaries and test scripts, adds up their PASS/FAIL lines and ends
# with "N passed, N failed"; exits non-zero on any failure.
#
#   tests/run.sh [--prefix "qemu-aarch64 ..."] [--label L] TEST...
#   tests/run.sh --summary FILE
#
# A test that exits non-zero without printing a FAIL line (a crash, a
# sanitizer report, a timeout, a binary that is missing) counts as one
# failure, and so does one that prints neither PASS nor FAIL. Each test gets SKY_TEST_TIMEOUT seconds (default 900).
#
# Set SKY_TEST_TOTALS=FILE to append this run (a "leg" of make check, named
# by its label) to FILE, one tab-separated record per line:
#   leg   LABEL  start
#   test  LABEL  AREA/PROGRAM:TEST  PASS|FAIL
#   leg   LABEL  end
# A program that exits non-zero without a FAIL line adds the record
# "AREA/PROGRAM:(did not finish)" FAIL; one that exits 0 without any PASS
# or FAIL line, "AREA/PROGRAM:(reported no tests)" FAIL.
# --summary FILE reads those records back: one line with the tests each leg
# ran, then "N passed, N failed" over distinct tests (the same test run on
# the host and under two qemu CPUs is one test, failed if it failed in any
# leg). A leg that started but did not end (run.sh itself killed) or that
# ran no test counts as a failed test of its own; the summary exits
# non-zero if anything failed or FILE holds no leg.
set -u

summary() {
	[ -s "$1" ] || {
		echo "no test results in $1: no leg ran"
		echo "0 passed, 1 failed"
		return 1
	}
	awk -F '\t' '
	function bad(key) { st[key] = "FAIL"; if (!(key in seen)) { seen[key] = 1; keys[++nk] = key } }
	$1 == "leg" && $3 == "start" {
		if (!($2 in started)) legs[++nl] = $2
		started[$2] = 1; ended[$2] = 0; ran[$2] = 0; lfail[$2] = 0
	}
	$1 == "leg" && $3 == "end" { ended[$2] = 1 }
	$1 == "test" {
		ran[$2]++
		if ($4 != "PASS") lfail[$2]++
		if (!($3 in seen)) { seen[$3] = 1; keys[++nk] = $3; st[$3] = "PASS" }
		if ($4 != "PASS") st[$3] = "FAIL"
	}
	END {
		line = ""
		for (i = 1; i <= nl; i++) {
			l = legs[i]
			note = ""
			if (!ended[l]) { note = " (did not finish)"; bad(l ":(leg did not finish)") }
			else if (ran[l] == 0) { note = " (ran no tests)"; bad(l ":(leg ran no tests)") }
			if (lfail[l] > 0) note = note " (" lfail[l] " failed)"
			line = line (i > 1 ? ", " : "") l " " ran[l] note
		}
		if (nl == 0) { line = "no leg started"; bad("(no leg started)") }
		p = 0; f = 0
		for (i = 1; i <= nk; i++) if (st[keys[i]] == "PASS") p++; else f++
		print line
		printf "%d passed, %d failed\n", p, f
		exit f > 0
	}' "$1"
}

prefix=""
label=""
while [ $# -gt 0 ]; do
	case "$1" in
	--prefix) prefix="$2"; shift 2 ;;
	--label) label="$2"; shift 2 ;;
	--summary) summary "$2"; exit ;;
	*) break ;;
	esac
done
totals="${SKY_TEST_TOTALS:-}"
unset SKY_TEST_TOTALS # a test that runs run.sh itself keeps to its own file
leg="${label:-tests}"
record() { # fields joined by tabs, appended to the totals file if there is one
	[ -n "$totals" ] || return 0
	_r=$1
	shift
	for _f in "$@"; do _r="$_r	$_f"; done
	echo "$_r" >>"$totals"
}
tag="${label:+$label }"
timeout_s="${SKY_TEST_TIMEOUT:-900}"
passed=0
failed=0
log=$(mktemp)
record leg "$leg" start
for t in "$@"; do
	name=$(basename "$t")
	prog="$(basename "$(dirname "$t")")/$name" # area/program: the same on every leg
	start=$(date +%s)
	# shellcheck disable=SC2086 # the prefix is a command line
	timeout "$timeout_s" $prefix "$t" >"$log" 2>&1
	rc=$?
	p=$(grep -c '^PASS ' "$log")
	f=$(grep -c '^FAIL ' "$log")
	if [ -n "$totals" ]; then
		sed -n -e 's/^PASS \([^ :]*\).*/PASS \1/p' -e 's/^FAIL \([^ :]*\).*/FAIL \1/p' "$log" |
			while read -r verdict test; do record test "$leg" "$prog:$test" "$verdict"; done
	fi
	if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
		f=1
		record test "$leg" "$prog:(did not finish)" FAIL
		if [ "$rc" -eq 124 ]; then
			echo "FAIL ${tag}$name: timed out after ${timeout_s}s" >>"$log"
		elif [ "$rc" -eq 137 ]; then # a prefix's `timeout -s KILL` (or another SIGKILL)
			echo "FAIL ${tag}$name: killed (SIGKILL: past its timeout -s KILL bound?)" >>"$log"
		else
			echo "FAIL ${tag}$name: exited with status $rc" >>"$log"
		fi
	elif [ "$p" -eq 0 ] && [ "$f" -eq 0 ]; then
		f=1
		record test "$leg" "$prog:(reported no tests)" FAIL
		echo "FAIL ${tag}$name: exited 0 without a PASS or FAIL line" >>"$log"
	fi
	passed=$((passed + p))
	failed=$((failed + f))
	secs=$(( $(date +%s) - start ))
	if [ "$f" -gt 0 ]; then
		echo "== ${tag}$name: $p passed, $f failed (${secs}s)"
		sed 's/^/   /' "$log"
	else
		echo "== ${tag}$name: $p passed (${secs}s)"
	fi
done
rm -f "$log"
record leg "$leg" end
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
