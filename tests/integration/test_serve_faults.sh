#!/bin/sh
# Serving survives faults: mosquitto, skyplan and nine skyd boards serve a
# tiny int8 model of 6 layers (`sky job submit --task infer`, an even split:
# a stage per layer, three boards spare) while clients keep requests coming: a new `sky infer` every
# 0.15 s, each sending four rows at once and waiting for their answers.
# Then, one after the other, a board is revoked (`sky pki revoke`), and the
# board of a middle stage, of the first stage and of the last stage is
# frozen for a second (requests pile up at it) and killed with SIGKILL; then
# two boards at once; then one, and a second as soon as the planner has
# re-planned for the first (the fleet still recovering: the new stages not
# ready, nothing replayed yet); then the boards left, so the job pauses, and
# one comes back. Each time
#   - skyplan re-plans the serving job over the boards left (its job log,
#     <state>/jobs/<job>.log.jsonl: "replan", then "answered"), or pauses
#     it (logged, `sky fleet status`) and resumes it when a board returns;
#   - every request any client sent, before, during or after the kill, gets
#     exactly one answer, and its logits equal `sky eval --precision int8`
#     of the same row bit for bit (requests in flight are replayed by the
#     planner to the new first stage; an answer from outside the plan is dropped by the
#     client and counted);
#   - `sky fleet status` shows the re-plan: reason, requests replayed,
#     time lost;
# and one JSON per event goes to build/faults/serve-*.json: time to detect
# (kill or revocation to the planner's re-plan, or to its pause) and to the
# next answered request (to the first answer of the new plan; after a pause
# that includes the board's restart and probe), requests sent and replayed,
# duplicates dropped by the clients. No process is left.
#
# PASS/FAIL lines, MEASURE lines; bounded (every wait has a deadline).
set -u
cd "$(dirname "$0")/../.."
. tests/integration/fleet.sh
. tests/integration/serve_lib.sh
sky_fleet_begin servefaults
OUT=${FAULTS_OUT:-build/faults}
mkdir -p "$OUT"
# the boards and the clients: each its pid in $W/pid.NAME
trap 'touch "$W/stop"; sky_fleet_end $(cat "$W"/pid.* 2>/dev/null)' EXIT
now() { date +%s.%N | cut -c1-14; }
JOB=sv
LOG="$W/skyplan/jobs/$JOB.log.jsonl"

# ---- the model, four rows of input and their logits on one board ------------------
sky_serve_model servefaults 6 || exit 1

# ---- broker, client identity, planner, nine boards ----------------------------------
BOARDS="b1 b2 b3 b4 b5 b6 b7 b8 b9"
# shellcheck disable=SC2086
sky_serve_fleet servefaults $BOARDS || exit 1
# an idle board identity, for a forged answer below (never runs skyd)
"$SKY" pki issue --dir "$PKI" --id bx --state "$W/bx" >/dev/null 2>"$W/bx.issue" ||
	fail servefaults_board_issued "$(cat "$W/bx.issue")"

"$SKY" job submit --pki "$PKI" --broker "$BR" --job $JOB --min-boards 9 --task infer \
	--weights "$W/q.safetensors" --algo even --clients sky-client-t --wait 120 >"$W/submit.out" 2>&1 ||
	{ fail servefaults_submitted "$(tail -3 "$W/submit.out" "$W/skyplan.log")"; exit 1; }
n_stages() {
	e=$(grep -h "plan $JOB epoch [0-9]* accepted: stage 0 of" "$W"/b*.log |
		sed -n "s/.*plan $JOB epoch \([0-9]*\) accepted:.*/\1/p" | sort -n | tail -1)
	grep -h "plan $JOB epoch $e accepted: stage 0 of" "$W"/b*.log | head -1 | sed -n 's/.*stage 0 of \([0-9]*\),.*/\1/p'
}
first=$(sky_serve_stage_board 0)
sky_wait 120 grep -q "job $JOB: every stage is ready" "$W/$first.log" ||
	{ fail servefaults_fleet_ready "$(grep -h "$JOB" "$W"/b*.log | tail -5)"; exit 1; }
ns=$(n_stages)
echo "MEASURE first_plan_stages $ns"
# even: a stage per layer (6), three boards spare until the kills need them
[ "${ns:-0}" -eq 6 ] && pass servefaults_six_stages || fail servefaults_six_stages "$ns stages"

