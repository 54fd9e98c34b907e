#!/bin/sh
# The planner restarts mid-job and keeps following it: mosquitto, skyplan and
# four skyd boards (tiny BERT, 4 layers split evenly, one stage a board,
# each board emulating a slow core so a step lasts long enough). A training
# job checkpoints every K=4 steps. skyplan is killed with SIGKILL mid-run
# while the boards train on (their checkpoint parts wait for it in its
# persistent session), then started again on the same state directory. It
# must
#   - take the job back from <state>/jobs/<job>.run.json and its checkpoints
#     from <state>/ckpt/<job>/index.json (files verified again),
#   - commit the steps that arrive after its restart (none twice),
#   - re-plan when a board dies after the restart, from the last complete
#     checkpoint, with a higher generation and epoch,
# and the job ends with final weights byte-equal to a fault-free
# `sky train --save`, every K-th step and the last committed once and in
# order, the run state removed once it is done. Then a damaged job state
# file and a missing checkpoint index are errors naming the file, and the
# planner goes on serving. No process is left. One JSON per event goes to
# build/faults/ (planner_restart-*.json).
#
# PASS/FAIL lines, MEASURE lines; bounded (every wait has a deadline).
set -u
cd "$(dirname "$0")/../.."
. tests/integration/fleet.sh
sky_fleet_begin restart
OUT=${FAULTS_OUT:-build/faults}
mkdir -p "$OUT"
WPID=""
# the boards: each its pid in $W/pid.NAME
trap 'sky_fleet_end $(cat "$W"/pid.* 2>/dev/null) $WPID' EXIT
now() { date +%s.%N | cut -c1-14; }

sky_fleet_broker
JOB=jr
STEPS=120
K=4
SEED=7
LOG="$STATE/jobs/$JOB.log.jsonl"
RUN="$STATE/jobs/$JOB.run.json"
# no voluntary re-plans: only the faults this test makes
start_planner() { # start_planner LOGFILE
	"$SKY_BIN/skyplan" --pki "$PKI" --broker "$BR" --state "$STATE" --replan-holdoff 3600 \
		--replan-gain 0.9 >>"$1" 2>&1 &
	PLAN_PID=$!
}
start_planner "$W/skyplan.log"
sky_wait 10 grep -q "serving" "$W/skyplan.log" || {
	fail restart_skyplan_starts "$(tail -3 "$W/skyplan.log")"
	exit 1
}

start_board() {
	sky_fleet_enroll "$1" --no-link-probe --speed "${SPEED:-0.01}"
	echo $! >"$W/pid.$1"
	PIDS="" # tracked by its pid file alone: a board killed here leaves it
}
online_count() {
	"$SKY" fleet status --state "$STATE" --json 2>/dev/null | grep -o '"state":"online"' | wc -l
}
online_at_least() { [ "$(online_count)" -ge "$1" ]; }
# stage_board K: the board holding stage K of the job's newest epoch
stage_board() {
	e=$(grep -h "plan $JOB epoch [0-9]* accepted: stage $1 of" "$W"/b*.log 2>/dev/null |
		sed -n "s/.*plan $JOB epoch \([0-9]*\) accepted: stage $1 of.*/\1/p" | sort -n | tail -1)
	[ -n "$e" ] || return 1
	grep -l "plan $JOB epoch $e accepted: stage $1 of" "$W"/b*.log | head -1 | sed 's|.*/\(b[0-9]*\)\.log|\1|'
}
# the steps the last stage's board logged (the watch gets metrics only
# through skyplan, which relays them to the job's owner)
board_steps() { cat "$W"/b*.log 2>/dev/null | grep -c "job $JOB step [0-9]* loss"; }
board_step() { [ "$(board_steps)" -ge "$1" ]; }
commits() { sed -n 's/.*"event":"commit".*"step":\([0-9]*\).*/\1/p' "$LOG" 2>/dev/null | tr '\n' ' '; }

for b in b1 b2 b3 b4; do start_board $b; done
sky_wait 90 online_at_least 4 || fail restart_boards_online "$(online_count) of 4 online"

REF="$W/ref.safetensors"
"$SKY" train --model tiny --layers 4 --steps $STEPS --micro 2 --optim adamw --seed $SEED \
	--save "$REF" >"$W/ref.log" 2>&1 || fail restart_sky_train "$(tail -2 "$W/ref.log")"
