# A loopback fleet for the benchmarks (POSIX sh; source it from the
# repository root with SKY_BUILD set, as tools/bench_fleet.sh and
# tools/bench_infer.sh do): a TLS mosquitto (tests/integration/broker.sh),
# skyplan, and skyd boards of unequal emulated speed (skyd --speed) that
# enroll with one-time tokens, probe at the job's shapes and report.
#
#   FLEET_WHAT="sky bench fleet"   names the caller in messages
#   fleet_begin                    a work directory $W (removed at the end
#                                  unless KEEP=1 or a failure), traps that
#                                  stop everything on exit and on signals
#   fleet_start                    broker and skyplan: sets BR (the fleet's
#                                  HOST:PORT), PKI, STATE
#   fleet_board ID SPEED [PREFIX...]  one board (PREFIX: e.g. a qemu command
#                                  line before skyd), probing $MODEL with
#                                  $LAYERS layers ($SEQ_OPT), one at a time:
#                                  returns once it has reported; N counts them
#   die MESSAGE                    says it, marks the run failed, exits 1
#   wait_for SECONDS COMMAND...    polls COMMAND every 0.2 s
#   say / log                      a line on stdout (not with JSON=1) / stderr
# Every process started goes into $PIDS; fleet_stop (run by the traps)
# gives each 10 s to exit on SIGTERM, then SIGKILL, and stops the broker.

. tests/integration/broker.sh
SKY="$SKY_BIN/sky"
export OPENBLAS_NUM_THREADS=1
PIDS=""
FAILED=0
KEEP=${KEEP:-0}
JSON=${JSON:-0}
N=0
say() { [ "$JSON" = 1 ] || echo "$*"; }
log() { echo "$*" >&2; }

fleet_stop() {
	trap - EXIT INT TERM HUP
	for p in $PIDS; do kill "$p" 2>/dev/null; done
	# every process gets 10 s to exit on SIGTERM, then SIGKILL
	_end=$(($(date +%s) + 10))
	for p in $PIDS; do
		while kill -0 "$p" 2>/dev/null && [ "$(date +%s)" -lt "$_end" ]; do sleep 0.1; done
		kill -9 "$p" 2>/dev/null
		wait "$p" 2>/dev/null
	done
	PIDS=""
	sky_broker_stop
	if [ "$KEEP" = 1 ] || [ "$FAILED" = 1 ]; then
		log "$FLEET_WHAT: logs kept in $W"
	else
		rm -rf "$W"
	fi
}

die() {
	log "$FLEET_WHAT: $*"
	FAILED=1
	exit 1
}

wait_for() { # wait_for SECONDS command...: polls every 0.2 s
	_end=$(($(date +%s) + $1))
	shift
	while [ "$(date +%s)" -le "$_end" ]; do
		"$@" && return 0
		sleep 0.2
	done
	return 1
}

fleet_begin() {
	W=$(mktemp -d "${TMPDIR:-/tmp}/sky-$(echo "$FLEET_WHAT" | tr ' ' '-' | sed 's/^sky-//').XXXXXX") ||
		exit 1
	trap fleet_stop EXIT
	trap 'FAILED=1; fleet_stop; exit 130' INT TERM HUP
}

fleet_start() {
	sky_broker_start "$W/broker" >/dev/null || die "mosquitto did not start"
	BR="127.0.0.1:$SKY_BROKER_PORT"
	PKI=$SKY_PKI_DIR
	STATE="$W/skyplan"
	"$SKY_BIN/skyplan" --pki "$PKI" --broker "$BR" --state "$STATE" >"$W/skyplan.log" 2>&1 &
	PIDS="$PIDS $!"
	wait_for 20 grep -q "serving" "$W/skyplan.log" ||
		die "skyplan did not start: $(tail -3 "$W/skyplan.log")"
}

_fleet_reported() {
	[ "$("$SKY" fleet status --state "$STATE" --json 2>/dev/null | grep -o '"caps":{' | wc -l)" -ge "$N" ]
}

fleet_board() { # fleet_board ID SPEED [COMMAND PREFIX...]
	_id=$1
	_speed=$2
	shift 2
	[ $# -gt 0 ] || set -- "$SKY_BIN/skyd"
	mkdir -p "$W/$_id"
	cp -r "$PKI/claim" "$W/$_id/claim"
	printf 'name = %s\nthreads = 1\n' "$_id" >"$W/$_id/profile.conf"
	_tok=$("$SKY" pki token --dir "$PKI" --ttl 600) || die "sky pki token failed"
	# shellcheck disable=SC2086 # SEQ_OPT is an option and its value, or nothing
	"$@" --enroll --claim "$_tok" --id "$_id" --pki-ca "$W/$_id/claim/ca.crt" \
		--state "$W/$_id/state" --broker "$BR" --profile "$W/$_id/profile.conf" --speed "$_speed" \
		--model "$MODEL" --layers "$LAYERS" $SEQ_OPT --keepalive 5 --probe-seconds 2 >"$W/$_id.log" 2>&1 &
	PIDS="$PIDS $!"
	N=$((N + 1))
	# one board probes at a time: probes run at once on a small machine
	# would share its cores and report each board slower than it is
	wait_for 120 _fleet_reported || die "board $_id did not report within 120 s: $(tail -3 "$W/$_id.log")"
}
