#!/bin/sh
# sky bench fleet, shortened (a tiny model, 4 layers, 3 boards, even and
# optimal, 1 + 2 steps, the plaintext-frames run of optimal) so the bench
# cannot rot: the JSON has one object per algorithm with its keys, the
# times are positive, step_s_measured is the median over the timed steps
# of the slowest stage's step in the metrics the watch recorded (recomputed
# here from the events file), speedup_vs_even is even's measured step over
# the algorithm's, the time lines and the plan are SVG, and nothing the
# bench started is left running. Not a timed test: no figure is compared
# with a target.
set -u
cd "$(dirname "$0")/../.."
SKY_BUILD=${SKY_BUILD:-build/host}
fails=0
pass() { echo "PASS $1"; }
fail() {
	echo "FAIL $1: $2"
	fails=$((fails + 1))
}
W=$(mktemp -d "${TMPDIR:-/tmp}/sky-benchfleet-test.XXXXXX")
printf 'leak:libpaho-mqtt3as\n' >"$W/lsan.supp"
export LSAN_OPTIONS="suppressions=$W/lsan.supp${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
trap 'rm -rf "$W"' EXIT
case "$SKY_BUILD" in /*) SKY="$SKY_BUILD/bin/sky" ;; *) SKY="$(pwd)/$SKY_BUILD/bin/sky" ;; esac

# the bench's own work directory (broker, boards' state) goes under $W/tmp,
# so any process it left behind names $W in its command line
mkdir -p "$W/tmp"
TMPDIR="$W/tmp" timeout -s KILL 900 "$SKY" bench fleet --json --model tiny --layers 4 \
	--speeds "0.5 0.25 0.25" --algos "even optimal" --steps 2 --micro 2 --no-qemu \
	--out "$W/out" --timeout 300 >"$W/out.json" 2>"$W/err"
rc=$?
[ $rc -eq 0 ] && pass bench_fleet_runs || fail bench_fleet_runs "rc $rc: $(tail -5 "$W/err")"
sed 's/^/  /' "$W/out.json"

# one object per algorithm, in order, with every key
[ "$(grep -c '^{"algo":' "$W/out.json")" -eq 2 ] &&
	[ "$(sed -n 's/^{"algo":"\([a-z]*\)".*/\1/p' "$W/out.json" | tr '\n' ' ')" = "even optimal " ] &&
	pass bench_fleet_one_object_per_algorithm ||
	fail bench_fleet_one_object_per_algorithm "$(head -c 300 "$W/out.json")"
for k in step_s_measured step_s_predicted speedup_vs_even comm_share wait_share frame_MBps loss \
	plan steps_timed; do
	[ "$(grep -c "\"$k\":" "$W/out.json")" -eq 2 ] || fail "bench_fleet_key_$k" "not in both objects"
done
grep '"algo":"optimal"' "$W/out.json" | grep -q '"encryption_cost_s_per_step":-\{0,1\}[0-9]' &&
	grep '"algo":"optimal"' "$W/out.json" | grep -q '"step_s_plaintext":[0-9]' &&
	pass bench_fleet_encryption_cost_reported ||
	fail bench_fleet_encryption_cost_reported "$(grep optimal "$W/out.json" | head -c 300)"

# a calibration job ran first: even is planned on its figures, optimal on
# those of the jobs before it
fig() { grep "\"algo\":\"$1\"" "$W/out.json" | sed -n 's/.*"figures":"\([^"]*\)","figures_boards".*/\1/p'; }
[ "$(fig even)" = calibration ] && [ "$(fig optimal)" = "previous job" ] &&
	[ "$(grep -c '"figures_boards":\[{"id":"b1"' "$W/out.json")" -eq 2 ] &&
	pass bench_fleet_plans_say_which_figures_they_used ||
	fail bench_fleet_plans_say_which_figures_they_used "even '$(fig even)', optimal '$(fig optimal)'"

