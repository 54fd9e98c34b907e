#!/bin/sh
# Replayed serving frames and a cancelled serving job, over a real broker
# with separate processes: a serving job sv on three boards (b1..b3, which
# stage on which board is the plan's) of the `sky-operator` operator.
#
# Replay. bx, a board enrolled in the fleet and in no job, records with
# mosquitto_sub the sealed frames stage 0 sends to stage 1 (the ACL lets
# every board read a job's stage topics) while clients are answered, until
# it holds at least 70 of them. Only one identity can publish on stage 1's
# frame topic under the sender level stage 1 takes frames from
# (sky/v1/job/sv/stage/1/fwd/<stage 0's board>: the ACL pins the last
# level to the publisher's CN): stage 0's own board. So:
#   - bx replays them, twice over in rotation, under its own name: stage 1
#     drops every one as from a sender the plan does not give it (`sender`);
#   - the attacker then holds stage 0's board's certificate (a stolen or
#     compromised board) and replays them, twice over in rotation, as that
#     board. Its connection closes skyd's (the fleet listener's client id is
#     the CN) and the broker sends skyd's will, on which skyplan re-plans
#     the job at once. So that the frames meet the epoch they were recorded
#     in however slow the machine, skyplan is stopped (SIGSTOP) for the
#     burst and resumed once stage 1 has logged a drop for every frame.
#     Stage 1 drops every replayed frame before decrypting it: its batch is
#     not above the last one taken from that sender in that epoch
#     (runtime/servewin.c), counted as `duplicate` in its metrics (read as
#     the owner reads them, relayed by skyplan: at least one drop per replayed
#     frame), and the old 64-entry window's rotation attack gains nothing.
# Every client request, before, during and after, is answered exactly once
# with `sky eval --precision int8`'s logits.
#
# Cancel. `sky job cancel` of sv tells its three boards to stop: each
# logs that serving ends and lets the job go (its retained ready cleared);
# a request to sv is then answered by skyplan alone, `unknown_job`, "was
# cancelled by its operator"; a board restarted after the cancel does not
# serve the saved plan again.
set -u
cd "$(dirname "$0")/../.."
. tests/integration/fleet.sh
. tests/integration/serve_lib.sh
sky_fleet_begin adversary_serve
# the boards are tracked by pid file (sky_serve_board): stopped on any exit
_serve_end() {
	for _f in "$W"/pid.*; do
		[ -f "$_f" ] && kill -CONT "$(cat "$_f")" 2>/dev/null && kill "$(cat "$_f")" 2>/dev/null
	done
	sky_fleet_end
}
trap _serve_end EXIT

sky_serve_model adversary_serve 4 || exit 1
# the boards log at debug level: a stage logs each frame it drops, which
# tells the test when a burst has been handled
SKYD="env SKY_LOG=debug $SKY_BIN/skyd"
sky_serve_fleet adversary_serve b1 b2 b3 || exit 1
"$SKY" pki issue --dir "$PKI" --id bx --state "$W/bx" >/dev/null 2>"$W/bx.issue" ||
	{ fail adversary_serve_outsider_issued "$(cat "$W/bx.issue")"; exit 1; }
# what skyplan relays to the job's owner: every stage's metrics (an
# operator's tools connect on the claim listener; run directly, not in a
# function's subshell, so that $! is mosquitto_sub itself and the teardown
# stops it)
# shellcheck disable=SC2046
mosquitto_sub $(sky_mq_claim_tls "$PKI/operator.crt" "$PKI/operator.key") \
	-t "sky/v1/jobs/sky-operator/job/sv/metrics" >"$W/metrics.jsonl" 2>"$W/op_sub.err" &
echo $! >"$W/pid.msub" # (sky_serve_board empties PIDS: a pid file lasts)
JOB=sv
"$SKY" job submit --pki "$PKI" --broker "$BR" --job $JOB --min-boards 3 --task infer \
	--weights "$W/q.safetensors" --algo even --clients sky-client-t --wait 120 >"$W/sv.submit" 2>&1 ||
	{ fail adversary_serve_submitted "$(tail -3 "$W/sv.submit" "$W/skyplan.log")"; exit 1; }
sky_wait 120 sh -c "grep -q 'job $JOB: every stage is ready' '$W'/b*.log" ||
	{ fail adversary_serve_ready "$(grep "$JOB" "$W"/b*.log | tail -3)"; exit 1; }
