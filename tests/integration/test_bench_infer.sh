#!/bin/sh
# sky bench infer, shortened (a tiny model with 4 layers trained for a few
# steps, 3 boards, even and optimal, 2 clients x 2 in flight, 3 s each) so
# the bench cannot rot: one JSON object per algorithm with every key, the
# figures positive, p50 <= p99, the batch fill at most 1 (batches reported
# by the last stage), speedup_vs_even is the measured throughput
# over even's, the fp32 figure above the int8 one, and nothing the bench
# started is left running. Not a timed test: no figure is compared with a
# target.
set -u
cd "$(dirname "$0")/../.."
SKY_BUILD=${SKY_BUILD:-build/host}
. tests/integration/lib.sh
sky_test_workdir benchinfer
trap 'rm -rf "$W"' EXIT
case "$SKY_BUILD" in /*) SKY="$SKY_BUILD/bin/sky" ;; *) SKY="$(pwd)/$SKY_BUILD/bin/sky" ;; esac

# the bench's own work directory goes under $W/tmp, so any process it left
# behind names $W in its command line
mkdir -p "$W/tmp"
TMPDIR="$W/tmp" timeout -s KILL 900 "$SKY" bench infer --json --model tiny --layers 4 \
	--speeds "0.5 0.25 0.125" --algos "even optimal" --clients 2 --inflight 2 --seconds 3 \
	--train-steps 5 --timeout 300 >"$W/out.json" 2>"$W/err"
rc=$?
[ $rc -eq 0 ] && pass bench_infer_runs || fail bench_infer_runs "rc $rc: $(tail -5 "$W/err")"
sed 's/^/  /' "$W/out.json"

[ "$(grep -c '^{"algo":' "$W/out.json")" -eq 2 ] &&
	[ "$(sed -n 's/^{"algo":"\([a-z]*\)".*/\1/p' "$W/out.json" | tr '\n' ' ')" = "even optimal " ] &&
	pass bench_infer_one_object_per_algorithm ||
	fail bench_infer_one_object_per_algorithm "$(head -c 300 "$W/out.json")"
get() { # get ALGO KEY
	grep "\"algo\":\"$1\"" "$W/out.json" | sed -n "s/.*\"$2\":\([-0-9.e+]*\)[,}].*/\1/p"
}
for a in even optimal; do
	bad=""
	# a plan may rightly keep this tiny model on one board (optimal, when
	# the fastest board alone beats any cut): no frames between stages then,
	# so no batches reported by a later stage and no int8 saving on the wire
	keys="throughput_seq_s throughput_predicted_seq_s p50_ms p99_ms speedup_vs_even
		bytes_per_request bytes_per_request_fp32 requests warmup_s throughput_with_fill_seq_s"
	multi=$(awk "BEGIN{exit !($(get $a stages) > 1)}" 2>/dev/null && echo 1)
	[ -n "$multi" ] && keys="$keys batches batch_fill"
	for k in $keys; do
		v=$(get $a $k)
		[ -n "$v" ] && awk "BEGIN{exit !($v > 0)}" || bad="$bad $k='$v'"
	done
	awk "BEGIN{exit !($(get $a p50_ms) <= $(get $a p99_ms))}" 2>/dev/null || bad="$bad p50>p99"
	if [ -n "$multi" ]; then
		awk "BEGIN{exit !($(get $a bytes_per_request) < $(get $a bytes_per_request_fp32))}" 2>/dev/null ||
			bad="$bad int8-not-below-fp32"
	else
		[ "$(get $a frames)" = 0 ] && [ "$(get $a bytes_per_request)" = "$(get $a bytes_per_request_fp32)" ] ||
			bad="$bad one-stage-plan-with-frames=$(get $a frames)"
	fi
	[ "$(get $a errors)" = 0 ] || bad="$bad errors=$(get $a errors)"
	# the last stage's reports: a fill is a fraction of the plan's batch
	awk "BEGIN{exit !($(get $a batch_fill) <= 1)}" 2>/dev/null || bad="$bad fill>1"
	[ -z "$bad" ] && pass "bench_infer_${a}_figures_consistent" || fail "bench_infer_${a}_figures_consistent" "$bad"
	# the plan's stages tile the 8 half-layers
	stages=$(grep "\"algo\":\"$a\"" "$W/out.json" | grep -o '"first":[0-9]*,"last":[0-9]*' |
		sed 's/"first":\([0-9]*\),"last":\([0-9]*\)/\1-\2/' | tr '\n' ' ')
	echo "$stages" | awk '{ n = 0; for (i = 1; i <= NF; i++) { split($i, r, "-"); if (r[1] != n) exit 1; n = r[2] + 1 } exit n != 8 }' &&
		pass "bench_infer_${a}_plan_tiles_the_model" || fail "bench_infer_${a}_plan_tiles_the_model" "$stages"
done
te=$(get even throughput_seq_s)
to=$(get optimal throughput_seq_s)
se=$(get even speedup_vs_even)
so=$(get optimal speedup_vs_even)
if [ -n "$te" ] && [ -n "$to" ] && [ -n "$so" ] &&
	awk "BEGIN{r = $to / $te; exit !($so > r * 0.999 && $so < r * 1.001 && $se == 1)}"; then
	pass bench_infer_speedup_from_measured_throughputs
else
	fail bench_infer_speedup_from_measured_throughputs "even $te (x$se), optimal $to (x$so)"
fi
echo "MEASURE bench_infer_tiny even ${te} seq/s optimal ${to} seq/s speedup $so"

# nothing it started is left (its processes name its directory under $W)
sleep 0.5
left=$(pgrep -f "$W/" | tr '\n' ' ')
[ -z "$left" ] && pass bench_infer_leaves_no_process ||
	fail bench_infer_leaves_no_process "$(ps -o pid,args -p "$(echo $left | tr ' ' ',')" 2>&1)"
[ -z "$(ls "$W/tmp")" ] && pass bench_infer_removes_its_work_dir ||
	fail bench_infer_removes_its_work_dir "$(ls "$W/tmp")"
exit $((fails > 0))
