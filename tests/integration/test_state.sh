#!/bin/sh
# State that must survive loss and restarts, against a real mosquitto on
# loopback (tests/integration/broker.sh), skyplan and three skyd processes:
#   - a board whose state/session file is emptied, one whose file is
#     deleted and one whose file holds garbage (and whose state/epoch is
#     emptied too) comes back online under a new boot id, says so in its
#     log, and the planner shows it online holding its plan;
#   - a late will of a board's old boot, arriving after the new boot's
#     online message, does not mark the board offline;
#   - a heartbeat with session 2^53 + 1 is refused, with its reason;
#   - the broker restarts while the planner is down, then the planner
#     starts: the retained plan is still on the broker (persistence), and
#     `sky fleet status --json` shows every assignment's half-layer range;
#   - the retained plan is cleared while the planner is down: the planner
#     publishes it again from its own state when it starts.
# Retained topics are read with the certificate of a fourth board that is
# enrolled but not running (so reading takes over no live client id).
#
# Prints PASS/FAIL lines. Bounded: every wait has a deadline.
set -u
cd "$(dirname "$0")/../.."
. tests/integration/broker.sh

K=2 # keepalive (s)
LAYERS=3 # 6 half-layers, two per board under the even split
BOARDS="s1 s2 s3"
. tests/integration/lib.sh

sky_test_workdir state
PLAN_PID=""
cleanup() {
	for b in $BOARDS; do
		p=$(cat "$W/$b.pid" 2>/dev/null) && kill "$p" 2>/dev/null
	done
	[ -n "$PLAN_PID" ] && kill "$PLAN_PID" 2>/dev/null
	for b in $BOARDS; do
		p=$(cat "$W/$b.pid" 2>/dev/null) && wait "$p" 2>/dev/null
	done
	[ -n "$PLAN_PID" ] && wait "$PLAN_PID" 2>/dev/null
	sky_broker_stop
	if [ "$fails" -eq 0 ] && [ -z "${SKY_KEEP:-}" ]; then rm -rf "$W"; else echo "(logs kept in $W)"; fi
}
trap cleanup EXIT

if ! sky_broker_start "$W/broker"; then
	fail state_broker "mosquitto did not start"
	exit 1
fi
BR="127.0.0.1:$SKY_BROKER_PORT"
PKI=$SKY_PKI_DIR
SKY="$SKY_BIN/sky"
STATE="$W/skyplan"
board_tls() { sky_mq_tls "$W/$1/state/board.crt" "$W/$1/state/board.key"; }
fleet_json() { "$SKY" fleet status --state "$STATE" --json 2>/dev/null; }
# field of one board from fleet.json, e.g. board_field s1 state
board_field() {
	fleet_json | sed 's/{"id":/\n{"id":/g' | grep "^{\"id\":\"$1\"" | head -1 |
		sed -n "s/.*\"$2\":\"\{0,1\}\([^\",}]*\).*/\1/p"
}
wait_for() { sky_wait "$WAIT_S" "$@"; } # at most $WAIT_S seconds
start_planner() { # log file
	"$SKY_BIN/skyplan" --pki "$PKI" --broker "$BR" --state "$STATE" --keepalive $K >"$1" 2>&1 &
	PLAN_PID=$!
	WAIT_S=15
	wait_for grep -q "serving" "$1"
}
stop_planner() {
	kill -TERM "$PLAN_PID" 2>/dev/null
	wait "$PLAN_PID" 2>/dev/null
	PLAN_PID=""
}
start_board() { # id [extra skyd options]
	_b=$1
	shift
	"$SKY_BIN/skyd" --state "$W/$_b/state" --broker "$BR" --keepalive $K --model tiny \
		--layers $LAYERS --probe-seconds 1 --no-link-probe "$@" >>"$W/$_b.log" 2>&1 &
	echo $! >"$W/$_b.pid"
}
stop_board() {
	_p=$(cat "$W/$1.pid")
	kill -TERM "$_p" 2>/dev/null
	wait "$_p" 2>/dev/null
	rm -f "$W/$1.pid"
}
retained_plan() { # the retained plan of job j1, read with the idle board's certificate
	mosquitto_sub $(board_tls sw) -N -t sky/v1/job/j1/plan -C 1 -W 5 2>/dev/null
}

