#!/bin/sh
# Jobs belong to their operator, against a real mosquitto on loopback with
# skyplan and two skyd boards as separate processes. Operator A is the
# PKI's default operator (sky-operator), operator B a second one from
# `sky pki operator --name bob` (sky-op-bob):
#   - A trains job ja; `sky job watch ja` started after it ended prints its
#     last state and exits 0 (skyplan relays it retained);
#   - B's submit of job id ja is refused with the reason;
#   - B reads nothing of A's job: mosquitto_sub with B's certificate on A's
#     relayed parts and on the job's own part topics gets no message (A's
#     gets both parts), and `sky job collect ja` as B fails with why;
#   - B floods submits (its quota of waiting jobs refuses the rest with the
#     reason) and upload chunks (its upload slots refuse the rest), and A's
#     submit meanwhile is still acknowledged;
#   - A's long job keeps B's job off its boards (they are busy);
#   - `sky job cancel` by B is refused with the reason; by A it cancels, and
#     A's watch of the cancelled job prints that and exits; the boards that
#     were training it stop, and take a new job.
# Prints PASS/FAIL lines; nothing asserts on elapsed time.
set -u
cd "$(dirname "$0")/../.."
. tests/integration/fleet.sh

sky_fleet_begin adversary_ops
sky_fleet_start --max-pending-per-operator 2 --max-uploads-per-operator 2
BLOG=$SKY_BROKER_LOG
if ! "$SKY" pki operator --dir "$PKI" --name bob >"$W/bob.out" 2>&1; then
	fail adversary_ops_second_operator "$(cat "$W/bob.out")"
	exit 1
fi
kill -HUP "$SKY_BROKER_PID" # mosquitto reads the ACL again
sky_wait 10 grep -q "Reloading config" "$BLOG"
BOB="$PKI/operators/bob"
sky_fleet_boards 2

# ---- A trains ja; a watch after its end prints the last state ----------------
sky_fleet_run_job ja 4 --algo even --steps 2 --micro 2 --seed 3
WRC=$?
[ $WRC -eq 0 ] && [ -s "$W/ja.safetensors" ] && pass a_trains_watches_and_collects_its_job ||
	fail a_trains_watches_and_collects_its_job "watch rc $WRC: $(tail -2 "$W/ja.watch.err") $(cat "$W/ja.collect")"
timeout 60 "$SKY" job watch ja --pki "$PKI" --broker "$BR" --timeout 30 >"$W/ja.rewatch" 2>&1
RC=$?
[ $RC -eq 0 ] && grep -q "job ja ended: done at step 2" "$W/ja.rewatch" &&
	pass watch_of_an_ended_job_prints_its_last_state_and_exits ||
	fail watch_of_an_ended_job_prints_its_last_state_and_exits "rc $RC: $(cat "$W/ja.rewatch")"

# ---- B tries A's job id ---------------------------------------------------------
"$SKY" job submit --pki "$BOB" --broker "$BR" --model tiny --layers 4 --job ja --min-boards 2 \
	--task train --steps 2 --ack-timeout 30 >"$W/bja.out" 2>"$W/bja.err"
RC=$?
[ $RC -ne 0 ] && grep -q "job ja refused by the planner: job ja belongs to another operator" "$W/bja.err" &&
	pass another_operators_job_id_is_refused_with_the_reason ||
	fail another_operators_job_id_is_refused_with_the_reason "rc $RC: $(cat "$W/bja.err")"

# ---- B reads nothing of A's job ----------------------------------------------------
# each subscriber takes what is retained for a few seconds (-W), then leaves
sub() { # cert key topic...
	_c=$1
	_k=$2
	shift 2
	_t=""
	for _x in "$@"; do _t="$_t -t $_x"; done
	# shellcheck disable=SC2046,SC2086 # word lists
	timeout 20 mosquitto_sub $(sky_mq_claim_tls "$_c" "$_k") -W 3 -F '%t' $_t 2>/dev/null
}
sub "$PKI/operator.crt" "$PKI/operator.key" 'sky/v1/jobs/sky-operator/job/ja/part/+' >"$W/a.parts"
sub "$BOB/operator.crt" "$BOB/operator.key" 'sky/v1/jobs/sky-operator/job/ja/part/+' \
	'sky/v1/jobs/sky-operator/#' 'sky/v1/job/ja/part/+' 'sky/v1/job/+/metrics' >"$W/b.parts"
