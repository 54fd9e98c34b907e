#!/bin/sh
# Bounded broker use against a real mosquitto on loopback, with skyplan and
# skyd as separate processes, attacked by the identities an attacker can
# hold (the claim bundle every new board image carries, one enrolled
# board's certificate):
#   - the claim identity floods enrollment: fresh nonces on a few
#     connections (the claim ACL pins the nonce to the connection's client
#     id: the broker refuses them), and its own nonce on 40 connections at
#     once (each held to its own bucket, and without a valid token none
#     takes from the signing budget), while a new board with a valid token
#     enrolls: it must enroll (the time it took is printed, not asserted);
#   - a board publishes 32 MiB on a control topic it may write (its
#     heartbeat) and a retained 32 MiB on its caps: the planner drops both
#     unread, counts them, and keeps serving (a submit is acknowledged);
#   - a board floods the planner with 32 MiB checkpoint messages (the bulk
#     class) while another board heartbeats and an operator submits: the
#     submit is acknowledged, the board stays online, and no control
#     message is dropped (the planner logs a full pool by class).
# Prints PASS/FAIL and MEASURE lines. Every wait has a deadline; nothing
# asserts on elapsed time.
set -u
cd "$(dirname "$0")/../.."
. tests/integration/broker.sh

. tests/integration/lib.sh

sky_test_workdir adversary-broker
PIDS=""
PLAN_PID=""
FLOOD_PIDS=""
cleanup() {
	for p in $FLOOD_PIDS $PIDS $PLAN_PID; do kill "$p" 2>/dev/null; done
	for p in $FLOOD_PIDS $PIDS $PLAN_PID; do wait "$p" 2>/dev/null; done
	sky_broker_stop
	if [ "$fails" -eq 0 ] && [ -z "${SKY_KEEP:-}" ]; then rm -rf "$W"; else echo "(logs kept in $W)"; fi
}
trap cleanup EXIT

if ! sky_broker_start "$W/broker"; then
	fail adversary_broker "mosquitto did not start"
	exit 1
fi
BR="127.0.0.1:$SKY_BROKER_PORT"
PKI=$SKY_PKI_DIR
SKY="$SKY_BIN/sky"
STATE="$W/skyplan"
FLOOD="python3 tests/integration/claim_flood.py --port $SKY_CLAIM_PORT --ca $PKI/ca.crt
	--cert $PKI/claim/claim.crt --key $PKI/claim/claim.key"
fleet_json() { "$SKY" fleet status --state "$STATE" --json 2>/dev/null; }
counter() { fleet_json | sed -n "s/.*\"$1\":\([0-9]*\).*/\1/p" | head -1; }
board_field() { # board field: from fleet.json, one board object per line
	fleet_json | sed 's/{"id":/\n{"id":/g' | grep "^{\"id\":\"$1\"" | head -1 |
		sed -n "s/.*\"$2\":\"\{0,1\}\([^\",}]*\).*/\1/p"
}
wait_for() { sky_wait "$WAIT_S" "$@"; } # at most $WAIT_S seconds
now() { date +%s.%N; }
elapsed() { echo "$1 $2" | awk '{printf "%.3f", $2 - $1}'; }
submit() { # job id [ack timeout s]: acknowledged?
	"$SKY" job submit --pki "$PKI" --broker "$BR" --model tiny --layers 2 --job "$1" \
		--min-boards 2 --ack-timeout "${2:-60}" >"$W/$1.out" 2>"$W/$1.err" &&
		grep -q "acknowledged" "$W/$1.out" "$W/$1.err"
}

# bA: a board that runs; bX: a board's certificate in the attacker's hands
if ! "$SKY" pki issue --dir "$PKI" --id bA --state "$W/bA" >/dev/null 2>"$W/bA.issue" ||
	! "$SKY" pki issue --dir "$PKI" --id bX --state "$W/bX" >/dev/null 2>"$W/bX.issue"; then
	fail adversary_boards_issued "$(cat "$W/bA.issue" "$W/bX.issue")"
	exit 1
fi
XTLS="-h 127.0.0.1 -p $SKY_BROKER_PORT -i sky:attacker --cafile $PKI/ca.crt
	--cert $W/bX/board.crt --key $W/bX/board.key"
OTLS="-h 127.0.0.1 -p $SKY_BROKER_PORT -i sky:stale-op --cafile $PKI/ca.crt
	--cert $PKI/operator.crt --key $PKI/operator.key"