if ! start_planner "$W/skyplan.log"; then
	fail state_skyplan_starts "$(tail -3 "$W/skyplan.log")"
	exit 1
fi

# ---- three boards and an idle one enroll; a job over the three ---------------
for b in $BOARDS sw; do
	mkdir -p "$W/$b"
	cp -r "$PKI/claim" "$W/$b/claim"
	tok=$("$SKY" pki token --dir "$PKI" --ttl 300) || fail state_token "sky pki token failed"
	if [ "$b" = sw ]; then
		"$SKY_BIN/skyd" --enroll-only --claim "$tok" --id "$b" --pki-ca "$W/$b/claim/ca.crt" \
			--state "$W/$b/state" --broker "$BR" >"$W/$b.log" 2>&1 ||
			fail state_idle_board_enrolls "$(tail -2 "$W/$b.log")"
	else
		start_board "$b" --enroll --claim "$tok" --id "$b" --pki-ca "$W/$b/claim/ca.crt"
	fi
done
all_online() {
	for b in $BOARDS; do [ "$(board_field "$b" state)" = online ] || return 1; done
	[ "$(fleet_json | grep -o '"caps":{' | wc -l)" -ge 3 ]
}
WAIT_S=60
wait_for all_online && pass state_boards_online ||
	fail state_boards_online "$(fleet_json | head -c 300)"
[ "$(cat "$W/s1/state/session" 2>/dev/null)" = 1 ] ||
	fail state_session_file "s1/state/session: '$(cat "$W/s1/state/session" 2>/dev/null)'"
"$SKY" job submit --pki "$PKI" --broker "$BR" --model tiny --layers $LAYERS --job j1 \
	--min-boards 3 --algo even --wait 30 --json >"$W/job1.json" 2>"$W/job1.err"
EPOCH=$(sed -n 's/.*"epoch":\([0-9]*\).*/\1/p' "$W/job1.json")
grep -q '"accepted":3,' "$W/job1.json" && pass state_plan_accepted ||
	fail state_plan_accepted "$(head -c 300 "$W/job1.json" "$W/job1.err")"
acked() {
	for b in $BOARDS; do [ "$(board_field "$b" ack)" = accepted ] || return 1; done
}
WAIT_S=10
wait_for acked || fail state_acks_in_status "$(fleet_json | head -c 300)"
ranges() { # "id:first-last ..." of every board's assignment
	for b in $BOARDS; do printf '%s:%s-%s ' "$b" "$(board_field "$b" first)" "$(board_field "$b" last)"; done
}
RANGES=$(ranges)

# one ordinary restart each, so the planner's session for every board is 2
# and a board starting again at 1 is below it
for b in $BOARDS; do
	stop_board "$b"
	start_board "$b"
done
at_session_2() {
	for b in $BOARDS; do
		[ "$(board_field "$b" state)" = online ] && [ "$(board_field "$b" session)" = 2 ] || return 1
	done
}
WAIT_S=30
wait_for at_session_2 || fail state_restart_session_2 "$(for b in $BOARDS; do printf '%s ' "$b:$(board_field "$b" session)"; done)"
OLD_BOOT_S1=$(board_field s1 boot)
OLD_SESSION_S1=$(board_field s1 session)

# ---- session files lost: emptied, deleted, garbage (and an emptied epoch) ----
for b in $BOARDS; do stop_board "$b"; done
: >"$W/s1/state/session"
rm -f "$W/s2/state/session"
printf 'garbage\n' >"$W/s3/state/session"
: >"$W/s3/state/epoch"
for b in $BOARDS; do
	echo "---- restarted with its session state lost" >>"$W/$b.log"
	start_board "$b"