"$SKY" job watch "$JOB" --pki "$PKI" --broker "$BR" --timeout 240 --json >"$W/watch" 2>"$W/watch.err" &
WPID=$!
sleep 0.5
"$SKY" job submit --pki "$PKI" --broker "$BR" --model tiny --layers 4 --job "$JOB" --algo even \
	--min-boards 4 --task train --steps $STEPS --micro 2 --sched 1f1b --optimizer adamw \
	--seed $SEED --checkpoint-every $K --plaintext-frames --wait 30 >"$W/submit" 2>&1 ||
	fail restart_submitted "$(tail -3 "$W/submit")"

# ---- kill -9 the planner mid-job, after its first commit -----------------------
sky_wait 90 sh -c "grep -q '\"event\":\"commit\"' '$LOG'" || fail restart_first_commit "$(tail -3 "$W/skyplan.log")"
[ -f "$RUN" ] && pass restart_run_state_saved || fail restart_run_state_saved "no $RUN"
cp "$RUN" "$W/run.copy" 2>/dev/null
E0=$(cat "$STATE/epoch")
kill -KILL "$PLAN_PID"
wait "$PLAN_PID" 2>/dev/null
t_kill=$(now)
s_kill=$(board_steps)
echo "MEASURE planner_killed at step $s_kill, commits: $(commits)"
# the boards train on without it (at least one more checkpoint goes out)
sky_wait 60 board_step $((s_kill + 4 * K)) || fail restart_boards_train_on "$(board_steps) steps logged by the boards"
start_planner "$W/skyplan2.log"
t_restart=$(now)
sky_wait 15 grep -q "job $JOB: followed again after a restart: epoch $E0, generation 1, 4 stages" \
	"$W/skyplan2.log" && pass restart_planner_follows_the_job_again ||
	fail restart_planner_follows_the_job_again "$(grep -i "$JOB\|error" "$W/skyplan2.log" | head -5)"
n_before=$(grep -c '"event":"commit"' "$LOG")
sky_wait 60 sh -c "[ \$(grep -c '\"event\":\"commit\"' '$LOG') -gt $n_before ]" &&
	grep -q "job $JOB: step [0-9]* committed" "$W/skyplan2.log" &&
	pass restart_commits_go_on_after_the_restart ||
	fail restart_commits_go_on_after_the_restart "commits $(commits); $(grep -i "checkpoint\|refused" "$W/skyplan2.log" | tail -3)"

# ---- a board dies after the restart: re-planned from the last checkpoint --------
victim=$(stage_board 1)
t_board=$(now)
if [ -n "$victim" ]; then
	kill -KILL "$(cat "$W/pid.$victim")"
	wait "$(cat "$W/pid.$victim")" 2>/dev/null
	rm -f "$W/pid.$victim"
fi
echo "MEASURE board_killed $victim after the restart"
if ! sky_wait 30 grep -q '"event":"replan"' "$LOG"; then
	fail restart_replanned "$(tail -3 "$LOG")"
	kill "$WPID" 2>/dev/null # the job cannot finish: no need to wait for the watch's timeout
fi
r=$(grep '"event":"replan"' "$LOG" | head -1)
echo "MEASURE replan $r"
echo "$r" | grep -q '"generation":2,' && echo "$r" | grep -q "\"from_epoch\":$E0," &&
	echo "$r" | grep -q "\"reason\":\"board $victim (stage 1) offline\"" &&
	echo "$r" | grep -q '"resume_step":\(4\|8\|12\|16\|20\|24\|28\|32\|36\),' &&
	grep -q "job $JOB re-planned (generation 2" "$W/skyplan2.log" &&
	pass restart_board_death_replanned_from_a_checkpoint_generation_grows ||
	fail restart_board_death_replanned_from_a_checkpoint_generation_grows "$r"

wait $WPID
wrc=$?
WPID=""
[ $wrc -eq 0 ] && pass restart_training_finishes ||
	fail restart_training_finishes "watch rc $wrc: $(tail -3 "$W/watch" "$W/watch.err")"
"$SKY" job collect "$JOB" --pki "$PKI" --broker "$BR" --out "$W/$JOB.safetensors" \
	--timeout 30 >"$W/collect" 2>&1 || fail restart_collect "$(cat "$W/collect")"
