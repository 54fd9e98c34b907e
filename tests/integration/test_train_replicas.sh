#!/bin/sh
# Stage replicas across a fleet: mosquitto, skyplan and 5 skyd processes
# (each emulating a slow board, --speed, with 3 MiB to plan for, so that no
# board holds a replica of the whole tiny model (2 MiB stopped fitting a
# stage with its checkpoint buffers and 8 B/param sums once the planner
# priced roles with the board's own figure) and the planner splits it
# into stages and runs some of them on several boards). Which plan is best
# depends on what the boards measured, so each job is submitted with the
# first layer count of a short list whose plan (the planner's own choice)
# has what the case needs; a plan without it is cancelled and the next
# count tried. skyplan publishes the
# plan with replicas (sky job watch prints which boards run each stage and
# how many micro-batches each takes); the fleet's job reproduces `sky train
# --batch B --micro M --exact-sum` at the plan's B and M: each step's loss
# and the final weights byte for byte, with GPipe and with 1F1B, sealed
# frames. Every board runs with SKY_TEST_WRONG_REPLICA (a test hook of the
# transport): a replica of a replicated stage sends its first frame a second
# time claiming a micro-batch the plan routes through a sibling replica; the
# stage it reaches drops it and counts it ("replica" in the stage's drops,
# in sky fleet status), and the job's result is unchanged.
#
# PASS/FAIL lines, MEASURE lines; bounded (every wait has a deadline).
set -u
cd "$(dirname "$0")/../.."
. tests/integration/fleet.sh
SKY_FLEET_SKYD_OPTS="--keepalive 2 --model tiny --layers 4 --probe-seconds 1 --speed 0.01"
sky_fleet_begin train_replicas
printf 'name = small\nthreads = 1\nmem_cap_mb = 3\n' >"$W/small.conf"
sky_fleet_start
SKY_TEST_WRONG_REPLICA=1
export SKY_TEST_WRONG_REPLICA
sky_fleet_boards 5 --profile "$W/small.conf"

# replicas JOB: "B M R" from the watch's replicas line: the plan's
# micro-batch size and count, and how many stages run on 2 or more boards
replicas() {
	python3 -c '
import json, sys
for line in open(sys.argv[1]):
    try:
        d = json.loads(line)
    except ValueError:
        continue
    if "replicas" in d:
        r = d["replicas"]
        print(r["micro_batch"], r["micro_batches"], sum(len(s["boards"]) > 1 for s in r["stages"]),
              len(r["stages"]))
        break' "$W/$1.watch"
}
sky_fleet_reported_online() { [ "$("$SKY" fleet status --state "$STATE" --json 2>/dev/null | grep -o '"state":"online"' | wc -l)" -ge "$1" ]; }
# drops JOB REASON: frames dropped for REASON over the job's stages (sky fleet status)
drops() {
	"$SKY" fleet status --state "$STATE" --json 2>/dev/null | python3 -c '
import json, sys
n = 0
for line in sys.stdin:
    try:
        d = json.loads(line)
    except ValueError:
        continue
    for j in d.get("jobs", []):
        if j["job"] == sys.argv[1]:
            n += sum(s.get("drops", {}).get(sys.argv[2], 0) for s in j.get("stages", []))
print(n)' "$1" "$2"
}


