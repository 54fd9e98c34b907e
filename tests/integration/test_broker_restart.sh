#!/bin/sh
# The broker restarts under a running fleet: skyplan and three skyd boards
# hold job j1's plan; mosquitto is killed (SIGKILL, a crash) while a job is
# being submitted, and started again on the same port with the same config
# (persistence on). Every board comes back online under its own boot id with
# a higher session number, the planner's view is intact (j1 at its epoch,
# every stage accepted), the job submitted while the broker was down is
# delivered once it is back (planned and accepted), and one submitted after
# the restart too. Then the planner's persistent session: with skyplan
# stopped, a submission published to it survives a clean broker restart and
# reaches skyplan when it starts again.
#
# PASS/FAIL lines, MEASURE lines (reconnect times); bounded.
set -u
cd "$(dirname "$0")/../.."
. tests/integration/fleet.sh
sky_fleet_begin restart
SUB_PID=""
trap 'sky_fleet_end $SUB_PID' EXIT
now() { date +%s.%N; }
elapsed() { echo "$1 $2" | awk '{printf "%.2f", $2 - $1}'; }
sky_fleet_start
sky_fleet_boards 3 --no-link-probe
submit() { # submit JOB: plan over the 3 boards and wait for their acks
	"$SKY" job submit --pki "$PKI" --broker "$BR" --model tiny --layers 4 --job "$1" \
		--min-boards $N --algo even --wait 30 --ack-timeout 60 --json >"$W/$1.json" 2>"$W/$1.err"
}
submit j1
grep -q "\"accepted\":$N," "$W/j1.json" && pass restart_j1_planned ||
	fail restart_j1_planned "$(cat "$W/j1.json" "$W/j1.err" | head -c 300)"
E1=$(cat "$STATE/epoch")
for i in 1 2 3; do
	eval "boot_b$i=\$(sky_fleet_field b$i boot)"
	eval "sess_b$i=\$(sky_fleet_field b$i session)"
done

# ---- the crash -------------------------------------------------------------------
kill -KILL "$SKY_BROKER_PID"
wait "$SKY_BROKER_PID" 2>/dev/null
SKY_BROKER_PID=""
T_DOWN=$(now)
# a job submitted while the broker is down: sky job submit keeps trying
submit j2 &
SUB_PID=$!
offline_all() {
	for i in 1 2 3; do grep -q "connection to the broker lost" "$W/b$i.log" || return 1; done
	grep -q "connection to the broker lost" "$W/skyplan.log"
}
sky_wait 15 offline_all || fail restart_loss_noticed "not every process noticed the broker was gone"
sleep 2
lines_plan=$(wc -l <"$W/skyplan.log")
sky_broker_restart || {
	fail restart_broker_again "$(tail -5 "$SKY_BROKER_LOG")"
	exit 1
}
T_UP=$(now)
echo "MEASURE broker_down_s $(elapsed "$T_DOWN" "$T_UP")"
# every board back: same boot, a higher session, online in the planner's view
back() {
	for i in 1 2 3; do
		eval "ob=\$boot_b$i; os=\$sess_b$i"
		[ "$(sky_fleet_field b$i state)" = online ] && [ "$(sky_fleet_field b$i boot)" = "$ob" ] &&
			[ "$(sky_fleet_field b$i session)" -gt "$os" ] 2>/dev/null || return 1
	done
}
planner_back() { tail -n +"$((lines_plan + 1))" "$W/skyplan.log" | grep -q "connected to .* as sky-planner"; }
if sky_wait 30 planner_back; then
	echo "MEASURE planner_reconnect_after_broker_up_s $(elapsed "$T_UP" "$(now)")"
else
	fail restart_planner_reconnects "$(tail -3 "$W/skyplan.log")"
fi
if sky_wait 30 back; then
	echo "MEASURE all_boards_online_after_broker_up_s $(elapsed "$T_UP" "$(now)") (3 boards, keepalive 2 s, backoff 0.5-5 s jittered)"
	pass restart_boards_back_same_boot_new_session
