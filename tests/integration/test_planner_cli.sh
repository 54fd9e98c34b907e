#!/bin/sh
# sky plan / sky sim / sky bench planner from the outside: help, JSON keys,
# the paper's experiment, and bad input refused with a clear error and a
# non-zero exit. Needs no broker.
set -u
cd "$(dirname "$0")/../.."
B="${SKY_BUILD:-build/host}"
SKY="$B/bin/sky"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

pass() { echo "PASS $1"; }
fail() { echo "FAIL $1: $2"; }

# $1 name, $2 file, then keys that must appear in every line
has_keys() {
	name=$1 file=$2
	shift 2
	for k in "$@"; do
		if grep -v "\"$k\":" "$file" | grep -q .; then
			fail "$name" "a line lacks \"$k\": $(head -c 300 "$file")"
			return 1
		fi
	done
	[ -s "$file" ] || { fail "$name" "no output"; return 1; }
	pass "$name"
}

for cmd in plan sim; do
	if "$SKY" $cmd --help | grep -q -- "--fleet"; then pass "${cmd}_help"; else fail "${cmd}_help" "no usage"; fi
done

"$SKY" plan --paper --json >"$tmp/plan.json" 2>"$tmp/err"
if [ $? -eq 0 ]; then
	has_keys plan_json "$tmp/plan.json" algo stages board first_layer last_layer time_s \
		mem_bytes bottleneck_s lower_bound_s
else
	fail plan_json "exit non-zero: $(cat "$tmp/err")"
fi

"$SKY" sim --paper --json >"$tmp/sim.json" 2>"$tmp/err"
rc=$?
lines=$(wc -l <"$tmp/sim.json")
if [ $rc -eq 0 ] && [ "$lines" -eq 4 ]; then
	head -3 "$tmp/sim.json" >"$tmp/rows.json"
	has_keys sim_paper_json "$tmp/rows.json" algo step_s bottleneck_s lower_bound_s speedup_vs_even
	sed -n 4p "$tmp/sim.json" >"$tmp/rep.json"
	has_keys sim_replicas_json "$tmp/rep.json" replicas micro_batch share step_lower_bound_s \
		work_bound_s path_bound_s step_vs_lower_bound pipeline_step_s
else
	fail sim_paper_json "rc $rc, $lines lines: $(cat "$tmp/err")"
fi

# --no-replicas: what sky sim and sky plan said before replicas (the rows
# and the plan without them, unchanged)
"$SKY" sim --paper --json --no-replicas >"$tmp/norep.json" 2>"$tmp/err"
if cmp -s "$tmp/rows.json" "$tmp/norep.json"; then pass sim_no_replicas_as_before
else fail sim_no_replicas_as_before "$(diff "$tmp/rows.json" "$tmp/norep.json" | head -5)"; fi
"$SKY" sim --paper >"$tmp/sim.txt" 2>"$tmp/err"
"$SKY" sim --paper --no-replicas >"$tmp/norep-sim.txt" 2>>"$tmp/err"
if grep -q '^replicas ' "$tmp/sim.txt" && grep -v '^replicas ' "$tmp/sim.txt" | cmp -s - "$tmp/norep-sim.txt"
then pass sim_text_no_replicas_as_before
else fail sim_text_no_replicas_as_before "$(diff "$tmp/sim.txt" "$tmp/norep-sim.txt" | head -5)"; fi
"$SKY" plan --paper >"$tmp/plan.txt" 2>"$tmp/err"
"$SKY" plan --paper --no-replicas >"$tmp/norep.txt" 2>>"$tmp/err"
"$SKY" plan --paper --json --no-replicas >"$tmp/norep-plan.json" 2>>"$tmp/err"
if grep -q '^with replicas: ' "$tmp/plan.txt" && ! grep -q 'replicas' "$tmp/norep.txt" &&
	sed '/^with replicas: /,$d' "$tmp/plan.txt" | cmp -s - "$tmp/norep.txt" &&
	grep -q '"replicas":{' "$tmp/plan.json" && ! grep -q '"replicas"' "$tmp/norep-plan.json" &&
	[ "$(jq -S 'del(.replicas)' "$tmp/plan.json")" = "$(jq -S . "$tmp/norep-plan.json")" ]; then
	pass plan_no_replicas_as_before
else fail plan_no_replicas_as_before "$(diff "$tmp/plan.txt" "$tmp/norep.txt" | head -5) $(cat "$tmp/err")"; fi

# the default objective is the step: the same plan as --objective step, and
# a shorter simulated step than --objective bottleneck's
"$SKY" sim --paper --algo optimal --objective step --json >"$tmp/step.json" 2>"$tmp/err"
"$SKY" sim --paper --algo optimal --objective bottleneck --json >"$tmp/bott.json" 2>>"$tmp/err"
step_of() { sed -n "${2:-1}"'s/.*"step_s":\([0-9.e+-]*\).*/\1/p' "$1"; }
if awk -v a="$(step_of "$tmp/step.json")" -v d="$(step_of "$tmp/sim.json" 3)" \
	-v b="$(step_of "$tmp/bott.json")" \
	'BEGIN { exit !(a > 0 && b > 0 && a == d && a < b) }' &&
	grep -q '"objective":"step"' "$tmp/step.json" && grep -q '"step_exact":false' "$tmp/step.json" &&
	grep -q '"objective":"bottleneck"' "$tmp/bott.json"; then pass sim_step_objective