cmp -s "$W/$JOB.safetensors" "$REF" &&
	pass restart_final_weights_bit_exact_with_fault_free_sky_train ||
	fail restart_final_weights_bit_exact_with_fault_free_sky_train "$(cmp "$W/$JOB.safetensors" "$REF" 2>&1 | head -1)"
want=$(seq $K $K $STEPS | tr '\n' ' ')
[ "$(commits)" = "$want" ] && pass restart_every_kth_step_committed_once_in_order ||
	fail restart_every_kth_step_committed_once_in_order "commits: $(commits), want $want"
sky_wait 15 sh -c "grep -q '\"event\":\"done\"' '$LOG'" && sky_wait 5 sh -c "[ ! -f '$RUN' ]" &&
	pass restart_done_and_run_state_removed || fail restart_done_and_run_state_removed "$(tail -2 "$LOG"); $(ls "$STATE/jobs")"
awk -v t0="$t_kill" -v t1="$t_restart" -v t2="$t_board" '
	/"event":"commit"/ && !c { match($0, /"t":[0-9.]+/); ct = substr($0, RSTART + 4, RLENGTH - 4); if (ct + 0 >= t1 + 0) c = ct }
	/"event":"replan"/ && !r { match($0, /"t":[0-9.]+/); r = substr($0, RSTART + 4, RLENGTH - 4) }
	/"event":"commit"/ && r && !c2 { match($0, /"t":[0-9.]+/); ct = substr($0, RSTART + 4, RLENGTH - 4); if (ct + 0 >= r + 0) c2 = ct }
	END { printf "{\"scenario\":\"planner_restart\",\"planner_down_s\":%.3f,\"first_commit_after_restart_s\":%s,", t1 - t0, c ? sprintf("%.3f", c - t1) : "null"
	      printf "\"board_detect_s\":%s,\"next_commit_after_board_s\":%s}\n", r ? sprintf("%.3f", r - t2) : "null", c2 ? sprintf("%.3f", c2 - t2) : "null" }' \
	"$LOG" >"$OUT/planner_restart-1.json"
echo "MEASURE $(cat "$OUT/planner_restart-1.json")"

# ---- damaged and missing state: errors naming the file, never a crash ----------
kill "$PLAN_PID" && wait "$PLAN_PID"
PLAN_PID=""
printf '{"v":1,"job":"jx","req":' >"$STATE/jobs/jx.run.json"
cp "$W/run.copy" "$RUN"
rm -f "$STATE/ckpt/$JOB/index.json"
start_planner "$W/skyplan3.log"
sky_wait 15 grep -q "serving" "$W/skyplan3.log" && sleep 1 && kill -0 "$PLAN_PID" 2>/dev/null &&
	pass restart_damaged_state_planner_keeps_serving ||
	fail restart_damaged_state_planner_keeps_serving "$(tail -5 "$W/skyplan3.log")"
grep -q "error: job state $STATE/jobs/jx.run.json is damaged" "$W/skyplan3.log" &&
	pass restart_damaged_job_state_named || fail restart_damaged_job_state_named "$(grep -i error "$W/skyplan3.log" | head -3)"
grep -q "error: job $JOB: checkpoint index $STATE/ckpt/$JOB/index.json: missing" "$W/skyplan3.log" &&
	pass restart_missing_checkpoint_index_named || fail restart_missing_checkpoint_index_named "$(grep -i error "$W/skyplan3.log" | head -3)"

# ---- no process left ---------------------------------------------------------
# the planner first: it follows the finished job again (its state put back,
# its checkpoints unknown), and boards going away would have it re-planned
kill "$PLAN_PID" && wait "$PLAN_PID"
PLAN_PID=""
for f in "$W"/pid.*; do
	[ -f "$f" ] && kill "$(cat "$f")" 2>/dev/null && wait "$(cat "$f")" 2>/dev/null
	rm -f "$f"
done
sleep 0.2
left=$(pgrep -af "$W/" | grep -v mosquitto | wc -l)
[ "$left" -eq 0 ] && pass restart_no_process_left || fail restart_no_process_left "$(pgrep -af "$W/")"
exit $((fails > 0))
