# A loopback fleet for the integration tests (POSIX sh; source it from the
# repository root, it sources broker.sh and lib.sh): a TLS mosquitto, skyplan
# and skyd boards, and the teardown that stops every one of them. Failures
# are PASS/FAIL lines named after the test (NAME below).
#
#   SKY                         the sky CLI ($SKY_BIN/sky)
#   SKY_FLEET_SKYD_OPTS         what every skyd gets after --state and
#                               --broker (default: --keepalive 2 --model tiny
#                               --layers 4 --probe-seconds 1)
#   sky_fleet_begin NAME        work dir $W (sky_test_workdir NAME),
#                               OPENBLAS_NUM_THREADS=1, `trap sky_fleet_end
#                               EXIT` (a test with more to stop sets its own
#                               EXIT trap that calls sky_fleet_end)
#   sky_fleet_broker            mosquitto in $W/broker (fail NAME_broker and
#                               exit 1 if it does not start); sets BR (its
#                               HOST:PORT), PKI, STATE (skyplan's state
#                               directory)
#   sky_fleet_planner [OPT...]  skyplan with OPTs, log appended to
#                               $W/skyplan.log, pid in PLAN_PID; returns 1 if
#                               it does not log that it serves within 30 s
#   sky_fleet_start [OPT...]    both (fail NAME_skyplan_starts and exit 1)
#   sky_fleet_skyd ID [OPT...]  skyd --state $W/ID/state --broker $BR
#                               $SKY_FLEET_SKYD_OPTS OPT..., run as $SKYD
#                               (default $SKY_BIN/skyd; a prefix such as a
#                               qemu command line may go in front), log
#                               appended to $W/ID.log, pid in PIDS and PID_ID
#   sky_fleet_enroll ID [OPT...]  the same, enrolling with a fresh one-time
#                               token and its own copy of the claim bundle
#                               ($W/ID/claim: the operator copies it onto
#                               the board, as a provisioning image would)
#   sky_fleet_boards COUNT [OPT...]  enrolls b1..bCOUNT (N=COUNT) and waits
#                               until skyplan has the caps of all N (or fails
#                               NAME_boards_report)
#   sky_fleet_reported          true when skyplan has the caps of exactly N
#                               boards
#   sky_fleet_json              `sky fleet status --json`
#   sky_fleet_field ID KEY[.KEY]  one field of board ID in it ("" if none;
#                               whole numbers printed as such)
#   sky_fleet_run_job NAME LAYERS SUBMIT-OPTION...  a training job on the
#                               N boards: `sky job watch NAME --json` (started
#                               first: metrics are not retained) to
#                               $W/NAME.watch, submit (fail NAME_submitted),
#                               wait for the watch to see the job end, collect
#                               to $W/NAME.safetensors (fail NAME_collect);
#                               returns the watch's exit code
#   sky_fleet_same_as_one_board NAME LAYERS TRAIN-OPTION...  `sky train` with
#                               the same settings; each step's loss in
#                               NAME.watch (4 decimals, what sky train
#                               prints) and the collected weights' bytes must
#                               equal its (NAME_per_step_losses_equal_sky_train,
#                               NAME_final_weights_bit_exact_with_sky_train)
#   sky_fleet_kill [PID...]     resumes (SIGCONT: a test may have stopped
#                               one) and stops PIDS, PLAN_PID and the PIDs,
#                               waits for them, and empties PIDS and PLAN_PID
#   sky_fleet_end [PID...]      sky_fleet_kill, stops mosquitto, and removes
#                               $W unless a test failed or SKY_KEEP is set
#
# Nothing here talks to anything but 127.0.0.1.

. tests/integration/broker.sh
. tests/integration/lib.sh

SKY="$SKY_BIN/sky"
SKY_FLEET_SKYD_OPTS=${SKY_FLEET_SKYD_OPTS:---keepalive 2 --model tiny --layers 4 --probe-seconds 1}
PIDS=""
PLAN_PID=""

