#!/bin/sh
# sky_mqtt_close while a flood of messages is still arriving (the exit of
# `sky job collect` and `sky job watch`), against a real mosquitto:
# mosquitto_pub, as the planner, floods a topic that skyplan relays to the
# operator; tests/wire/test_mqtt_close connects as the operator on the
# claim listener, subscribes, waits for the flood and closes mid-stream,
# SKY_MQTT_CLOSE_CYCLES times per process, in SKY_MQTT_CLOSE_RUNS processes
# (each one's last close also stops Paho's threads and exits, as collect
# does). A process that crashes or that AddressSanitizer stops (run it with
# SKY_BUILD=build/host-san) fails the test; the line close_runs says how
# many of the runs did (SKY_MQTT_CLOSE_BIN: another build of the binary).
# Prints PASS/FAIL lines; every wait has a deadline.
set -u
cd "$(dirname "$0")/../.."
. tests/integration/broker.sh
. tests/integration/lib.sh

sky_test_workdir mqttclose
BIN="${SKY_MQTT_CLOSE_BIN:-${SKY_BUILD:-build/host}/tests/wire/test_mqtt_close}"
RUNS=${SKY_MQTT_CLOSE_RUNS:-10}
CYCLES=${SKY_MQTT_CLOSE_CYCLES:-20}
FLOOD=""
cleanup() {
	[ -n "$FLOOD" ] && kill "$FLOOD" 2>/dev/null && wait "$FLOOD" 2>/dev/null
	sky_broker_stop
	if [ "$fails" -eq 0 ] && [ -z "${SKY_KEEP:-}" ]; then rm -rf "$W"; else echo "(logs kept in $W)"; fi
}
trap cleanup EXIT

if [ ! -x "$BIN" ]; then
	fail close_built "$BIN not built (make tests)"
	exit 1
fi
if ! sky_broker_start "$W/broker"; then
	fail close_broker "mosquitto did not start"
	exit 1
fi
PKI=$SKY_PKI_DIR
TOPIC=sky/v1/jobs/sky-operator/job/closetest/metrics
# one connection, QoS 0, one message per line as fast as the broker takes them
line=$(head -c 300 /dev/zero | tr '\0' m)
yes "$line" | mosquitto_pub $(sky_mq_tls "$PKI/planner.crt" "$PKI/planner.key") \
	-q 0 -t "$TOPIC" -l >"$W/flood.log" 2>&1 &
FLOOD=$!

bad=0
i=0
while [ $i -lt "$RUNS" ]; do
	SKY_MQTT_CLOSE_BROKER="127.0.0.1:$SKY_CLAIM_PORT" SKY_MQTT_CLOSE_PKI="$PKI" \
		SKY_MQTT_CLOSE_FILTER="sky/v1/jobs/sky-operator/job/closetest/#" \
		SKY_MQTT_CLOSE_CYCLES="$CYCLES" "$BIN" >"$W/run$i.log" 2>&1
	rc=$?
	if [ $rc -ne 0 ] || ! grep -q "^PASS close_while_a_flood_arrives" "$W/run$i.log"; then
		bad=$((bad + 1))
		echo "run $i: exit $rc"
		grep -m 3 -E "ERROR: AddressSanitizer|SUMMARY|FAIL" "$W/run$i.log"
	fi
	i=$((i + 1))
done
kill -0 "$FLOOD" 2>/dev/null || fail close_flood "the flood stopped early: $(head -c 300 "$W/flood.log")"
msgs=$(sed -n 's/.*cycles, \([0-9]*\) messages dispatched/\1/p' "$W"/run*.log | awk '{s+=$1} END {print s+0}')
echo "close_runs: $RUNS runs x $CYCLES closes, $bad failed, $msgs messages dispatched"
if [ $bad -eq 0 ]; then
	pass close_while_a_flood_arrives
else
	fail close_while_a_flood_arrives "$bad of $RUNS runs crashed or failed (see above)"
fi
exit $((fails > 0))
