#!/bin/sh
# The planner restarts under a serving job and keeps following it:
# mosquitto, skyplan and four skyd boards serve a tiny int8 model (`sky job
# submit --task infer`, an even split over all four) while a client keeps
# requests coming (a new `sky infer` of four rows every 0.15 s). skyplan is
# killed with SIGKILL mid-flow and started again on the same state
# directory. The boards serve on meanwhile (the data plane does not go
# through the planner), and skyplan must
#   - take the job back from <state>/jobs/<job>.run.json (its signed plan,
#     model and slices verified again), and answer no request unknown_job:
#     every request before, during and after the restart gets exactly one
#     answer whose logits equal `sky eval --precision int8` bit for bit;
#   - re-plan it when a board dies after the restart (a higher epoch than
#     before), replay the requests in flight at that board, and answer on;
# then a slice file damaged on disk is cut again from the model at the next
# restart, and a truncated run file is refused with a line naming it and
# what is wrong (the job is then not followed). No process is left. One
# JSON per event goes to build/faults/serve_restart-*.json.
#
# PASS/FAIL lines, MEASURE lines; bounded (every wait has a deadline).
set -u
cd "$(dirname "$0")/../.."
. tests/integration/fleet.sh
. tests/integration/serve_lib.sh
sky_fleet_begin serverestart
OUT=${FAULTS_OUT:-build/faults}
mkdir -p "$OUT"
# the boards and the clients: each its pid in $W/pid.NAME
trap 'sky_fleet_end $(cat "$W"/pid.* 2>/dev/null)' EXIT
now() { date +%s.%N | cut -c1-14; }
JOB=sv
LOG="$W/skyplan/jobs/$JOB.log.jsonl"
RUN="$W/skyplan/jobs/$JOB.run.json"

# ---- the model, four rows of input and their logits on one board ------------------
sky_serve_model serverestart 4 || exit 1

# ---- broker, client identity, planner, four boards ----------------------------------
sky_serve_fleet serverestart b1 b2 b3 b4 || exit 1

"$SKY" job submit --pki "$PKI" --broker "$BR" --job $JOB --min-boards 4 --task infer \
	--weights "$W/q.safetensors" --algo even --clients sky-client-t --wait 120 >"$W/submit.out" 2>&1 ||
	{ fail serverestart_submitted "$(tail -3 "$W/submit.out" "$W/skyplan.log")"; exit 1; }
newest_epoch() {
	grep -h "plan $JOB epoch [0-9]* accepted: stage 0 of" "$W"/b*.log 2>/dev/null |
		sed -n "s/.*plan $JOB epoch \([0-9]*\) accepted:.*/\1/p" | sort -n | tail -1
}
first=$(sky_serve_stage_board 0)
sky_wait 120 grep -q "job $JOB: every stage is ready" "$W/$first.log" ||
	{ fail serverestart_fleet_ready "$(grep -h "$JOB" "$W"/b*.log | tail -5)"; exit 1; }
[ -f "$RUN" ] && grep -q '"plan_sha256":"[0-9a-f]\{64\}"' "$RUN" && grep -q '"slice":"[0-9a-f]\{64\}"' "$RUN" &&
	pass serverestart_run_file_names_plan_and_slices ||
	fail serverestart_run_file_names_plan_and_slices "$(head -c 400 "$RUN" 2>&1)"
EPOCH0=$(newest_epoch)

# ---- clients: a new `sky infer` of the four rows every 0.15 s ------------------------
# (an unknown_job answer is a wrong one)
check() {
	sky_serve_check "$@"
	echo "MEASURE $1_requests $SERVE_TOTAL"
}
followed_count() { grep -c "job $JOB: serving followed again after a restart" "$W/skyplan.log"; }

# ---- skyplan is killed mid-flow and started again -------------------------------------
from=$N
sky_serve_flow 2
t0=$(now)
kill -KILL "$PLAN_PID"
wait "$PLAN_PID" 2>/dev/null
PLAN_PID=""
sky_serve_flow 2 # the boards serve on without the planner
sky_fleet_planner || { fail serverestart_skyplan_restarts "$(tail -3 "$W/skyplan.log")"; exit 1; }
[ "$(followed_count)" -eq 1 ] && pass restart_serving_job_followed_again ||
	fail restart_serving_job_followed_again "$(grep -i "$JOB\|damaged" "$W/skyplan.log" | tail -3)"
sky_serve_flow 3 # and with the planner back
check restart "$from" "$N"
printf '{"scenario":"serve_restart-restart","job":"%s","at":%s,"requests":%d}\n' $JOB "$t0" $(((N - from) * 4)) \
	>"$OUT/serve_restart-restart.json"