sky_fleet_begin() {
	SKY_FLEET_NAME=$1
	sky_test_workdir "$1"
	export OPENBLAS_NUM_THREADS=1
	trap sky_fleet_end EXIT
}

sky_fleet_broker() {
	if ! sky_broker_start "$W/broker"; then
		fail "${SKY_FLEET_NAME}_broker" "mosquitto did not start"
		exit 1
	fi
	BR="127.0.0.1:$SKY_BROKER_PORT"
	PKI=$SKY_PKI_DIR
	STATE="$W/skyplan"
}

# (counts the "serving" lines, so that a restarted skyplan is waited for too)
_sky_fleet_serving() { [ "$(grep -c "serving: state" "$W/skyplan.log" 2>/dev/null)" -gt "$1" ]; }
sky_fleet_planner() {
	_sky_fleet_was=$(grep -c "serving: state" "$W/skyplan.log" 2>/dev/null)
	"$SKY_BIN/skyplan" --pki "$PKI" --broker "$BR" --state "$STATE" "$@" >>"$W/skyplan.log" 2>&1 &
	PLAN_PID=$!
	sky_wait 30 _sky_fleet_serving "${_sky_fleet_was:-0}"
}

sky_fleet_start() {
	sky_fleet_broker
	sky_fleet_planner "$@" || {
		fail "${SKY_FLEET_NAME}_skyplan_starts" "$(tail -3 "$W/skyplan.log")"
		exit 1
	}
}

sky_fleet_skyd() {
	_sky_fleet_id=$1
	shift
	mkdir -p "$W/$_sky_fleet_id"
	# shellcheck disable=SC2086 # SKYD and SKY_FLEET_SKYD_OPTS are word lists
	${SKYD:-"$SKY_BIN/skyd"} --state "$W/$_sky_fleet_id/state" --broker "$BR" $SKY_FLEET_SKYD_OPTS \
		"$@" >>"$W/$_sky_fleet_id.log" 2>&1 &
	PIDS="$PIDS $!"
	eval "PID_$_sky_fleet_id=\$!"
}

sky_fleet_enroll() {
	_sky_fleet_b=$1
	shift
	mkdir -p "$W/$_sky_fleet_b"
	cp -r "$PKI/claim" "$W/$_sky_fleet_b/claim"
	_sky_fleet_tok=$("$SKY" pki token --dir "$PKI" --ttl 300) ||
		fail "${SKY_FLEET_NAME}_token" "sky pki token failed"
	sky_fleet_skyd "$_sky_fleet_b" --enroll --claim "$_sky_fleet_tok" --id "$_sky_fleet_b" \
		--pki-ca "$W/$_sky_fleet_b/claim/ca.crt" "$@"
}

sky_fleet_json() { "$SKY" fleet status --state "$STATE" --json 2>/dev/null; }
sky_fleet_reported() { [ "$(sky_fleet_json | grep -o '"caps":{' | wc -l)" -eq "${N:-0}" ]; }

sky_fleet_boards() {
	N=$1
	shift
	_sky_fleet_i=1
	while [ "$_sky_fleet_i" -le "$N" ]; do
		sky_fleet_enroll "b$_sky_fleet_i" "$@"
		_sky_fleet_i=$((_sky_fleet_i + 1))
	done
	sky_wait 60 sky_fleet_reported ||
		fail "${SKY_FLEET_NAME}_boards_report" "not all $N boards reported: $(sky_fleet_json | head -c 300)"
}

sky_fleet_field() {
	sky_fleet_json | python3 -c '
import json, sys
d = json.loads(sys.stdin.readline())
for b in d["boards"]:
    if b["id"] == sys.argv[1]:
        v = b
        for k in sys.argv[2].split("."):
            v = v.get(k) if isinstance(v, dict) else None
        print("" if v is None else (int(v) if isinstance(v, float) and v.is_integer() else v))' "$1" "$2" 2>/dev/null
}