B0=$(sky_serve_stage_board 0) B1=$(sky_serve_stage_board 1)
E=$(sed -n "s/.*plan $JOB epoch \([0-9]*\) accepted: stage 0 of.*/\1/p" "$W/$B0.log" | tail -1)
echo "  stage 0 on $B0, stage 1 on $B1, epoch $E"

# ---- record ----------------------------------------------------------------------
# shellcheck disable=SC2046
mosquitto_sub $(sky_mq_tls "$W/bx/board.crt" "$W/bx/board.key") -F '%x' \
	-t "sky/v1/job/$JOB/stage/1/fwd/$B0" >"$W/frames.hex" 2>"$W/rec.err" &
REC=$!
echo $REC >"$W/pid.rec"
sleep 1 # the recorder has subscribed
recorded() { [ "$(grep -c . "$W/frames.hex")" -ge 70 ]; }
# clients until 70 frames went by (each is a batch of their requests)
_t=0
while ! recorded && [ $_t -lt 40 ]; do
	_t=$((_t + 1))
	for _k in 1 2 3 4 5; do
		sky_serve_ask
		sleep 0.15
	done
	sleep 0.5
done
sky_serve_check adversary_serve_recording 0 "$N"
ASKED=$N
kill "$REC" 2>/dev/null
wait "$REC" 2>/dev/null
rm -f "$W/pid.rec"
F=$(grep -c . "$W/frames.hex")
echo "MEASURE adversary_serve_frames_recorded $F (from $ASKED clients)"
[ "$F" -ge 70 ] && pass adversary_serve_recorded_70_sealed_frames ||
	fail adversary_serve_recorded_70_sealed_frames "$F frames recorded: $(head -c 300 "$W/rec.err")"

# the largest count of drops for REASON in stage K's metrics of epoch E
drops_of() { # K E REASON (0 when none)
	_v=$(grep "\"epoch\":$2,\"stage\":$1," "$W/metrics.jsonl" |
		sed -n "s/.*\"drops\":{[^}]*\"$3\":\([0-9]*\).*/\1/p" | sort -n | tail -1)
	echo "${_v:-0}"
}
burst() { # CERT KEY SENDER
	python3 tests/integration/mqtt_burst.py 127.0.0.1 "$SKY_BROKER_PORT" "$PKI/ca.crt" "$1" "$2" \
		"sky/v1/job/$JOB/stage/1/fwd/$3" "$W/frames.hex" 2
}
R=$((2 * F))

# ---- bx replays under its own name --------------------------------------------------
s0=$(drops_of 1 "$E" sender)
out=$(burst "$W/bx/board.crt" "$W/bx/board.key" bx 2>&1)
echo "  bx: $out"
has_sender() { [ "$(drops_of 1 "$E" sender)" -ge $((s0 + R)) ]; }
sky_wait 30 has_sender && pass adversary_serve_outsiders_replay_dropped_as_sender ||
	fail adversary_serve_outsiders_replay_dropped_as_sender "sender drops $s0 -> $(drops_of 1 "$E" sender), $R replayed: $out"

# ---- stage 0's identity replays them in rotation --------------------------------------
d0=$(drops_of 1 "$E" duplicate)
replay_lines() { grep -c "job $JOB stage 1: frame dropped: replay: batch [0-9]* from $B0 is not after its last" "$W/$B1.log"; }
l0=$(replay_lines)
# while clients ask: the fault (skyd's connection closed) is theirs to survive
for _k in 1 2 3; do
	sky_serve_ask
	sleep 0.1
done
kill -STOP "$PLAN_PID"
out=$(burst "$W/$B0/state/board.crt" "$W/$B0/state/board.key" "$B0" 2>&1)
echo "  $B0's identity: $out"
case "$out" in "$R of $R acknowledged") pass adversary_serve_stage0_identity_replayed_every_frame ;;
*) fail adversary_serve_stage0_identity_replayed_every_frame "$out" ;;
esac
_handled() { [ "$(replay_lines)" -ge $((l0 + R)) ]; }
sky_wait 60 _handled || fail adversary_serve_stage1_logged_every_replay "$((l0)) -> $(replay_lines) of $R"
kill -CONT "$PLAN_PID"
has_dups() { [ "$(drops_of 1 "$E" duplicate)" -ge $((d0 + R)) ]; }
sky_wait 60 has_dups && pass adversary_serve_replayed_frames_dropped_by_the_window_and_counted ||
	fail adversary_serve_replayed_frames_dropped_by_the_window_and_counted "duplicate drops of stage 1, epoch $E: $d0 -> $(drops_of 1 "$E" duplicate), $R replayed; $(grep "\"stage\":1," "$W/metrics.jsonl" | tail -1)"