# ---- retained copies of messages that are never retained ------------------------
# before skyplan subscribes: a retained heartbeat (bX) and a retained
# submit (the operator's own topic): the broker stores both (mosquitto 2.0
# cannot refuse a retained publish per topic) and hands them to skyplan
# when it subscribes; were they taken, the submit would queue job jr on
# every start of skyplan (one log line per 10 s: the counter counts both)
# shellcheck disable=SC2086
timeout 20 mosquitto_pub $XTLS -q 1 -r -t sky/v1/board/bX/heartbeat \
	-m '{"v":1,"state":"online","session":1,"boot":"0123456789abcdef","keepalive_s":2}' 2>"$W/rhb.err"
# shellcheck disable=SC2086
timeout 20 mosquitto_pub $OTLS -q 1 -r -t sky/v1/jobs/sky-operator/submit \
	-m '{"job":"jr","model":"tiny","layers":2,"min_boards":1,"submit_id":"00ff00ff00ff00ff"}' 2>"$W/rsub.err"

"$SKY_BIN/skyplan" --pki "$PKI" --broker "$BR" --state "$STATE" >"$W/skyplan.log" 2>&1 &
PLAN_PID=$!
WAIT_S=20
if ! wait_for grep -q "serving" "$W/skyplan.log"; then
	fail adversary_skyplan_starts "$(tail -3 "$W/skyplan.log")"
	exit 1
fi
rdrop() { r=$(counter retained_dropped); [ -n "$r" ] && [ "$r" -ge 2 ]; }
if wait_for rdrop && grep -q "retained message on sky/v1/\(jobs/sky-operator/submit\|board/bX/heartbeat\) ([0-9]* bytes) dropped: that kind of message is never retained" "$W/skyplan.log" &&
	! grep -q "job jr" "$W/skyplan.log"; then
	pass retained_copies_of_unretained_kinds_are_dropped_and_counted
else
	fail retained_copies_of_unretained_kinds_are_dropped_and_counted \
		"retained_dropped $(counter retained_dropped): $(grep "retained\|jr" "$W/skyplan.log" | head -3)"
fi
# their writers clear them (an empty retained publish)
# shellcheck disable=SC2086
timeout 20 mosquitto_pub $XTLS -q 1 -r -n -t sky/v1/board/bX/heartbeat 2>>"$W/rhb.err"
# shellcheck disable=SC2086
timeout 20 mosquitto_pub $OTLS -q 1 -r -n -t sky/v1/jobs/sky-operator/submit 2>>"$W/rsub.err"
"$SKY_BIN/skyd" --id bA --state "$W/bA" --broker "$BR" --keepalive 2 --model tiny --layers 2 \
	--probe-seconds 1 >"$W/bA.log" 2>&1 &
PIDS="$PIDS $!"
a_online() { [ "$(board_field bA state)" = online ]; }
WAIT_S=60
if ! wait_for a_online; then
	fail adversary_board_online "bA: $(tail -3 "$W/bA.log")"
	exit 1
fi

# ---- the claim identity floods enrollment --------------------------------------
# a fresh nonce is refused by the broker itself (MQTT v5 says why)
# shellcheck disable=SC2086
timeout 20 mosquitto_pub -h 127.0.0.1 -p "$SKY_CLAIM_PORT" -i sky:fresh-probe --cafile "$PKI/ca.crt" \
	--cert "$PKI/claim/claim.crt" --key "$PKI/claim/claim.key" -V 5 -q 1 \
	-t sky/v1/enroll/sky:some-other-nonce/csr -m x 2>"$W/fresh.err"
if grep -q 'Not authorized' "$W/fresh.err"; then
	pass claim_connection_cannot_post_under_a_fresh_nonce
else
	fail claim_connection_cannot_post_under_a_fresh_nonce "$(head -c 200 "$W/fresh.err")"
fi
REF0=$(counter enroll_refused)
# shellcheck disable=SC2086
$FLOOD --mode fresh --conns 4 --rate 1000 --seconds 40 --prefix fresh- >"$W/flood-fresh.out" 2>&1 &
FLOOD_PIDS="$!"
# shellcheck disable=SC2086
$FLOOD --mode own --conns 40 --rate 10 --seconds 40 --prefix own- >"$W/flood-own.out" 2>&1 &
FLOOD_PIDS="$FLOOD_PIDS $!"
# the board starts once the flood reaches the planner (ordering, not a delay)
flooding() { r=$(counter enroll_refused); [ -n "$r" ] && [ "$r" -gt $((${REF0:-0} + 40)) ]; }
WAIT_S=30
wait_for flooding || fail enrollment_flood_reaches_the_planner "enroll_refused $(counter enroll_refused) (was $REF0)"
cp -r "$PKI/claim" "$W/bN-claim"
tok=$("$SKY" pki token --dir "$PKI" --ttl 300)
T0=$(now)
"$SKY_BIN/skyd" --enroll --claim "$tok" --id bN --pki-ca "$W/bN-claim/ca.crt" --state "$W/bN" \
	--broker "$BR" --keepalive 2 --model tiny --layers 2 --probe-seconds 1 >"$W/bN.log" 2>&1 &
