#!/bin/sh
# A real ARM board in a loopback fleet, and heterogeneity on one machine:
# the aarch64 skyd (make BOARD=generic-aarch64) under qemu-aarch64 -L /
# -cpu max enrolls from a claim token, probes the job's shapes within its
# bound, reports its capabilities and accepts its part of a signed plan next
# to two native boards emulating 1/50 and 1/100 of a core (skyd --speed; the
# fleet's total stays under this machine's cores). The planner (optimal)
# must give each board a share that fits its measured speed: the 1/100 board
# reports slower layers and gets fewer half-layers than the 1/50 one, and
# the qemu board (slower still) fewer than either but at least one. The
# native boards are slowed that far because against a native core the qemu
# board (30-100 s per mini layer) is so slow that optimal leaves it out.
# Also: skyd --speed refuses what it cannot emulate, before enrolling.
#
# Skipped (a SKIP line, exit 0) without qemu-aarch64 or the cross build.
# Prints PASS/FAIL lines and MEASURE lines (the qemu board's probe figures
# and the plan). Every wait has a deadline; every qemu run is bounded by
# timeout -s KILL (a guest spinning with signals blocked ignores SIGTERM).
set -u
cd "$(dirname "$0")/../.."
. tests/integration/broker.sh

ARM=build/generic-aarch64/bin/skyd
if ! command -v qemu-aarch64 >/dev/null 2>&1 || [ ! -x "$ARM" ]; then
	echo "SKIP qemu_board: needs qemu-aarch64 and $ARM (make BOARD=generic-aarch64)"
	exit 0
fi
# -L /: the arm64 loader and libc from the host's multiarch packages (see
# QEMU_KILL_S in the Makefile for why not -L /usr/aarch64-linux-gnu)
QEMU="timeout -s KILL 600 qemu-aarch64 -L / -cpu max"
MODEL=mini
BATCH=2 # sequences per micro-batch: keeps the natives' stage arenas small
LAYERS=32 # 64 half-layers: the natives' bottleneck stays above one qemu half-layer
# (the emulated speed counts CPU time since the stretch went by it; with the
# wall-time stretch a loaded machine had slowed the natives further, and at
# 0.04 and 0.02 optimal left the qemu board out: 0.39 and 0.91 s per layer
# against its 5.4 s)
SPEED1=0.02
SPEED2=0.01
. tests/integration/lib.sh

sky_test_workdir qemu
PIDS=""
PLAN_PID=""
cleanup() {
	for p in $PIDS $PLAN_PID; do kill "$p" 2>/dev/null; done
	# 10 s to exit on SIGTERM, then SIGKILL; for the qemu board $p is
	# timeout(1), which passes SIGTERM on but leaves its child running when
	# killed itself, so the child (the spinning guest, if any) goes first
	_end=$(($(date +%s) + 10))
	for p in $PIDS $PLAN_PID; do
		while kill -0 "$p" 2>/dev/null && [ "$(date +%s)" -le "$_end" ]; do sleep 0.2; done
		if kill -0 "$p" 2>/dev/null; then
			for c in $(ps -o pid= --ppid "$p" 2>/dev/null); do kill -9 "$c" 2>/dev/null; done
			kill -9 "$p" 2>/dev/null
		fi
		wait "$p" 2>/dev/null
	done
	sky_broker_stop
	if [ "$fails" -eq 0 ] && [ -z "${SKY_KEEP:-}" ]; then rm -rf "$W"; else echo "(logs kept in $W)"; fi
}
trap cleanup EXIT

wait_for() { sky_wait "$WAIT_S" "$@"; } # at most $WAIT_S seconds

# ---- --speed refusals (no broker needed: refused before anything else) -----
for bad in 0 -1 65 abc; do
	out=$("$SKY_BIN/skyd" --state "$W/none" --broker 127.0.0.1:1 --speed "$bad" 2>&1)
	rc=$?
	if [ $rc -eq 2 ] && echo "$out" | grep -q "skyd: --speed expects a number in (0, 64], got '$bad'"; then
		pass "qemu_speed_${bad}_refused"
	else
		fail "qemu_speed_${bad}_refused" "rc $rc: $out"
	fi
done
out=$("$SKY_BIN/skyd" --state "$W/none" --broker 127.0.0.1:1 --speed 2 2>&1)
rc=$?
if [ $rc -eq 2 ] && echo "$out" | grep -q "speed 2 asks for 2 cores' worth but profile .* gives this board 1 OpenBLAS thread"; then
	pass qemu_speed_above_threads_refused
