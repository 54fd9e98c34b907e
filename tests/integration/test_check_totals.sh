#!/bin/sh
# make check's accounting (tests/run.sh and its --summary): fake test
# programs run in fake legs, and the closing lines must count distinct tests
# (the same test in three legs is one test, failed if it failed in any),
# name each leg with the tests it ran, and fail on a crash, a missing
# program, a program that reports nothing, a timeout, a leg killed before
# it ended, a leg that ran nothing and a run that left no results at all.
# No broker, no build needed.
set -u
cd "$(dirname "$0")/../.."
unset SKY_TEST_TOTALS # make check's own file is not ours to write

. tests/integration/lib.sh
W=$(mktemp -d "${TMPDIR:-/tmp}/sky-totals.XXXXXX")
trap 'rm -rf "$W"' EXIT

# prog DIR/AREA/NAME BODY: a test program (a shell script) with that body
prog() {
	mkdir -p "$(dirname "$W/$1")"
	printf '#!/bin/sh\n%s\n' "$2" >"$W/$1"
	chmod +x "$W/$1"
}
# leg LABEL [run.sh options] PROGRAM...: one leg into $T; its output in $W/out
leg() {
	_l=$1
	shift
	SKY_TEST_TOTALS=$T tests/run.sh --label "$_l" "$@" >>"$W/out" 2>&1
}
summary() { tests/run.sh --summary "$T" >"$W/sum" 2>&1; }
last() { tail -1 "$W/sum"; }
legs() { tail -2 "$W/sum" | head -1; }
# expect NAME "legs line" "last line" RC
expect() {
	if [ "$(legs)" = "$2" ] && [ "$(last)" = "$3" ] && [ "$rc" = "$4" ]; then
		pass "$1"
	else
		fail "$1" "got '$(legs)' / '$(last)' rc $rc, want '$2' / '$3' rc $4"
	fi
}

two_pass='echo "PASS t1"; echo "PASS t2"; echo "2 passed, 0 failed"'
prog host/runtime/test_a "$two_pass"
prog cross/runtime/test_a "$two_pass"
prog host/runtime/test_b 'echo "PASS b1"; echo "1 passed, 0 failed"'
prog cross/runtime/test_b 'echo "FAIL b1 (1 failed expectations)"; echo "0 passed, 1 failed"; exit 1'
prog host/integration/test_s.sh 'echo "PASS s1"; echo "FAIL s2: the reason"; exit 1'
prog cross/runtime/test_crash 'echo "PASS c1"; kill -SEGV $$'
prog cross/runtime/test_slow 'sleep 30'

# the same tests in three legs count once each
T=$W/t1
leg host "$W/host/runtime/test_a"
leg "qemu cortex-a72" --prefix env "$W/cross/runtime/test_a"
leg "qemu max" --prefix env "$W/cross/runtime/test_a"
summary
rc=$?
expect totals_distinct_tests_across_legs "host 2, qemu cortex-a72 2, qemu max 2" "2 passed, 0 failed" 0
grep -q "^== qemu max test_a: 2 passed" "$W/out" && pass totals_leg_label_in_output ||
	fail totals_leg_label_in_output "$(tail -3 "$W/out")"

# failed in one leg only: failed once, and not also counted passed
T=$W/t2
leg host "$W/host/runtime/test_a" "$W/host/runtime/test_b" "$W/host/integration/test_s.sh"
leg "qemu max" --prefix env "$W/cross/runtime/test_a" "$W/cross/runtime/test_b"
summary
rc=$?
expect totals_failed_in_any_leg_is_failed \
	"host 5 (1 failed), qemu max 3 (1 failed)" "3 passed, 2 failed" 1

# a crash after a PASS line, and a missing program: each is a failed test
T=$W/t3
leg host "$W/host/runtime/test_a"
leg "qemu max" --prefix env "$W/cross/runtime/test_crash" "$W/cross/runtime/test_gone"
summary
rc=$?
expect totals_crash_and_missing_program_fail \
	"host 2, qemu max 3 (2 failed)" "3 passed, 2 failed" 1
grep -q "FAIL qemu max test_crash: exited with status 139" "$W/out" &&
	grep -q "FAIL qemu max test_gone: exited with status 127" "$W/out" &&
	pass totals_crash_reason_shown || fail totals_crash_reason_shown "$(grep FAIL "$W/out" | tail -3)"

# a program that exits 0 but reports nothing
T=$W/t7
prog host/runtime/test_mute 'exit 0'
leg host "$W/host/runtime/test_a" "$W/host/runtime/test_mute"
summary
rc=$?
expect totals_silent_program_fails "host 3 (1 failed)" "2 passed, 1 failed" 1

# a program that outlives SKY_TEST_TIMEOUT
T=$W/t4
SKY_TEST_TIMEOUT=1 leg host "$W/cross/runtime/test_slow"
summary
rc=$?
expect totals_timeout_fails "host 1 (1 failed)" "0 passed, 1 failed" 1

# a leg that ran no tests (an empty list of binaries) is a failure
T=$W/t5
leg host "$W/host/runtime/test_a"
leg "qemu max" --prefix env
summary
rc=$?
expect totals_empty_leg_fails "host 2, qemu max 0 (ran no tests)" "2 passed, 1 failed" 1

# a leg killed before it ended (run.sh itself gone) is a failure, even
# though every test it reported passed
T=$W/t6
prog host/runtime/test_wait "echo 'PASS w1'; touch '$W/started'; sleep 3"
leg host "$W/host/runtime/test_a"
SKY_TEST_TOTALS=$T tests/run.sh --label "qemu max" "$W/host/runtime/test_a" "$W/host/runtime/test_wait" \
	>>"$W/out" 2>&1 &
pid=$!
i=0
while [ ! -e "$W/started" ] && [ $i -lt 300 ]; do
	sleep 0.1
	i=$((i + 1))
done
kill -9 "$pid"
wait "$pid" 2>/dev/null
summary
rc=$?
expect totals_killed_leg_fails "host 2, qemu max 2 (did not finish)" "2 passed, 1 failed" 1

# no results at all
T=$W/none
summary
rc=$?
[ "$(last)" = "0 passed, 1 failed" ] && [ $rc -ne 0 ] && pass totals_no_results_fails ||
	fail totals_no_results_fails "'$(last)' rc $rc"

# a standalone run.sh (no totals file) still ends with its own count
tests/run.sh "$W/host/runtime/test_a" "$W/host/runtime/test_b" >"$W/alone" 2>&1
rc=$?
[ "$(tail -1 "$W/alone")" = "3 passed, 0 failed" ] && [ $rc -eq 0 ] && pass totals_standalone_run ||
	fail totals_standalone_run "'$(tail -1 "$W/alone")' rc $rc"

exit $((fails > 0))