get() { # get ALGO KEY
	grep "\"algo\":\"$1\"" "$W/out.json" | sed -n "s/.*\"$2\":\([-0-9.e+]*\)[,}].*/\1/p"
}
for a in even optimal; do
	m=$(get $a step_s_measured)
	p=$(get $a step_s_predicted)
	n=$(get $a steps_timed)
	if [ -n "$m" ] && [ -n "$p" ] && awk "BEGIN{exit !($m > 0 && $p > 0)}" && [ "$n" = 2 ]; then
		pass "bench_fleet_${a}_times_positive"
	else
		fail "bench_fleet_${a}_times_positive" "measured '$m' predicted '$p' timed '$n'"
	fi
	# the stages of the plan tile the 8 half-layers
	stages=$(grep "\"algo\":\"$a\"" "$W/out.json" | grep -o '"first":[0-9]*,"last":[0-9]*' |
		sed 's/"first":\([0-9]*\),"last":\([0-9]*\)/\1-\2/' | tr '\n' ' ')
	echo "$stages" | awk '{ n = 0; for (i = 1; i <= NF; i++) { split($i, r, "-"); if (r[1] != n) exit 1; n = r[2] + 1 } exit n != 8 }' &&
		pass "bench_fleet_${a}_plan_tiles_the_model" || fail "bench_fleet_${a}_plan_tiles_the_model" "$stages"
	# the median, recomputed from the metrics the watch recorded: per step the
	# slowest stage's step_s, steps 2 and 3 (step 1 is the warm-up)
	ev="$W/out/events-$a.jsonl"
	want=$(grep '"step_s"' "$ev" | grep -v '"done"' |
		sed -n 's/.*"step":\([0-9]*\),.*"step_s":\([0-9.e+-]*\),.*/\1 \2/p' |
		awk '$1 >= 2 { if ($2 > mx[$1]) mx[$1] = $2 } END { n = 0; for (s in mx) { v[++n] = mx[s] }
			if (n != 2) { print "none"; exit } printf "%.6f\n", (v[1] + v[2]) / 2 }')
	if [ -n "$m" ] && [ "$want" != none ] && awk "BEGIN{d = $m - $want; exit !(d < 2e-6 && d > -2e-6)}"; then
		pass "bench_fleet_${a}_measured_is_the_median_of_the_metrics"
	else
		fail "bench_fleet_${a}_measured_is_the_median_of_the_metrics" "reported '$m', from $ev '$want'"
	fi
	head -c 200 "$W/out/timeline-$a.svg" 2>/dev/null | grep -q '<svg' &&
		grep -q 'forward' "$W/out/timeline-$a.svg" && pass "bench_fleet_${a}_timeline_svg" ||
		fail "bench_fleet_${a}_timeline_svg" "$(ls "$W/out" 2>&1)"
done
me=$(get even step_s_measured)
mo=$(get optimal step_s_measured)
se=$(get even speedup_vs_even)
so=$(get optimal speedup_vs_even)
if [ -n "$me" ] && [ -n "$mo" ] && [ -n "$so" ] &&
	awk "BEGIN{r = $me / $mo; exit !($so > r * 0.999 && $so < r * 1.001 && $se == 1)}"; then
	pass bench_fleet_speedup_from_measured_steps
else
	fail bench_fleet_speedup_from_measured_steps "even $me (x$se), optimal $mo (x$so)"
fi
echo "MEASURE bench_fleet_tiny even ${me}s optimal ${mo}s speedup $so"
head -c 300 "$W/out/plan-optimal.svg" 2>/dev/null | grep -q '<svg' && pass bench_fleet_plan_svg ||
	fail bench_fleet_plan_svg "no $W/out/plan-optimal.svg: $(tail -3 "$W/err")"

# nothing it started is left (its processes name its directory under $W)
sleep 0.5
left=$(pgrep -f "$W/" | tr '\n' ' ')
[ -z "$left" ] && pass bench_fleet_leaves_no_process ||
	fail bench_fleet_leaves_no_process "$(ps -o pid,args -p "$(echo $left | tr ' ' ',')" 2>&1)"
[ -z "$(ls "$W/tmp")" ] && pass bench_fleet_removes_its_work_dir ||
	fail bench_fleet_removes_its_work_dir "$(ls "$W/tmp")"
exit $((fails > 0))