done
back_with_plan() { # board
	[ "$(board_field "$1" state)" = online ] && [ "$(board_field "$1" session)" = 1 ] &&
		[ "$(board_field "$1" ack)" = accepted ] && [ "$(board_field "$1" epoch)" = "$EPOCH" ]
}
WAIT_S=30
for b in $BOARDS; do
	case $b in s1) how=emptied ;; s2) how=deleted ;; s3) how=garbage ;; esac
	if wait_for back_with_plan "$b" &&
		sed -n '/^---- restarted with its session state lost/,$p' "$W/$b.log" |
		grep -q "session state lost: .*/session is .*; starting again at session 1 under the new boot id"; then
		pass "state_session_file_${how}_board_back_online_with_its_plan"
	else
		fail "state_session_file_${how}_board_back_online_with_its_plan" \
			"$b: state $(board_field "$b" state) session $(board_field "$b" session) ack $(board_field "$b" ack); $(grep -h "$b" "$W/skyplan.log" | tail -2)"
	fi
done
grep -h "session state lost" "$W/s1.log" | tail -1 | sed 's/^[^ ]* [^ ]* /   log: /'
grep -q "board s1: new boot .* at session 1 replaces boot $OLD_BOOT_S1" "$W/skyplan.log" &&
	pass state_planner_logs_the_new_boot ||
	fail state_planner_logs_the_new_boot "$(grep 's1' "$W/skyplan.log" | tail -2)"
grep -q "plan epoch state lost: .*/epoch is empty or not a decimal counter" "$W/s3.log" &&
	grep -q "plan epoch recovered from the saved plan: $EPOCH" "$W/s3.log" &&
	[ "$(cat "$W/s3/state/epoch")" = "$EPOCH" ] && pass state_epoch_file_emptied_recovered_from_saved_plan ||
	fail state_epoch_file_emptied_recovered_from_saved_plan "$(grep -h epoch "$W/s3.log" | tail -2)"
[ "$(cat "$W/s2/state/session" 2>/dev/null)" = 1 ] && pass state_session_file_rewritten ||
	fail state_session_file_rewritten "s2/state/session: '$(cat "$W/s2/state/session" 2>/dev/null)'"

# ---- a late will of the old boot (session 2) after the new boot (session 1) ---
NEW_BOOT_S1=$(board_field s1 boot)
stale0=$(fleet_json | sed -n 's/.*"stale_ignored":\([0-9]*\).*/\1/p')
mosquitto_pub $(board_tls s1) -q 1 -t sky/v1/board/s1/status \
	-m "{\"state\":\"offline\",\"boot\":\"$OLD_BOOT_S1\",\"session\":$OLD_SESSION_S1}" 2>/dev/null
WAIT_S=10
late_ignored() {
	grep -q "board s1: offline (late will) from boot $OLD_BOOT_S1 session $OLD_SESSION_S1 ignored (retired boot)" \
		"$W/skyplan.log"
}
wait_for late_ignored || echo "(no 'late will ignored' line in the planner's log)"
sleep $((2 * K)) # past the heartbeat deadline: a board wrongly put on the old boot stays offline
s1_live() { [ "$(board_field s1 state)" = online ] && [ "$(board_field s1 boot)" = "$NEW_BOOT_S1" ]; }
WAIT_S=10
if late_ignored && wait_for s1_live; then
	pass state_late_will_of_old_boot_ignored
else
	fail state_late_will_of_old_boot_ignored \
		"s1 $(board_field s1 state) boot $(board_field s1 boot) (new $NEW_BOOT_S1); stale_ignored $stale0 -> $(fleet_json | sed -n 's/.*"stale_ignored":\([0-9]*\).*/\1/p')"
fi

