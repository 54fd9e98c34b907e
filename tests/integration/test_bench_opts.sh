#!/bin/sh
# The `sky bench` shell scripts take --opt=value as every sky command does
# (tools/opt_lib.sh): the value reaches the script whole (spaces, quotes, $,
# another =), a value after --opt that looks like --x=y is not split, and
# a bad value is refused with its reason. Each case stops at the scripts'
# option checks, before any fleet starts.
set -u
cd "$(dirname "$0")/../.."
. tests/integration/lib.sh
sky_test_workdir benchopts
trap 'rm -rf "$W"' EXIT

# refused SCRIPT NAME WANT ARGS...: exit 2 and the message WANT (fixed text)
refused() {
	s=$1 name=$2 want=$3
	shift 3
	sh "tools/$s.sh" "$@" >"$W/$name.out" 2>&1 </dev/null
	rc=$?
	[ $rc -eq 2 ] && grep -qF -- "$want" "$W/$name.out" && pass "bench_opts_$name" ||
		fail "bench_opts_$name" "rc $rc: $(head -c 300 "$W/$name.out")"
}
odd="$W/no such/it's \"x\" \$HOME %s a=b"
refused bench_infer value_kept_whole "--weights $odd: no such file" --weights="$odd"
refused bench_infer value_like_an_option_not_split "--weights --samples=1: no such file" \
	--clients=3 --weights --samples=1
refused bench_geo quoted_plan_named "unknown plan 'bad'x'" --plans="even bad'x"
refused bench_geo second_equals_kept "unknown plan '=even'" --plans==even
refused bench_fleet bad_number_refused "take whole numbers" --steps=2 --layers=4x
refused bench_fleet unknown_option_named "unknown option '--bogus'" --json --bogus=1
exit $((fails > 0))