else fail sim_step_objective "$(cat "$tmp/step.json" "$tmp/bott.json" "$tmp/err" | head -c 600)"; fi

# the same experiment through its committed fleet file gives the same numbers
"$SKY" sim --fleet planner/data/paper-64.json --model large --layers 160 --micro-batch 1 \
	--micro-batches 32 --json >"$tmp/sim2.json" 2>"$tmp/err"
if cmp -s "$tmp/sim.json" "$tmp/sim2.json"; then pass paper_fleet_file_same_result
else fail paper_fleet_file_same_result "differs: $(diff "$tmp/sim.json" "$tmp/sim2.json" | head -5)"; fi

# plan a small fleet with each algorithm, text and JSON
cat >"$tmp/f.json" <<'JSON'
{"boards":[
 {"id":"pi4-a","fwd_s":0.9,"bwd_s":1.8,"mem_bytes":4294967296,"bw_Bps":1.25e8,"lat_s":0.002},
 {"id":"pi5-b","fwd_s":0.4,"bwd_s":0.8,"mem_bytes":8589934592,"bw_Bps":1.25e8,"lat_s":0.002},
 {"id":"x86-c","fwd_s":0.1,"bwd_s":0.2,"mem_bytes":8589934592,"bw_Bps":1.25e9,"lat_s":0.0005}]}
JSON
for a in even sky optimal; do
	if "$SKY" plan --fleet "$tmp/f.json" --model base --layers 24 --algo $a >"$tmp/out" 2>&1 &&
		grep -q "bottleneck" "$tmp/out"; then pass "plan_text_$a"
	else fail "plan_text_$a" "$(cat "$tmp/out")"; fi
done
"$SKY" sim --fleet "$tmp/f.json" --model base --layers 24 --algo even,sky,optimal --json \
	>"$tmp/s.json" 2>"$tmp/err" && has_keys sim_small_json "$tmp/s.json" algo step_s speedup_vs_even \
	|| fail sim_small_json "$(cat "$tmp/err")"

# bad input: non-zero exit, and stderr names the board and field
expect_error() { # name, fleet text, words that must be in the error
	name=$1
	printf '%s' "$2" >"$tmp/bad.json"
	shift 2
	if "$SKY" plan --fleet "$tmp/bad.json" >"$tmp/out" 2>"$tmp/err"; then
		fail "$name" "accepted"
		return
	fi
	for w in "$@"; do
		grep -q -- "$w" "$tmp/err" || { fail "$name" "error lacks '$w': $(cat "$tmp/err")"; return; }
	done
	pass "$name"
}
expect_error bad_zero_bandwidth \
	'{"boards":[{"id":"b1","fwd_s":1,"bwd_s":2,"mem_bytes":1000000000,"bw_Bps":0,"lat_s":0}]}' b1 bw_Bps
expect_error bad_missing_field \
	'{"boards":[{"id":"b1","fwd_s":1,"mem_bytes":1000000000,"bw_Bps":1,"lat_s":0}]}' b1 bwd_s
expect_error bad_duplicate_id \
	'{"boards":[{"id":"b1","fwd_s":1,"bwd_s":2,"mem_bytes":1,"bw_Bps":1,"lat_s":0},{"id":"b1","fwd_s":1,"bwd_s":2,"mem_bytes":1,"bw_Bps":1,"lat_s":0}]}' b1 "'id'" duplicate
expect_error bad_negative_time \
	'{"boards":[{"id":"b1","fwd_s":-1,"bwd_s":2,"mem_bytes":1,"bw_Bps":1,"lat_s":0}]}' b1 fwd_s
expect_error bad_json '{"boards":[' malformed
expect_error does_not_fit \
	'{"boards":[{"id":"b1","fwd_s":1,"bwd_s":2,"mem_bytes":1000,"bw_Bps":1,"lat_s":0}]}' "short by"
if "$SKY" plan --fleet /nonexistent.json 2>"$tmp/err"; then fail bad_path accepted
elif grep -q nonexistent "$tmp/err"; then pass bad_path; else fail bad_path "$(cat "$tmp/err")"; fi
if "$SKY" plan --paper --algo fastest 2>/dev/null; then fail bad_algo accepted; else pass bad_algo; fi

# the benchmark runs and reports plan_ms (timing is not asserted)
if "$SKY" bench planner --json --runs 1 --warmup 0 >"$tmp/b.json" 2>"$tmp/err"; then
	has_keys bench_planner_json "$tmp/b.json" plan_ms paper_plan_ms
else
	fail bench_planner_json "$(cat "$tmp/err")"
fi