sky_fleet_run_job() {
	_sky_fleet_job=$1
	_sky_fleet_layers=$2
	shift 2
	"$SKY" job watch "$_sky_fleet_job" --pki "$PKI" --broker "$BR" --timeout 120 --json \
		>"$W/$_sky_fleet_job.watch" 2>"$W/$_sky_fleet_job.watch.err" &
	_sky_fleet_wpid=$!
	sleep 0.5 # the watch subscribes before the job can start
	"$SKY" job submit --pki "$PKI" --broker "$BR" --model tiny --layers "$_sky_fleet_layers" \
		--job "$_sky_fleet_job" --min-boards "$N" --task train --wait 30 "$@" >"$W/$_sky_fleet_job.submit" 2>&1 ||
		fail "${_sky_fleet_job}_submitted" "$(cat "$W/$_sky_fleet_job.submit")"
	wait $_sky_fleet_wpid
	_sky_fleet_wrc=$?
	"$SKY" job collect "$_sky_fleet_job" --pki "$PKI" --broker "$BR" --out "$W/$_sky_fleet_job.safetensors" \
		--timeout 30 >"$W/$_sky_fleet_job.collect" 2>&1 ||
		fail "${_sky_fleet_job}_collect" "$(cat "$W/$_sky_fleet_job.collect")"
	return $_sky_fleet_wrc
}

sky_fleet_same_as_one_board() {
	_sky_fleet_job=$1
	_sky_fleet_layers=$2
	shift 2
	_sky_fleet_f="$W/$_sky_fleet_job"
	"$SKY" train --model tiny --layers "$_sky_fleet_layers" --eval 4 --save "$_sky_fleet_f.ref.safetensors" "$@" \
		>"$_sky_fleet_f.ref" 2>&1 || fail "${_sky_fleet_job}_sky_train" "$(tail -2 "$_sky_fleet_f.ref")"
	sed -n 's/^step \([0-9]*\) loss \([0-9.]*\) .*/\1 \2/p' "$_sky_fleet_f.ref" >"$_sky_fleet_f.ref.loss"
	sed -n 's/.*"step":\([0-9]*\),"loss":\([-0-9.e]*\),.*/\1 \2/p' "$_sky_fleet_f.watch" |
		awk '{printf "%d %.4f\n", $1, $2}' >"$_sky_fleet_f.fleet.loss"
	if [ -s "$_sky_fleet_f.ref.loss" ] && cmp -s "$_sky_fleet_f.ref.loss" "$_sky_fleet_f.fleet.loss"; then
		pass "${_sky_fleet_job}_per_step_losses_equal_sky_train"
	else
		fail "${_sky_fleet_job}_per_step_losses_equal_sky_train" \
			"one board: $(tr '\n' ' ' <"$_sky_fleet_f.ref.loss"); fleet: $(tr '\n' ' ' <"$_sky_fleet_f.fleet.loss")"
	fi
	if cmp -s "$_sky_fleet_f.safetensors" "$_sky_fleet_f.ref.safetensors"; then
		pass "${_sky_fleet_job}_final_weights_bit_exact_with_sky_train"
	else
		fail "${_sky_fleet_job}_final_weights_bit_exact_with_sky_train" \
			"$(cmp "$_sky_fleet_f.safetensors" "$_sky_fleet_f.ref.safetensors" 2>&1 | head -1)"
	fi
}

sky_fleet_kill() {
	for _sky_fleet_p in $PIDS $PLAN_PID "$@"; do
		kill -CONT "$_sky_fleet_p" 2>/dev/null
		kill "$_sky_fleet_p" 2>/dev/null
	done
	for _sky_fleet_p in $PIDS $PLAN_PID "$@"; do wait "$_sky_fleet_p" 2>/dev/null; done
	PIDS=""
	PLAN_PID=""
}

sky_fleet_end() {
	sky_fleet_kill "$@"
	sky_broker_stop
	if [ "$fails" -eq 0 ] && [ -z "${SKY_KEEP:-}" ]; then rm -rf "$W"; else echo "(logs kept in $W)"; fi
}