# ---- clients: a new `sky infer` of the four rows every 0.15 s ------------------------
answered_after() { # answered_after T: a client finished after time T
	grep -q '"event":"answered"' "$LOG" 2>/dev/null &&
		awk -v t="$1" '/"event":"answered"/ { match($0, /"t":[0-9.]+/); if (substr($0, RSTART + 4, RLENGTH - 4) + 0 >= t) f = 1 } END { exit !f }' "$LOG"
}
# until_answered T0 SECONDS: ask until the job answers a request after T0
# (for SECONDS at the most), then a little more traffic
until_answered() {
	_end=$(($(date +%s) + $2))
	while ! answered_after "$1" && [ "$(date +%s)" -lt "$_end" ]; do
		sky_serve_ask
		sleep 0.3
	done
	sky_serve_flow 1
}
# check NAME FROM TO T0 [EVENT]: sky_serve_check, then the event's JSON
check() {
	name=$1 from=$2 to=$3 t0=$4 ev=${5:-replan}
	sky_serve_check "$name" "$from" "$to"
	total=$SERVE_TOTAL dups=$SERVE_DUPS
	# the event: the planner's first re-plan (or pause) after the fault,
	# then the first answer of a new plan and the requests it replayed
	awk -v t0="$t0" -v name="$name" -v job="$JOB" -v total="$total" -v dups="$dups" -v ev="\"event\":\"$ev\"" '
		index($0, ev) && !r { match($0, /"t":[0-9.]+/); rt = substr($0, RSTART + 4, RLENGTH - 4)
			if (rt + 0 >= t0 + 0) r = rt }
		/"event":"replayed"/ && r && !p { match($0, /"requests":[0-9]+/); p = 1; rp = substr($0, RSTART + 11, RLENGTH - 11) }
		/"event":"answered"/ && r && !a { match($0, /"t":[0-9.]+/); at = substr($0, RSTART + 4, RLENGTH - 4)
			if (at + 0 >= r + 0) { a = at; match($0, /"epoch":[0-9]+/); e = substr($0, RSTART + 8, RLENGTH - 8) } }
		END { printf "{\"scenario\":\"serve-%s\",\"job\":\"%s\",\"at\":%.3f,\"epoch\":%s,", name, job, t0, e ? e : "null"
			printf "\"detect_s\":%s,\"next_answer_s\":%s,", r ? sprintf("%.3f", r - t0) : "null", a ? sprintf("%.3f", a - t0) : "null"
			printf "\"requests\":%d,\"replayed\":%s,\"duplicates_dropped\":%d}\n", total, p ? rp : "null", dups }' \
		"$LOG" >"$OUT/serve-$name.json"
	echo "MEASURE $(cat "$OUT/serve-$name.json")"
}

# kill_stage NAME K: requests flowing, the board of stage K dies; the job
# is re-planned and answers again
kill_stage() {
	name=$1 k=$2
	victim=$(sky_serve_stage_board "$k")
	[ -n "$victim" ] || { fail "${name}_victim" "no board holds stage $k"; return; }
	from=$N
	sky_serve_flow 2
	# frozen first (SIGSTOP, well within its keepalive), so requests are
	# certainly in flight at it when it dies
	kill -STOP "$(cat "$W/pid.$victim")"
	sky_serve_flow 1
	t0=$(now)
	kill -KILL "$(cat "$W/pid.$victim")" 2>/dev/null
	wait "$(cat "$W/pid.$victim")" 2>/dev/null
	rm -f "$W/pid.$victim"
	echo "MEASURE ${name}_killed $victim (stage $k of $(n_stages))"
	sky_serve_flow 2
	until_answered "$t0" 90
	check "$name" "$from" "$N" "$t0"
	grep '"event":"replan"' "$LOG" | tail -1 | grep -q "\"reason\":\"board $victim (stage $k) offline\"" &&
		pass "${name}_replanned_for_the_dead_board" ||
		fail "${name}_replanned_for_the_dead_board" "$(grep -v commit "$LOG" | tail -3)"
	grep -q '"replayed":[1-9]' "$OUT/serve-$name.json" && pass "${name}_requests_in_flight_replayed" ||
		fail "${name}_requests_in_flight_replayed" "$(cat "$OUT/serve-$name.json")"
}

# ---- a board is revoked: the planner drops it and re-plans; the board,
# still connected (no SIGHUP to the broker), stops serving the old epoch ---
victim=$(sky_serve_stage_board 1)
from=$N
sky_serve_flow 2
t0=$(now)
"$SKY" pki revoke --dir "$PKI" "$victim" >"$W/revoke.out" 2>&1 || fail revoke_issued "$(cat "$W/revoke.out")"
REVOKED=$victim
until_answered "$t0" 90
check revoke "$from" "$N" "$t0"
grep '"event":"replan"' "$LOG" | tail -1 | grep -q "\"reason\":\"board $victim (stage 1) revoked\"" &&
	pass revoke_replanned_without_the_board || fail revoke_replanned_without_the_board "$(grep -v commit "$LOG" | tail -3)"