# ---- then a board dies: the job is re-planned past the epoch before the restart ------
victim=$(sky_serve_stage_board 1)
from=$N
sky_serve_flow 1
# frozen first (SIGSTOP, well within its keepalive), so requests are
# certainly in flight at it when it dies
kill -STOP "$(cat "$W/pid.$victim")"
sky_serve_flow 1
t0=$(now)
kill -KILL "$(cat "$W/pid.$victim")" 2>/dev/null
wait "$(cat "$W/pid.$victim")" 2>/dev/null
rm -f "$W/pid.$victim"
replanned() { grep '"event":"replan"' "$LOG" 2>/dev/null | tail -1 | grep -q "\"reason\":\"board $victim (stage 1) offline\""; }
_end=$(($(date +%s) + 90))
while ! replanned && [ "$(date +%s)" -lt "$_end" ]; do # ask on until it re-plans (bounded)
	sky_serve_ask
	sleep 0.3
done
answered_after() {
	awk -v t="$1" '/"event":"answered"/ { match($0, /"t":[0-9.]+/); if (substr($0, RSTART + 4, RLENGTH - 4) + 0 >= t) f = 1 } END { exit !f }' "$LOG" 2>/dev/null
}
_end=$(($(date +%s) + 90))
while ! answered_after "$t0" && [ "$(date +%s)" -lt "$_end" ]; do
	sky_serve_ask
	sleep 0.3
done
sky_serve_flow 2
check replan "$from" "$N"
replanned && pass replan_after_restart_for_the_dead_board ||
	fail replan_after_restart_for_the_dead_board "$(grep -v commit "$LOG" | tail -3)"
e=$(grep '"event":"replan"' "$LOG" | tail -1 | sed -n 's/.*"epoch":\([0-9]*\).*/\1/p')
[ -n "$e" ] && [ "$e" -gt "${EPOCH0:-0}" ] && pass replan_after_restart_epoch_grows ||
	fail replan_after_restart_epoch_grows "epoch $e after $EPOCH0"
grep '"event":"replayed"' "$LOG" | tail -1 | grep -q '"requests":[1-9]' && pass replan_after_restart_requests_in_flight_replayed ||
	fail replan_after_restart_requests_in_flight_replayed "$(grep -v commit "$LOG" | tail -3)"
awk -v t0="$t0" '/"event":"replan"/ && !r { match($0, /"t":[0-9.]+/); rt = substr($0, RSTART + 4, RLENGTH - 4); if (rt + 0 >= t0 + 0) r = rt }
	/"event":"answered"/ && r && !a { match($0, /"t":[0-9.]+/); at = substr($0, RSTART + 4, RLENGTH - 4); if (at + 0 >= r + 0) a = at }
	END { printf "{\"scenario\":\"serve_restart-replan\",\"at\":%.3f,\"detect_s\":%s,\"next_answer_s\":%s}\n", t0,
		r ? sprintf("%.3f", r - t0) : "null", a ? sprintf("%.3f", a - t0) : "null" }' "$LOG" >"$OUT/serve_restart-replan.json"
echo "MEASURE $(cat "$OUT/serve_restart-replan.json")"

# ---- a damaged slice is cut again from the model at the next restart -----------------
sl=$(grep -o '"slice":"[0-9a-f]*"' "$RUN" | head -1 | cut -d'"' -f4) # stage 0's
kill -KILL "$PLAN_PID"
wait "$PLAN_PID" 2>/dev/null
PLAN_PID=""
printf 'XXXX' | dd of="$W/skyplan/slices/$sl.safetensors" bs=1 seek=100 conv=notrunc 2>/dev/null
sky_fleet_planner || { fail serverestart_skyplan_restarts "$(tail -3 "$W/skyplan.log")"; exit 1; }
grep -q "job $JOB: slice of stage 0 $W/skyplan/slices/$sl.safetensors: hashes to .*cutting it again from the model" "$W/skyplan.log" &&
	grep -q "job $JOB: slice of stage 0 cut again from the model" "$W/skyplan.log" &&
	[ "$(followed_count)" -eq 2 ] && pass damaged_slice_cut_again ||
	fail damaged_slice_cut_again "$(grep -i "slice\|followed" "$W/skyplan.log" | tail -3)"
from=$N
sky_serve_flow 2
check after_recut "$from" "$N"

# ---- a truncated run file is refused with its reason ---------------------------------
kill -KILL "$PLAN_PID"
wait "$PLAN_PID" 2>/dev/null
PLAN_PID=""
head -c 100 "$RUN" >"$W/run.cut" && cp "$W/run.cut" "$RUN"
sky_fleet_planner || { fail serverestart_skyplan_restarts "$(tail -3 "$W/skyplan.log")"; exit 1; }
grep -q "job state $RUN is damaged: .*; that job is not followed" "$W/skyplan.log" &&
	[ "$(followed_count)" -eq 2 ] && pass truncated_run_file_refused_with_its_reason ||
	fail truncated_run_file_refused_with_its_reason "$(grep -i "damaged\|followed" "$W/skyplan.log" | tail -3)"

# ---- no process left ------------------------------------------------------------------
sky_fleet_kill $(cat "$W"/pid.* 2>/dev/null)
rm -f "$W"/pid.*
sky_broker_stop
sleep 0.2
if pgrep -f "$W" >/dev/null 2>&1; then
	fail serverestart_no_process_left "$(pgrep -af "$W" | head -3)"
else
	pass serverestart_no_process_left
fi
exit "$fails"