# planned JOB NEED OPTION...: submits JOB<L> for L in the list until its plan
# has NEED (pipe: 2 or more stages, one run on several boards; any: a stage
# run on several boards; none: any plan), cancelling the others; the watch runs in WPID, the
# job is JN, its layers JL. Returns 1 when no count gave such a plan.
planned() {
	_j=$1
	_need=$2
	shift 2
	for ML in 2:4 2:3 2:5 2:6 4:4 4:3 4:5 4:6 4:8 2:2 2:8 4:2; do
		MM=${ML%%:*}
		JL=${ML#*:}
		JN=$_j$JL-$MM
		"$SKY" job watch $JN --pki "$PKI" --broker "$BR" --timeout 300 --json >"$W/$JN.watch" \
			2>"$W/$JN.watch.err" &
		WPID=$!
		sleep 0.5 # the watch subscribes before the job can start
		"$SKY" job submit --pki "$PKI" --broker "$BR" --model tiny --layers $JL --job $JN \
			--min-boards 5 --task train --wait 30 "$@" --micro "$MM" >"$W/$JN.submit" 2>&1
		st=$(sed -n 's/^job [^ ]* epoch [0-9]*: \([0-9]*\) stages.*/\1/p' "$W/$JN.submit")
		reps=$(grep -c "(replica)" "$W/$JN.submit")
		echo "MEASURE ${_j}_tried layers $JL, $MM micro-batches: ${st:-no} stages, $reps replica boards"
		[ "$_need" = none ] && [ -n "$st" ] && return 0
		if [ "${reps:-0}" -ge 1 ] && { [ "$_need" = any ] || [ "${st:-0}" -ge 2 ]; }; then
			return 0
		fi
		"$SKY" job cancel --job $JN --pki "$PKI" --broker "$BR" >/dev/null 2>&1
		kill $WPID 2>/dev/null
		wait $WPID 2>/dev/null
	done
	return 1
}

for run in ra:gpipe rb:1f1b; do
	J=${run%%:*}
	S=${run#*:}
	if ! planned $J pipe --sched "$S" --steps 3 --micro 2 --optimizer adamw --seed 5; then
		# Which plan is fastest depends on what the boards measured on this
		# machine (a CI machine once simulated the replicas' best plan no
		# faster than the pipeline at every count tried). Then the planner
		# must have decided each count with its reason (replicas over one
		# stage only, or "does not beat"); the replicas are tested by the
		# other schedule's case and by rd below.
		said=$(grep -o "job $J[0-9]*-[0-9]*: \(the plan with stage replicas .* does not beat\|no stage replicas\|stage replicas: \)" "$W/skyplan.log" | cut -d: -f1 | sort -u | wc -l)
		echo "MEASURE ${J}_no_plan_with_replicas $said of 12 counts decided: $(grep -h "job $J[0-9]" "$W/skyplan.log" | grep "stage replicas" | tail -2)"
		[ "$said" -ge 12 ] && pass "${J}_planner_says_why_the_pipeline_goes_out" ||
			fail "${J}_plan_pipelines_and_replicates_a_stage" "no layer count gave such a plan, and the planner said why for $said of 12: $(grep -h "stage replicas\|pipeline plan goes out" "$W/skyplan.log" | tail -3)"
		continue
	fi
	replicated=$((${replicated:-0} + 1))
	pass "${J}_plan_pipelines_and_replicates_a_stage"
	wait $WPID
	wrc=$?
	[ $wrc -eq 0 ] && pass "${J}_job_ends" || fail "${J}_job_ends" "watch rc $wrc: $(tail -3 "$W/$JN.watch.err")"
	"$SKY" job collect $JN --pki "$PKI" --broker "$BR" --out "$W/$JN.safetensors" --timeout 30 \
		>"$W/$JN.collect" 2>&1 || fail "${J}_collect" "$(cat "$W/$JN.collect")"
	set -- $(replicas $JN)
	B=${1:-8}
	M=${2:-2}
	echo "MEASURE ${J}_plan $(grep -m1 '"replicas"' "$W/$JN.watch")"
	grep -q "job $JN: all .* sealed frames" "$W"/b*.log && pass "${J}_frames_sealed" ||
		fail "${J}_frames_sealed" "no 'sealed frames' line for $JN in the boards' logs"
	sky_fleet_same_as_one_board $JN $JL --steps 3 --batch "$B" --micro "$M" --optim adamw --seed 5 --exact-sum
	# the wrong replica's frame: sent (said in its board's log), dropped and
	# counted by the stage it reached, with its reason
	sent=$(grep -l "job $JN: sending micro-batch .* which the plan routes through another replica" "$W"/b*.log | wc -l)
	n=$(drops $JN replica)
	echo "MEASURE ${J}_wrong_replica_frames sent_by $sent boards, dropped $n"
	[ "$sent" -ge 1 ] && [ "${n:-0}" -ge 1 ] && pass "${J}_wrong_replicas_frame_dropped_and_counted" ||
		fail "${J}_wrong_replicas_frame_dropped_and_counted" "sent by $sent boards, 'replica' drops $n: $("$SKY" fleet status --state "$STATE" | sed -n "/^job $JN /,/^job /p" | head -8)"
	"$SKY" fleet status --state "$STATE" | sed -n "/^job $JN /,/^job /p" | head -8 | sed 's/^/  /'
done
# sky fleet status names each replica
[ "${replicated:-0}" -ge 1 ] || fail ra_rb_plan_pipelines_and_replicates_a_stage "neither schedule's case got a plan with replicas"
"$SKY" fleet status --state "$STATE" | grep -q "(replica [1-9])" && pass fleet_status_shows_replicas ||
	fail fleet_status_shows_replicas "$("$SKY" fleet status --state "$STATE" | sed -n '/^job /,$p' | head -8)"

# ---- a board dies mid-job, a checkpoint every step: the job re-plans over the
# boards left from the last checkpoint and ends with the weights of a run
# without the fault. rd: a replica of a replicated stage dies (the plan keeps
# its micro-batching and fixed-point sums; the smaller re-plan, the stages
# kept, is taken when it simulates shorter than the search's). rp: the same job planned
# without replicas (--no-replicas), a stage's board dies: the full re-plan of
# today. MEASURE lines: seconds from the kill to the re-plan and to the next
# committed step (a benchmark figure, docs/training.md; not asserted)
now() { date +%s.%N | cut -c1-14; }
steps_seen() { [ "$(grep -c '"step"' "$W/$1.watch" 2>/dev/null)" -ge "$2" ]; }
# victim JOB: a replica (not the stage's own board) of a stage run on several
# boards, from the watch's replicas line; for a plan without, stage 1's board
victim() {
	python3 -c '
import json, sys
for line in open(sys.argv[1]):
    try:
        d = json.loads(line)
    except ValueError:
        continue
    if "replicas" in d:
        for s in d["replicas"]["stages"]:
            if len(s["boards"]) > 1:
                print(s["boards"][-1]["board"])
                sys.exit(0)' "$W/$1.watch"
}
for run in rd rp; do
	J=$run
	if [ $J = rd ]; then
		planned rd any --sched 1f1b --steps 40 --micro 2 --optimizer adamw --seed 7 --checkpoint-every 1 ||
			fail rd_plan_has_replicas "no layer count gave a plan with replicas"
	else
		planned rp none --no-replicas --sched 1f1b --steps 40 --micro 2 --optimizer adamw --seed 7 \
			--checkpoint-every 1 || true
	fi
	wpid=$WPID
	J=$JN
	sky_wait 120 steps_seen $J 3 || fail "${J}_steps" "$(head -3 "$W/$J.watch")"
	if [ $run = rd ]; then
		v=$(victim $J)
	else
		v=$(sed -n 's/^ *stage  1  \(b[0-9]*\) .*/\1/p' "$W/$J.submit" | head -1)
	fi
	[ -n "$v" ] || fail "${J}_victim" "no board to kill: $(grep -m1 replicas "$W/$J.watch"; cat "$W/$J.submit")"
	eval "vp=\${PID_$v:-}"
	t0=$(now)
	kill -KILL "$vp" 2>/dev/null
	echo "MEASURE ${J}_killed $v at step $(grep -c '"step"' "$W/$J.watch")"
	wait $wpid
	wrc=$?
	[ $wrc -eq 0 ] && pass "${J}_job_finishes_after_the_kill" ||
		fail "${J}_job_finishes_after_the_kill" "watch rc $wrc: $(tail -3 "$W/$J.watch" "$W/$J.watch.err")"
	LOGF="$STATE/jobs/$J.log.jsonl"
	sky_wait 120 grep -q '"event":"done"' "$LOGF"
	"$SKY" job collect $J --pki "$PKI" --broker "$BR" --out "$W/$J.safetensors" --timeout 30 \
		>"$W/$J.collect" 2>&1 || fail "${J}_collect" "$(cat "$W/$J.collect")"
	set -- $(replicas $J)
	if [ $run = rd ]; then
		[ $# -eq 4 ] || fail rd_plan_has_replicas "no replicas line in $J.watch"
		ref="--batch ${1:-8} --micro ${2:-2} --exact-sum"
	else
		ref="--micro $MM"
	fi
	# shellcheck disable=SC2086 # ref is a word list
	"$SKY" train --model tiny --layers $JL --steps 40 --optim adamw --seed 7 --eval 4 $ref \
		--save "$W/$J.ref.safetensors" >"$W/$J.ref" 2>&1 || fail "${J}_sky_train" "$(tail -2 "$W/$J.ref")"
	cmp -s "$W/$J.safetensors" "$W/$J.ref.safetensors" &&
		pass "${J}_final_weights_equal_the_fault_free_run" ||
		fail "${J}_final_weights_equal_the_fault_free_run" "$(cmp "$W/$J.safetensors" "$W/$J.ref.safetensors" 2>&1 | head -1)"
	grep -q '"event":"replan"' "$LOGF" && pass "${J}_replanned" || fail "${J}_replanned" "$(cat "$LOGF")"
	grep -h "smaller re-plan\|job $J re-planned" "$W/skyplan.log" | sed 's/^/  /' | head -3
	awk -v t0="$t0" -v job="$J" -v v="$v" '
		/"event":"replan"/ && !r { match($0, /"t":[0-9.]+/); rt = substr($0, RSTART + 4, RLENGTH - 4); if (rt + 0 >= t0 + 0) r = rt }
		/"event":"commit"/ && !c { match($0, /"t":[0-9.]+/); ct = substr($0, RSTART + 4, RLENGTH - 4); if (r && ct + 0 >= r + 0) c = ct }
		END { printf "MEASURE {\"job\":\"%s\",\"killed\":\"%s\",\"detect_s\":%s,\"next_commit_s\":%s}\n", job, v,
			r ? sprintf("%.3f", r - t0) : "null", c ? sprintf("%.3f", c - t0) : "null" }' "$LOGF"
	# the board comes back for the next run
	sky_fleet_skyd "$v" --profile "$W/small.conf"
	sky_wait 60 sky_fleet_reported_online 5
done
exit $((fails > 0))