else
	fail qemu_speed_above_threads_refused "rc $rc: $out"
fi
[ -d "$W/none" ] && fail qemu_speed_refused_before_state "skyd made $W/none" ||
	pass qemu_speed_refused_before_state

# ---- a fleet: two native boards at speed 1 and 1/2, one aarch64 under qemu ---
if ! sky_broker_start "$W/broker"; then
	fail qemu_broker "mosquitto did not start"
	exit 1
fi
BR="127.0.0.1:$SKY_BROKER_PORT"
PKI=$SKY_PKI_DIR
SKY="$SKY_BIN/sky"
STATE="$W/skyplan"
fleet_json() { "$SKY" fleet status --state "$STATE" --json 2>/dev/null; }
board_obj() { fleet_json | sed 's/{"id":/\n{"id":/g' | grep "^{\"id\":\"$1\"" | head -1; }

"$SKY_BIN/skyplan" --pki "$PKI" --broker "$BR" --state "$STATE" >"$W/skyplan.log" 2>&1 &
PLAN_PID=$!
WAIT_S=15
if ! wait_for grep -q "serving" "$W/skyplan.log"; then
	fail qemu_skyplan_starts "$(tail -3 "$W/skyplan.log")"
	exit 1
fi

start_board() { # id speed command...
	b=$1 speed=$2
	shift 2
	mkdir -p "$W/$b"
	cp -r "$PKI/claim" "$W/$b/claim"
	tok=$("$SKY" pki token --dir "$PKI" --ttl 600) || fail qemu_token "sky pki token failed"
	OPENBLAS_NUM_THREADS=1 "$@" --enroll --claim "$tok" --id "$b" --pki-ca "$W/$b/claim/ca.crt" \
		--state "$W/$b/state" --broker "$BR" --keepalive 10 --model $MODEL --layers $LAYERS \
		--batch $BATCH --speed "$speed" >"$W/$b.log" 2>&1 &
	PIDS="$PIDS $!"
}
# One board at a time: probes that overlap on a shared machine distort each
# other (a board that sleeps for its --speed gets the CPU sooner when it
# wakes than one that never sleeps: n2 at speed 0.5 once measured only 1.1x
# n1's time while both probed beside the qemu board).
has_caps() { board_obj "$1" | grep -q '"state":"online".*"caps":{'; }
T0=$(date +%s.%N)
start_board q1 1 $QEMU "$ARM"
WAIT_S=240
if wait_for has_caps q1; then
	T1=$(date +%s.%N)
	pass qemu_board_enrolls_probes_and_reports
	echo "MEASURE qemu_board_start_to_reported_s $(echo "$T0 $T1" | awk '{printf "%.1f", $2 - $1}')"
else
	fail qemu_board_enrolls_probes_and_reports "$(tail -5 "$W/q1.log")"
fi
WAIT_S=60
start_board n1 $SPEED1 "$SKY_BIN/skyd"
wait_for has_caps n1 || fail qemu_native_n1_reports "$(tail -3 "$W/n1.log")"
start_board n2 $SPEED2 "$SKY_BIN/skyd"
wait_for has_caps n2 || fail qemu_native_n2_reports "$(tail -3 "$W/n2.log")"

# the qemu board's probe: within its bound (3 s, plus a run over it), and
# the figures a planner gets
probe_line=$(grep "probe: $MODEL layer fwd" "$W/q1.log" | tail -1)
probe_s=$(echo "$probe_line" | sed -n 's/.* in \([0-9.]*\) s$/\1/p')
echo "MEASURE qemu_board_probe: $(echo "$probe_line" | sed 's/.*probe: //')"
if [ -n "$probe_s" ] && awk -v s="$probe_s" 'BEGIN {exit !(s < 12)}'; then
	pass qemu_board_probe_within_bound
else
	fail qemu_board_probe_within_bound "probe line: ${probe_line:-none}"
fi