sky_wait 30 grep -q "plan $JOB epoch [0-9]* has no stage for $victim: stops serving epoch" "$W/$victim.log" &&
	pass revoke_board_stops_serving_the_old_epoch ||
	fail revoke_board_stops_serving_the_old_epoch "$(grep "$JOB" "$W/$victim.log" | tail -3)"

kill_stage middle 2
kill_stage first 0
last=$(($(n_stages) - 1))
kill_stage last $last

# the boards of two stages die at once (their wills may come in one re-plan
# or in two): the plan after them holds neither
newest_boards() { # the boards of the newest plan, from the job log (stage order)
	grep '"event":"replan"' "$LOG" | tail -1 | sed -n 's/.*"boards":"\([^"]*\)".*/\1/p'
}
v1=$(sky_serve_stage_board 1) v2=$(sky_serve_stage_board 2)
from=$N
sky_serve_flow 2
kill -STOP "$(cat "$W/pid.$v1")" "$(cat "$W/pid.$v2")"
sky_serve_flow 1
t0=$(now)
kill -KILL "$(cat "$W/pid.$v1")" "$(cat "$W/pid.$v2")" 2>/dev/null
wait "$(cat "$W/pid.$v1")" "$(cat "$W/pid.$v2")" 2>/dev/null
rm -f "$W/pid.$v1" "$W/pid.$v2"
echo "MEASURE two_at_once_killed $v1 $v2"
sky_serve_flow 2
until_answered "$t0" 90
check two_at_once "$from" "$N" "$t0"
nb=$(newest_boards)
case ",$nb," in
*",$v1,"* | *",$v2,"*) fail two_at_once_replanned_without_both "newest plan over $nb" ;;
*) [ -n "$nb" ] && pass two_at_once_replanned_without_both || fail two_at_once_replanned_without_both "no re-plan" ;;
esac
grep -q '"replayed":[1-9]' "$OUT/serve-two_at_once.json" && pass two_at_once_requests_in_flight_replayed ||
	fail two_at_once_requests_in_flight_replayed "$(cat "$OUT/serve-two_at_once.json")"

# a second board dies while the fleet recovers from the first: the boards
# left are frozen (SIGSTOP, well within their keepalive) from the first
# kill until the planner has logged its re-plan, so none of them is ready
# for it and nothing is replayed yet; then the new first stage is killed
# and the others go on
v1=$(sky_serve_stage_board 1)
from=$N
sky_serve_flow 2
kill -STOP "$(cat "$W/pid.$v1")"
sky_serve_flow 1
left=""
for b in $BOARDS; do [ "$b" != "$v1" ] && [ -f "$W/pid.$b" ] && left="$left $b"; done
replans=$(grep -c '"event":"replan"' "$LOG")
answers=$(grep -c '"event":"answered"' "$LOG")
replays=$(grep -c '"event":"replayed"' "$LOG")
t0=$(now)
kill -KILL "$(cat "$W/pid.$v1")" 2>/dev/null
for b in $left; do kill -STOP "$(cat "$W/pid.$b")"; done
wait "$(cat "$W/pid.$v1")" 2>/dev/null
rm -f "$W/pid.$v1"
replanned() { [ "$(grep -c '"event":"replan"' "$LOG")" -gt "$replans" ]; }
sky_wait 60 replanned || fail during_recovery_first_replan "$(tail -2 "$LOG")"
v2=$(newest_boards | cut -d, -f1) # the new first stage
kill -KILL "$(cat "$W/pid.$v2")" 2>/dev/null
for b in $left; do [ "$b" != "$v2" ] && kill -CONT "$(cat "$W/pid.$b")"; done
wait "$(cat "$W/pid.$v2")" 2>/dev/null
rm -f "$W/pid.$v2"
echo "MEASURE during_recovery_killed $v1 then $v2"
[ "$(grep -c '"event":"answered"' "$LOG")" = "$answers" ] && [ "$(grep -c '"event":"replayed"' "$LOG")" = "$replays" ] &&
	pass during_recovery_second_killed_before_the_first_recovered ||
	fail during_recovery_second_killed_before_the_first_recovered "$(tail -3 "$LOG")"
sky_serve_flow 2
until_answered "$t0" 90
check during_recovery "$from" "$N" "$t0"
# the second death re-planned too (the last re-plan, or a pause and resume
# if the frozen boards were taken for dead on a very slow machine)
awk -v t0="$t0" -v b="board $v2 (stage 0) offline" '/"event":"(replan|pause)"/ && index($0, b) {
	match($0, /"t":[0-9.]+/); if (substr($0, RSTART + 4, RLENGTH - 4) + 0 >= t0 + 0) f = 1 } END { exit !f }' "$LOG" &&
	pass during_recovery_replanned_for_the_second || fail during_recovery_replanned_for_the_second "$(grep -v commit "$LOG" | tail -3)"