PIDS="$PIDS $!"
WAIT_S=5 # the flood lasts 40 s: the board must get through while it runs, within 5 s
if wait_for grep -q "enroll: bN enrolled" "$W/bN.log"; then
	T1=$(now)
	echo "MEASURE enroll_during_claim_flood_s $(elapsed "$T0" "$T1")"
	pass board_enrolls_during_claim_flood
else
	fail board_enrolls_during_claim_flood "no certificate within 5 s: $(tail -2 "$W/bN.log")"
fi
for p in $FLOOD_PIDS; do wait "$p"; done
FLOOD_PIDS=""
REF1=$(counter enroll_refused)
echo "MEASURE claim_flood $(cat "$W/flood-fresh.out") (fresh nonces); $(cat "$W/flood-own.out") (own nonces);" \
	"requests that reached the planner $((REF1 - REF0))"
grep -q "nonce sky:fresh-" "$W/skyplan.log" &&
	fail fresh_nonces_never_reach_the_planner "$(grep -m1 'nonce sky:fresh-' "$W/skyplan.log")" ||
	pass fresh_nonces_never_reach_the_planner

# ---- 32 MiB junk on control topics -------------------------------------------------
head -c $((32 << 20)) /dev/zero | tr '\0' 'x' >"$W/junk32"
OV0=$(counter oversize)
# shellcheck disable=SC2086
timeout 60 mosquitto_pub $XTLS -q 1 -t sky/v1/board/bX/heartbeat -f "$W/junk32" 2>"$W/junk1.err"
# shellcheck disable=SC2086
timeout 60 mosquitto_pub $XTLS -q 1 -r -t sky/v1/board/bX/caps -f "$W/junk32" 2>"$W/junk2.err"
ov2() { r=$(counter oversize); [ -n "$r" ] && [ "$r" -ge $((${OV0:-0} + 2)) ]; }
WAIT_S=60
if wait_for ov2 && grep -q "from bX\|bX/.*dropped unread" "$W/skyplan.log" && submit jb1; then
	pass control_topic_junk_is_dropped_unread
	grep -m2 "from bX\|bX/.*dropped unread" "$W/skyplan.log" | sed 's/^/   log: /' | cut -c1-200
else
	fail control_topic_junk_is_dropped_unread "oversize $(counter oversize) (was $OV0); $(grep -m1 bX "$W/skyplan.log")"
fi
# the owner clears its retained junk (the broker cannot refuse it: docs/security.md)
# shellcheck disable=SC2086
timeout 20 mosquitto_pub $XTLS -q 1 -r -t sky/v1/board/bX/caps -n 2>"$W/clear.err" &&
	pass owner_clears_its_retained_junk || fail owner_clears_its_retained_junk "$(cat "$W/clear.err")"

# ---- a bulk flood does not drop control messages -------------------------------------
S_A=$(board_field bA session)
for k in 1 2 3 4 5 6 7 8; do
	# shellcheck disable=SC2086
	timeout 120 sh -c "for i in 1 2 3; do mosquitto_pub $XTLS -q 0 -t sky/v1/job/jflood/ckpt/bX \
		-f '$W/junk32' || exit 1; done" >/dev/null 2>&1 &
	FLOOD_PIDS="$FLOOD_PIDS $!"
done
T0=$(now)
submit jb2 1 # acknowledged within 1 s while the flood runs
rc=$?
T1=$(now)
for p in $FLOOD_PIDS; do wait "$p"; done
FLOOD_PIDS=""
echo "MEASURE submit_ack_during_bulk_flood_s $(elapsed "$T0" "$T1")"
BULK=$(grep -c "bulk receive pool was full" "$W/skyplan.log")
echo "MEASURE bulk_pool_full_lines $BULK"
grep "receive pool was full" "$W/skyplan.log" | head -3 | sed 's/^/   log: /' | cut -c1-200
bad=""
[ $rc -eq 0 ] || bad="$bad submit not acknowledged: $(cat "$W/jb2.out" "$W/jb2.err" | head -c 200);"
grep -q "control receive pool was full" "$W/skyplan.log" && bad="$bad control messages dropped;"
[ "$(board_field bA state)" = online ] || bad="$bad bA is $(board_field bA state);"
[ "$(board_field bA session)" = "$S_A" ] || bad="$bad bA session $S_A -> $(board_field bA session);"
[ -z "$bad" ] && pass bulk_flood_does_not_drop_control_messages ||
	fail bulk_flood_does_not_drop_control_messages "$bad"

exit $((fails > 0))