# layer time (fwd + bwd, seconds) each board reported
layer_s() {
	board_obj "$1" | sed -n 's/.*"fwd_s":\([0-9.e+-]*\),"bwd_s":\([0-9.e+-]*\).*/\1 \2/p' |
		awk '{printf "%.6f", $1 + $2}'
}
LQ=$(layer_s q1)
L1=$(layer_s n1)
L2=$(layer_s n2)
echo "MEASURE reported_layer_s q1 $LQ n1 $L1 n2 $L2 (fwd+bwd, $MODEL, per micro-batch)"
# half the --speed stretches compute to twice the time: the probe must see it
# (a wide window: other work on a shared machine changes between probes)
if awk -v a="$L2" -v b="$L1" 'BEGIN {exit !(b > 0 && a / b > 1.3 && a / b < 6)}'; then
	pass qemu_slower_native_board_reports_slower
else
	fail qemu_slower_native_board_reports_slower "n2 $L2 s vs n1 $L1 s per layer"
fi
if awk -v q="$LQ" -v b="$L1" 'BEGIN {exit !(b > 0 && q > b)}'; then
	pass qemu_board_measured_slower_than_native
else
	fail qemu_board_measured_slower_than_native "q1 $LQ s vs n1 $L1 s per layer"
fi

# ---- a job: every board, the qemu one included, takes its part -------------
# the bottleneck objective: the step objective may rightly leave a board this
# much slower out (its stage lengthens fill and drain); this test is about
# the share a slow board gets when it is in the plan
"$SKY" job submit --pki "$PKI" --broker "$BR" --model $MODEL --layers $LAYERS --job jq \
	--batch $BATCH --micro-batches 8 --min-boards 3 --algo optimal --objective bottleneck --wait 120 --json >"$W/job.json" 2>"$W/job.err"
rc=$?
if [ $rc -eq 0 ] && grep -q '"accepted":3,' "$W/job.json"; then
	pass qemu_plan_accepted_by_all_three
else
	fail qemu_plan_accepted_by_all_three "rc $rc: $(cat "$W/job.json" "$W/job.err" | head -c 400)"
fi
WAIT_S=30
wait_for grep -q "plan jq epoch [0-9]* accepted" "$W/q1.log" &&
	pass qemu_board_accepts_its_stage ||
	fail qemu_board_accepts_its_stage "$(grep -i plan "$W/q1.log" | tail -3)"
# half-layer count of a board's stage, from its own log line
units() {
	sed -n 's/.*plan jq epoch [0-9]* accepted: stage [0-9]* of [0-9]*, half-layers \([0-9]*\)-\([0-9]*\),.*/\1 \2/p' \
		"$W/$1.log" | tail -1 | awk '{print $2 - $1 + 1}'
}
UQ=$(units q1)
U1=$(units n1)
U2=$(units n2)
echo "MEASURE plan_half_layers q1 ${UQ:-none} n1 ${U1:-none} n2 ${U2:-none} (of $((2 * LAYERS)), algo optimal)"
grep -h "plan jq epoch" "$W"/q1.log "$W"/n1.log "$W"/n2.log | sed 's/^[^ ]* [^ ]* /   log: /'
if [ -n "$UQ" ] && [ -n "$U1" ] && [ -n "$U2" ] && [ "$UQ" -ge 1 ] && [ "$UQ" -lt "$U1" ] &&
	[ "$UQ" -lt "$U2" ]; then
	pass qemu_board_share_fits_its_speed
else
	fail qemu_board_share_fits_its_speed "half-layers q1 ${UQ:-?} n1 ${U1:-?} n2 ${U2:-?}"
fi
if [ -n "$U1" ] && [ -n "$U2" ] && [ "$U2" -lt "$U1" ]; then
	pass qemu_slower_native_board_gets_fewer_layers
else
	fail qemu_slower_native_board_gets_fewer_layers "half-layers n1 ${U1:-?} n2 ${U2:-?}"
fi

# ---- clean shutdown: the qemu guest exits on SIGTERM ----------------------
QPID=$(echo $PIDS | cut -d' ' -f1)
kill "$QPID" 2>/dev/null
WAIT_S=20
gone() { ! kill -0 "$QPID" 2>/dev/null; }
if wait_for gone; then
	wait "$QPID" 2>/dev/null
	rc=$?
	[ $rc -eq 0 ] && pass qemu_board_exits_on_sigterm ||
		fail qemu_board_exits_on_sigterm "exit status $rc: $(tail -2 "$W/q1.log")"
else
	fail qemu_board_exits_on_sigterm "still running 20 s after SIGTERM"
fi
echo "$fails failed"
[ "$fails" -eq 0 ]
