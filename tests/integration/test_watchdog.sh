#!/bin/sh
# The systemd watchdog, without systemd: skyd and skyplan run as a
# Type=notify unit would start them, with $NOTIFY_SOCKET naming a unix
# datagram socket this test reads (tests/integration/notify_sink.py) and
# $WATCHDOG_USEC asking for a ping every quarter second. Checks:
#   - each daemon sends READY=1, then WATCHDOG=1 pings from its main loop;
#   - SIGSTOP on skyd (a wedged loop): the pings stop; SIGCONT: they resume
#     (under systemd, WatchdogSec= would have killed and restarted it);
#   - with $JOURNAL_STREAM naming its stderr (as systemd sets it), skyd's
#     log lines carry <N> priorities and no time stamp.
# Against a real mosquitto on loopback (tests/integration/broker.sh). Prints
# PASS/FAIL lines. Bounded: every wait has a deadline.
set -u
cd "$(dirname "$0")/../.."
. tests/integration/broker.sh

. tests/integration/lib.sh
sky_test_workdir watchdog
PIDS=""
cleanup() {
	[ -n "${SKYD_PID:-}" ] && kill -CONT "$SKYD_PID" 2>/dev/null
	for p in $PIDS; do kill "$p" 2>/dev/null; done
	for p in $PIDS; do wait "$p" 2>/dev/null; done
	sky_broker_stop
	if [ "$fails" -eq 0 ] && [ -z "${SKY_KEEP:-}" ]; then rm -rf "$W"; else echo "(logs kept in $W)"; fi
}
trap cleanup EXIT
wait_for() { sky_wait "$WAIT_S" "$@"; } # at most $WAIT_S seconds
pings() { grep -c '^WATCHDOG=1$' "$1" 2>/dev/null || true; }
more_pings() { [ "$(pings "$1")" -gt "$2" ]; }
# starts a fake notify socket: sink NAME -> $W/NAME.sock, messages in $W/NAME.notify
sink() {
	python3 tests/integration/notify_sink.py "$W/$1.sock" "$W/$1.notify" &
	PIDS="$PIDS $!"
	WAIT_S=10
	wait_for grep -q LISTENING "$W/$1.notify"
}

if ! sky_broker_start "$W/broker"; then
	fail watchdog_broker "mosquitto did not start"
	exit 1
fi
BR="127.0.0.1:$SKY_BROKER_PORT"
PKI=$SKY_PKI_DIR
if ! sink plan || ! sink board; then
	fail watchdog_sink "the fake notify socket did not start (python3)"
	exit 1
fi

# the planner, as skyplan.service starts it (WatchdogSec=1 here)
NOTIFY_SOCKET="$W/plan.sock" WATCHDOG_USEC=1000000 \
	"$SKY_BIN/skyplan" --pki "$PKI" --broker "$BR" --state "$W/plan" >"$W/skyplan.log" 2>&1 &
PLAN_PID=$!
PIDS="$PIDS $PLAN_PID"
WAIT_S=30
if wait_for grep -q '^READY=1 STATUS=running' "$W/plan.notify" && WAIT_S=15 wait_for more_pings "$W/plan.notify" 1; then
	pass watchdog_skyplan_ready_and_pings
else
	fail watchdog_skyplan_ready_and_pings "notify messages: $(tr '\n' '|' <"$W/plan.notify")"
fi

# the board enrolls, then runs as skyd.service would start it; stderr is a
# file whose device and inode $JOURNAL_STREAM names, as systemd does for
# the journal's stream
mkdir -p "$W/b1"
tok=$("$SKY_BIN/sky" pki token --dir "$PKI" --ttl 300)
if ! "$SKY_BIN/skyd" --enroll-only --claim "$tok" --id b1 --pki-ca "$PKI/claim/ca.crt" \
	--state "$W/b1/state" --broker "$BR" >"$W/enroll.log" 2>&1; then
	fail watchdog_enroll "$(tail -3 "$W/enroll.log")"
	exit 1
fi
: >"$W/skyd.log"
JS=$(stat -c '%d:%i' "$W/skyd.log")
NOTIFY_SOCKET="$W/board.sock" WATCHDOG_USEC=1000000 JOURNAL_STREAM="$JS" \
	"$SKY_BIN/skyd" --state "$W/b1/state" --broker "$BR" --model tiny --layers 2 \
	--probe-seconds 1 2>>"$W/skyd.log" &
SKYD_PID=$!
PIDS="$PIDS $SKYD_PID"
WAIT_S=60
if wait_for grep -q '^READY=1 STATUS=running' "$W/board.notify" && WAIT_S=15 wait_for more_pings "$W/board.notify" 2; then
	pass watchdog_skyd_ready_and_pings
else
	fail watchdog_skyd_ready_and_pings "notify messages: $(tr '\n' '|' <"$W/board.notify")"
fi

# SIGSTOP: a loop that does not run does not ping. A ping sent just
# before the stop may still be in the socket: let it land, then count.
kill -STOP "$SKYD_PID"
sleep 1
n_stopped=$(pings "$W/board.notify")
sleep 3 # 12 ping intervals
n_after=$(pings "$W/board.notify")
if [ "$n_stopped" -gt 0 ] && [ "$n_after" -eq "$n_stopped" ]; then
	pass watchdog_pings_stop_while_stopped
else
	fail watchdog_pings_stop_while_stopped "$n_stopped pings before the stop, $((n_after - n_stopped)) while stopped"
fi
kill -CONT "$SKYD_PID"
WAIT_S=15
if wait_for more_pings "$W/board.notify" "$((n_after + 1))"; then
	pass watchdog_pings_resume_after_sigcont
else
	fail watchdog_pings_resume_after_sigcont "$(pings "$W/board.notify") pings, $n_after before SIGCONT"
fi
# skyplan, not stopped, kept pinging all along
if [ "$(pings "$W/plan.notify")" -gt 8 ]; then
	pass watchdog_skyplan_keeps_pinging
else
	fail watchdog_skyplan_keeps_pinging "only $(pings "$W/plan.notify") pings"
fi

# journald lines: a priority prefix, no time stamp, no name
if grep -q '^<6>' "$W/skyd.log" && ! grep -v '^<[3467]>' "$W/skyd.log" | grep -q .; then
	pass watchdog_skyd_journal_priorities
else
	fail watchdog_skyd_journal_priorities "$(head -3 "$W/skyd.log" | tr '\n' '|')"
fi

kill "$SKYD_PID"
wait "$SKYD_PID"
rc=$?
if [ "$rc" -eq 0 ] && grep -q '^STOPPING=1$' "$W/board.notify"; then
	pass watchdog_skyd_stopping_on_sigterm
else
	fail watchdog_skyd_stopping_on_sigterm "exit $rc; notify: $(tail -2 "$W/board.notify" | tr '\n' '|')"
fi
SKYD_PID=""
exit $((fails > 0))