echo "MEASURE adversary_serve_replays_dropped $(drops_of 1 "$E" duplicate) of $R"
# skyd is back, and the job serves (on its plan, or on a new one skyplan made
# when it saw the board go): clients are answered either way
for _k in 1 2 3 4 5 6; do
	sky_serve_ask
	sleep 0.2
done
sky_serve_check adversary_serve_replay "$ASKED" "$N"
echo "MEASURE adversary_serve_duplicate_answers_clients_dropped $SERVE_DUPS"

# ---- cancel --------------------------------------------------------------------------
# the boards of the newest plan the job's boards accepted
EN=$(grep -h "plan $JOB epoch [0-9]* accepted" "$W"/b[123].log | sed -n "s/.*plan $JOB epoch \([0-9]*\) accepted.*/\1/p" | sort -n | tail -1)
HOLD=$(grep -l "plan $JOB epoch $EN accepted" "$W"/b[123].log | sed 's|.*/\(b[0-9]*\)\.log|\1|' | tr '\n' ' ')
echo "  epoch $EN on $HOLD"
"$SKY" job cancel --job $JOB --pki "$PKI" --broker "$BR" >"$W/cancel.out" 2>&1 ||
	fail adversary_serve_cancelled "$(cat "$W/cancel.out")"
_stopped() {
	for _b in $HOLD; do
		grep -q "job $JOB epoch $EN: stop asked by the planner (the job was cancelled): serving ends" "$W/$_b.log" &&
			grep -q "job $JOB epoch $EN stage [0-9]*: serving job let go" "$W/$_b.log" || return 1
	done
}
sky_wait 30 _stopped && pass adversary_serve_cancelled_jobs_boards_stop_serving ||
	fail adversary_serve_cancelled_jobs_boards_stop_serving "epoch $EN on $HOLD: $(grep -h "stop\|let go" "$W"/b[123].log | tail -4)"
mkdir -p "$W/out"
SERVE_TIMEOUT=20 sky_serve_ask
wait "$(cat "$W/pid.c$N")"
rc=$?
rm -f "$W/pid.c$N"
n_unknown=$(grep -c '"ok":false.*"code":"unknown_job"' "$W/out/$N.json")
[ $rc -ne 0 ] && [ "$n_unknown" = 4 ] && ! grep -q '"ok":true' "$W/out/$N.json" &&
	grep -q "was cancelled by its operator" "$W/out/$N.json" "$W/out/$N.err" &&
	pass adversary_serve_requests_to_a_cancelled_job_get_unknown_job ||
	fail adversary_serve_requests_to_a_cancelled_job_get_unknown_job "rc $rc: $(head -c 400 "$W/out/$N.json") $(head -c 200 "$W/out/$N.err")"
# a board restarted after the cancel does not serve its saved plan again
BR0=${HOLD%% *}
served=$(grep -c "job $JOB epoch $EN: serving stage" "$W/$BR0.log")
kill "$(cat "$W/pid.$BR0")"
sky_wait 20 sh -c "! kill -0 $(cat "$W/pid.$BR0") 2>/dev/null"
sky_serve_board "$BR0"
sky_wait 30 grep -q "plan $JOB epoch $EN: the job was cancelled at this epoch; not serving it" "$W/$BR0.log" &&
	[ "$(grep -c "job $JOB epoch $EN: serving stage" "$W/$BR0.log")" = "$served" ] &&
	pass adversary_serve_restarted_board_does_not_serve_a_cancelled_job ||
	fail adversary_serve_restarted_board_does_not_serve_a_cancelled_job "$(grep "$JOB" "$W/$BR0.log" | tail -3)"

for f in "$W"/pid.*; do
	[ -f "$f" ] && kill "$(cat "$f")" 2>/dev/null
	rm -f "$f"
done