# ---- a session of 2^53 + 1 is refused, not rounded to 2^53 -----------------
S2_BOOT=$(board_field s2 boot)
mosquitto_pub $(board_tls s2) -q 1 -t sky/v1/board/s2/heartbeat \
	-m "{\"state\":\"online\",\"boot\":\"$S2_BOOT\",\"session\":9007199254740993,\"keepalive_s\":$K,\"seq\":1}" 2>/dev/null
WAIT_S=10
refused_2p53() {
	grep -q "rejected heartbeat from s2: status: field 'session' is beyond 2^53 - 1 (it reads as 9007199254740992" \
		"$W/skyplan.log"
}
s2_sane() { [ "$(board_field s2 state)" = online ] && [ "$(board_field s2 session)" -lt 1000 ]; }
if wait_for refused_2p53 && wait_for s2_sane; then
	pass state_session_2_pow_53_plus_1_refused
	grep -h "rejected heartbeat from s2" "$W/skyplan.log" | tail -1 | sed 's/^[^ ]* [^ ]* /   log: /'
else
	fail state_session_2_pow_53_plus_1_refused \
		"s2 session $(board_field s2 session) state $(board_field s2 state); $(grep -h 's2' "$W/skyplan.log" | tail -1)"
fi

# ---- broker restart, then planner restart ------------------------------------
stop_planner
retained_plan >"$W/plan_before.env"
[ -s "$W/plan_before.env" ] || fail state_plan_retained_before "no retained plan before the broker restart"
if ! sky_broker_restart; then
	fail state_broker_restart "mosquitto did not come back"
	exit 1
fi
retained_plan >"$W/plan_after_broker.env"
if [ -s "$W/plan_after_broker.env" ] && cmp -s "$W/plan_before.env" "$W/plan_after_broker.env"; then
	pass state_plan_retained_across_broker_restart
else
	fail state_plan_retained_across_broker_restart "$(wc -c <"$W/plan_after_broker.env") bytes retained after the restart"
fi
start_planner "$W/skyplan2.log" || fail state_skyplan_restarts "$(tail -3 "$W/skyplan2.log")"
ranges_kept() { [ "$(ranges)" = "$RANGES" ] && ! fleet_json | grep -q '"first":-1'; }
WAIT_S=15
if wait_for ranges_kept && wait_for all_online && wait_for acked; then
	pass state_assignments_keep_ranges_after_broker_then_planner_restart
	echo "   ranges: $RANGES"
else
	fail state_assignments_keep_ranges_after_broker_then_planner_restart "want $RANGES, got $(ranges)"
fi
"$SKY" fleet status --state "$STATE" 2>/dev/null | grep -q "half-layers -1--1" &&
	fail state_status_text_has_no_unknown_ranges "sky fleet status shows half-layers -1--1"

# ---- the retained plan is lost while the planner is down: it republishes ------
stop_planner
mosquitto_pub $(sky_mq_tls "$PKI/planner.crt" "$PKI/planner.key") -r -n -q 1 -t sky/v1/job/j1/plan 2>/dev/null
[ -z "$(retained_plan)" ] || fail state_plan_cleared "the retained plan could not be cleared"
start_planner "$W/skyplan3.log" || fail state_skyplan_restarts_again "$(tail -3 "$W/skyplan3.log")"
republished() { retained_plan >"$W/plan_republished.env" && cmp -s "$W/plan_before.env" "$W/plan_republished.env"; }
WAIT_S=20
if wait_for republished && grep -q "job j1 epoch $EPOCH: the broker held no plan; republished the saved plan" "$W/skyplan3.log"; then
	pass state_missing_plan_republished_from_planner_state
else
	fail state_missing_plan_republished_from_planner_state "$(grep -h 'j1' "$W/skyplan3.log" | tail -2)"
fi
WAIT_S=15
wait_for ranges_kept && wait_for acked && pass state_boards_still_hold_the_plan ||
	fail state_boards_still_hold_the_plan "$(ranges); $(for b in $BOARDS; do printf '%s ' "$b:$(board_field "$b" ack)"; done)"

exit $((fails > 0))