# sky fleet status shows the serving re-plans (reason, requests replayed, time lost)
"$SKY" fleet status --state "$W/skyplan" >"$W/status.txt" 2>&1
if [ "$(grep -c "re-plan generation [0-9]* epoch [0-9]*: board b[0-9] (stage [0-9]) \(offline\|revoked\); [0-9]* unanswered request(s) replayed, \([0-9.]* s lost\|not yet resumed\)" "$W/status.txt")" -ge 7 ] &&
	# the re-plan the second death cut short never answered
	grep -q "board $v1 (stage 1) offline; 0 unanswered request(s) replayed, not yet resumed" "$W/status.txt"; then
	pass servefaults_fleet_status_shows_the_replans
else
	fail servefaults_fleet_status_shows_the_replans "$(grep -A8 "job $JOB" "$W/status.txt" | head -12)"
fi
echo "MEASURE $(grep "re-plan generation" "$W/status.txt" | tr -s ' ' | tr '\n' '|')"

# ---- every board left dies: the job pauses; a board comes back: it resumes ----------
from=$N
t0=$(now)
for b in $BOARDS; do
	[ -f "$W/pid.$b" ] || continue
	kill -KILL "$(cat "$W/pid.$b")" 2>/dev/null
	wait "$(cat "$W/pid.$b")" 2>/dev/null
	rm -f "$W/pid.$b"
	[ "$b" = "$REVOKED" ] || back=$b
done
sky_wait 30 grep -q '"event":"pause"' "$LOG" && pass pause_logged || fail pause_logged "$(tail -3 "$LOG")"
sky_wait 10 sh -c "'$SKY' fleet status --state '$W/skyplan' | grep -q 'paused: the boards left cannot hold the model'" &&
	pass pause_shown_in_fleet_status || fail pause_shown_in_fleet_status "$(grep -A6 "job $JOB" "$W/status.txt")"
# the client takes answers only from the plan's boards: while nobody
# serves, an idle board identity (bx, never started, in no plan) answers
# every request (twice), in one connection; sky infer drops them all and
# says so
"$SKY" infer --pki "$PKI/clients/t" --broker "$BR" --job $JOB --input "$W/rows.safetensors" \
	--id dd --timeout 10 --json >"$W/dd.json" 2>"$W/dd.err" &
DD=$!
echo $DD >"$W/pid.dd"
fake() { printf '{"v":1,"id":"dd-%s","ok":true,"job":"%s","epoch":1,"logits":[0.25,-0.5]}\n' "$1" $JOB; }
i=0
while kill -0 $DD 2>/dev/null && [ $i -lt 100 ]; do # until it gives up (bounded)
	# shellcheck disable=SC2046
	{ fake 0; fake 0; fake 1; fake 2; fake 3; } | timeout 20 mosquitto_pub $(sky_mq_tls "$W/bx/board.crt" "$W/bx/board.key") \
		-q 1 -t "sky/v1/job/$JOB/resp/sky-client-t/bx" -l 2>>"$W/dd.pub.err"
	sleep 0.2
	i=$((i + 1))
done
wait $DD
rc=$?
rm -f "$W/pid.dd"
if [ $rc != 0 ] && ! grep -q '"ok":true' "$W/dd.json" &&
	grep -q "response(s) from a sender the job's plan does not allow dropped" "$W/dd.err"; then
	pass client_drops_answers_from_outside_the_plan
else
	fail client_drops_answers_from_outside_the_plan "rc $rc: $(head -c 300 "$W/dd.json") $(head -c 300 "$W/dd.err")"
fi
sky_serve_flow 2 # requests while nobody serves
sky_serve_board "$back"
until_answered "$t0" 120
check pause "$from" "$N" "$t0" pause
grep '"event":"replan"' "$LOG" | tail -1 | grep -q '"reason":"resuming after board' &&
	pass pause_resumed_on_the_board_back || fail pause_resumed_on_the_board_back "$(grep -v commit "$LOG" | tail -3)"
# the planner's table: nothing let go unanswered
grep -q "dropped from the replay table" "$W/skyplan.log" &&
	fail servefaults_nothing_dropped "$(grep "replay table" "$W/skyplan.log" | head -2)" ||
	pass servefaults_nothing_dropped

# ---- no process left ------------------------------------------------------------------
touch "$W/stop"
sky_fleet_kill $(cat "$W"/pid.* 2>/dev/null)
rm -f "$W"/pid.*
sky_broker_stop
sleep 0.2
if pgrep -f "$W" >/dev/null 2>&1; then
	fail servefaults_no_process_left "$(pgrep -af "$W" | head -3)"
else
	pass servefaults_no_process_left
fi
exit "$fails"