else
	fail restart_boards_back_same_boot_new_session "$(sky_fleet_json | python3 -c 'import json,sys; print([(b["id"],b["state"],b["boot"],b["session"]) for b in json.load(sys.stdin)["boards"]])')"
fi
grep -q "retrying in" "$W/skyplan.log" "$W/b1.log" "$W/b2.log" "$W/b3.log" &&
	pass restart_reconnect_with_backoff || fail restart_reconnect_with_backoff "no retry line"
# the planner's view: j1 still known at its epoch, and every board said
# again (its plan-ack, re-sent after the reconnect) that it holds its stage
# (j2, delivered at the same time, may be planned over them right after: a
# board that takes j2's plan the moment it is back says it holds j2 instead)
j1_intact() {
	for i in 1 2 3; do
		tail -n +"$((lines_plan + 1))" "$W/skyplan.log" |
			grep -q "board b$i holds job \(j1 epoch $E1\|j2 epoch [0-9]*\) stage" || return 1
	done
	sky_fleet_json | grep -q "{\"job\":\"j1\",\"epoch\":$E1}"
}
sky_wait 20 j1_intact && pass restart_planner_view_intact ||
	fail restart_planner_view_intact "$(tail -n +"$((lines_plan + 1))" "$W/skyplan.log" | grep j1 | head -5)"
# the job submitted during the outage is delivered and planned
wait "$SUB_PID"
rc=$?
SUB_PID=""
if [ $rc -eq 0 ] && grep -q "\"accepted\":$N," "$W/j2.json" &&
	grep -q "job j2 queued from operator" "$W/skyplan.log"; then
	pass restart_submit_during_outage_delivered
else
	fail restart_submit_during_outage_delivered "rc $rc: $(cat "$W/j2.json" "$W/j2.err" | head -c 400)"
fi
[ "$(grep -c "job j2 queued from operator" "$W/skyplan.log")" -eq 1 ] &&
	pass restart_submit_queued_once || fail restart_submit_queued_once "$(grep "j2" "$W/skyplan.log")"
# and one after the restart
submit j3
grep -q "\"accepted\":$N," "$W/j3.json" && pass restart_submit_after_restart ||
	fail restart_submit_after_restart "$(cat "$W/j3.json" "$W/j3.err" | head -c 300)"

# ---- the planner's persistent session ------------------------------------------
# skyplan stops; a submission published for it (QoS 1) is queued by the
# broker in skyplan's session, kept across a broker restart (persistence),
# and delivered when skyplan connects again
kill "$PLAN_PID"
wait "$PLAN_PID" 2>/dev/null
PLAN_PID=""
printf '{"job":"j4","model":"tiny","layers":4,"min_boards":%d,"wait_s":30,"algo":"even","submit_id":"0123456789abcdef"}' $N >"$W/j4.job"
mosquitto_pub $(sky_mq_tls "$PKI/operator.crt" "$PKI/operator.key") -q 1 \
	-t sky/v1/jobs/sky-operator/submit -f "$W/j4.job" >"$W/j4.pub" 2>&1 ||
	fail restart_j4_published "$(cat "$W/j4.pub")"
sky_broker_restart || fail restart_broker_third "$(tail -5 "$SKY_BROKER_LOG")"
sky_fleet_planner
j4_planned() { grep -q "job j4 epoch [0-9]* published" "$W/skyplan.log"; }
if sky_wait 40 j4_planned && grep -q "job j4 queued from operator sky-operator" "$W/skyplan.log"; then
	pass restart_planner_session_keeps_what_was_sent_while_away
else
	fail restart_planner_session_keeps_what_was_sent_while_away "$(grep -E 'j4|connected' "$W/skyplan.log" | tail -3)"
fi

sky_fleet_kill
left=0
for i in 1 2 3; do pgrep -f "skyd .*--state $W/b$i" >/dev/null && left=1; done
[ $left -eq 0 ] && pass restart_no_process_left || fail restart_no_process_left "a skyd still runs"
exit $fails
