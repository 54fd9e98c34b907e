#!/bin/sh
# Runs one test (a binary, or a script that starts skyd/skyplan/sky) built
# with SANITIZE=thread, and fails it if ThreadSanitizer reported anything in
# any process it started:
#
#   tests/run.sh --label tsan --prefix tests/tsan.sh TEST...
#
# Every instrumented process writes its reports to its own file under a
# fresh directory (log_path), so a race inside a daemon fails the test even
# when the script's own checks still pass. halt_on_error stops a process at
# its first race and exitcode=66 makes that exit visible. A report names
# the file, the two stacks and the threads; they are printed here, followed
# by one FAIL line that tests/run.sh counts.
set -u
[ $# -ge 1 ] || { echo "usage: tests/tsan.sh TEST [ARG...]" >&2; exit 2; }
name=$(basename "$1")
dir=$(mktemp -d "${TMPDIR:-/tmp}/sky-tsan.XXXXXX")
# second_deadlock_stack: lock-order reports show both acquisitions
# suppressions: only uninstrumented third-party libraries (tests/tsan.supp says why)
supp=$(cd "$(dirname "$0")" && pwd)/tsan.supp
TSAN_OPTIONS="halt_on_error=1 exitcode=66 second_deadlock_stack=1 suppressions=$supp log_path=$dir/report${TSAN_OPTIONS:+ $TSAN_OPTIONS}"
export TSAN_OPTIONS
"$@"
rc=$?
n=0
for f in "$dir"/report.*; do
	[ -e "$f" ] || continue
	n=$((n + 1))
	echo "---- ThreadSanitizer report ($(basename "$f"), pid ${f##*.}):"
	cat "$f"
done
rm -rf "$dir"
if [ "$n" -gt 0 ]; then
	echo "FAIL tsan_$name: ThreadSanitizer reported in $n process(es)"
	exit 66
fi
exit "$rc"