NA=$(grep -c . "$W/a.parts")
NB=$(grep -c . "$W/b.parts")
[ "$NA" -eq 2 ] && [ "$NB" -eq 0 ] && pass another_operator_reads_none_of_the_jobs_parts ||
	fail another_operator_reads_none_of_the_jobs_parts "owner got $NA parts (2 wanted), other got $NB: $(head -3 "$W/b.parts")"
"$SKY" job collect ja --pki "$BOB" --broker "$BR" --out "$W/bob.safetensors" --timeout 5 >"$W/bc.out" 2>&1
RC=$?
[ $RC -ne 0 ] && [ ! -s "$W/bob.safetensors" ] &&
	grep -q "relays a job's parts only to the operator that submitted it" "$W/bc.out" &&
	pass another_operators_collect_fails_with_the_reason ||
	fail another_operators_collect_fails_with_the_reason "rc $RC: $(cat "$W/bc.out")"

# ---- B floods submits and uploads; A's submit is still acknowledged -----------------
# B's jobs wait for 5 boards (there are 2): its quota of 2 waiting jobs fills
for i in 1 2 3 4 5 6; do
	"$SKY" job submit --pki "$BOB" --broker "$BR" --model tiny --layers 4 --job "bf$i" --min-boards 5 \
		--wait-boards-s 600 --ack-timeout 30 >"$W/bf$i.out" 2>"$W/bf$i.err" &
	FLOOD="${FLOOD:-} $!"
done
# chunk 0 of 20 models (2 chunks each), each a new upload
python3 - "$W/chunks" <<'EOF'
import hashlib, os, struct, sys
os.makedirs(sys.argv[1], exist_ok=True)
for k in range(20):
    payload = os.urandom(1024)
    head = b"SKYC" + bytes([1, 1, 0, 0]) + struct.pack("<IIIIQ", 0, 2, 1024, 1024, 2048)
    head += hashlib.sha256(os.urandom(64)).digest() + hashlib.sha256(payload).digest()
    open(os.path.join(sys.argv[1], "c%02d" % k), "wb").write(head + payload)
EOF
for f in "$W"/chunks/c*; do
	# shellcheck disable=SC2046 # a word list
	timeout 20 mosquitto_pub $(sky_mq_claim_tls "$BOB/operator.crt" "$BOB/operator.key") -q 1 \
		-t sky/v1/jobs/sky-op-bob/weights -f "$f" &
	FLOOD="$FLOOD $!"
done
"$SKY" job submit --pki "$PKI" --broker "$BR" --model tiny --layers 4 --job jq --min-boards 5 \
	--wait-boards-s 600 --ack-timeout 60 >"$W/jq.out" 2>"$W/jq.err"
RC=$?
for p in $FLOOD; do wait "$p" 2>/dev/null; done
ACKED=$(grep -l "acknowledged by the planner" "$W"/bf*.err 2>/dev/null | wc -l)
REFUSED=$(grep -l "operator sky-op-bob has 2 jobs waiting for boards (its limit is 2)" "$W"/bf*.err 2>/dev/null | wc -l)
UPREF=$(grep -c "operator sky-op-bob has 2 model uploads in progress (its limit is 2)" "$W/skyplan.log")
[ $RC -eq 0 ] && grep -q "job jq acknowledged by the planner" "$W/jq.err" &&
	pass submit_is_acknowledged_while_another_operator_floods ||
	fail submit_is_acknowledged_while_another_operator_floods "rc $RC: $(cat "$W/jq.err")"
[ "$ACKED" -eq 2 ] && [ "$REFUSED" -eq 4 ] && [ "$UPREF" -ge 1 ] &&
	pass flooding_operator_is_held_to_its_quotas_with_the_reason ||
	fail flooding_operator_is_held_to_its_quotas_with_the_reason "$ACKED acked, $REFUSED refused, $UPREF upload refusals"
# A's own quota is A's: B's two waiting jobs did not count against it
"$SKY" job cancel --job jq --pki "$PKI" --broker "$BR" >"$W/cq.out" 2>&1 ||
	fail cancel_queued_job "$(cat "$W/cq.out")"
for i in 1 2 3 4 5 6; do
	"$SKY" job cancel --job "bf$i" --pki "$BOB" --broker "$BR" >/dev/null 2>&1
done

# ---- a board busy with A's job is not taken by B's --------------------------------
"$SKY" job submit --pki "$PKI" --broker "$BR" --model tiny --layers 4 --job jl --min-boards 2 \
	--algo even --task train --steps 100000 --micro 2 --wait 30 >"$W/jl.out" 2>&1 ||
	fail long_job_submitted "$(cat "$W/jl.out")"
"$SKY" job submit --pki "$BOB" --broker "$BR" --model tiny --layers 4 --job jb --min-boards 1 \
	--wait-boards-s 3 --task train --steps 2 --ack-timeout 30 >"$W/jb.out" 2>&1
sky_wait 30 grep -q "job jb dropped" "$W/skyplan.log"
grep -q "job jb dropped: 2 online boards are busy with another operator's job" "$W/skyplan.log" &&
	pass a_board_busy_with_another_operators_job_is_not_taken ||
	fail a_board_busy_with_another_operators_job_is_not_taken "$(grep "jb" "$W/skyplan.log" | tail -3)"

# ---- cancel: refused for B, done for A --------------------------------------------
"$SKY" job cancel --job jl --pki "$BOB" --broker "$BR" >"$W/bcancel.out" 2>&1
RC=$?
[ $RC -eq 1 ] && grep -q "job jl refused by the planner: job jl belongs to another operator" "$W/bcancel.out" &&
	pass cancel_by_another_operator_is_refused_with_the_reason ||
	fail cancel_by_another_operator_is_refused_with_the_reason "rc $RC: $(cat "$W/bcancel.out")"
"$SKY" job cancel --job jl --pki "$PKI" --broker "$BR" >"$W/acancel.out" 2>&1
RC=$?
timeout 60 "$SKY" job watch jl --pki "$PKI" --broker "$BR" --timeout 30 >"$W/jl.watch" 2>&1
WRC=$?
[ $RC -eq 0 ] && grep -q "job jl cancelled" "$W/acancel.out" &&
	grep -q "job jl .* cancelled by operator sky-operator" "$W/skyplan.log" &&
	[ $WRC -eq 1 ] && grep -q "job jl ended: cancelled" "$W/jl.watch" &&
	pass cancel_by_the_owner_stops_the_job ||
	fail cancel_by_the_owner_stops_the_job "rc $RC watch rc $WRC: $(cat "$W/acancel.out" "$W/jl.watch")"
# the boards that were training jl stop it (the planner's stop command on
# each board's command topic) and are free: a new job runs on them
stopped() { [ "$(grep -l "job jl epoch [0-9]* stopped at step [0-9]*: cancelled by the planner" "$W"/b1.log "$W"/b2.log | wc -l)" -eq 2 ]; }
sky_wait 30 stopped && grep -q "job jl .* cancelled by operator sky-operator.*; its boards told to stop" "$W/skyplan.log" &&
	pass cancelled_training_job_stops_on_its_boards ||
	fail cancelled_training_job_stops_on_its_boards "$(grep -h "jl" "$W"/b1.log "$W"/b2.log | tail -4)"
grep -h "cancelled by the planner" "$W"/b1.log "$W"/b2.log | sed 's/^/   log: /' | cut -c1-160
sky_fleet_run_job jn 4 --algo even --steps 2 --micro 2 --seed 3
WRC=$?
[ $WRC -eq 0 ] && [ -s "$W/jn.safetensors" ] && pass boards_of_a_cancelled_job_take_a_new_job ||
	fail boards_of_a_cancelled_job_take_a_new_job "watch rc $WRC: $(tail -2 "$W/jn.watch.err") $(grep -h "jn" "$W"/b1.log | tail -2)"

exit $((fails > 0))
