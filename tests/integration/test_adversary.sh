#!/bin/sh
# One valid identity against the jobs of others, over a real broker with
# separate processes: bx, a board enrolled in the fleet (its own certificate
# from the fleet's CA) that holds no stage of any job (and by, another such
# board, for the answers), publishes with
# mosquitto_pub everything the ACL lets a board publish under its own id:
#   - a training job (3 boards, checkpoints every 2 steps): junk on a stage's
#     fwd topic and a forged ready (retained, so each stage gets them when it
#     subscribes, before any real frame), a full checkpoint image of every
#     block at the next steps and one at step 2^53-1, and metrics saying
#     every stage is done (a frame is never retained: skyd drops the junk
#     as a retained copy before its transport sees it);
#   - a serving job (the same 3 boards): answers to the client's requests
#     with made-up logits, a forged ready of its first stage and a forged
#     "done" report to the first stage.
# Then bw, a board that holds the stage of another live job's signed plan
# (sb, another operator's), sends with its certificate the same attacks on
# the serving job and on a training job jm: refused as from outside those
# plans (being in another job's plan gives nothing) and counted.
# The victims are unaffected: the training job's per-step losses and final
# weights equal `sky train`'s byte for byte; every client request is
# answered once, with `sky eval --precision int8`'s logits. Every refusal is
# counted with its reason: skyplan's in `sky fleet status` ("refused:"),
# jobs.json and Prometheus (sky_job_messages_refused_total{job,reason}); the
# boards' in their drop counters ("sender"); the client's in `sky infer`.
set -u
cd "$(dirname "$0")/../.."
. tests/integration/fleet.sh
. tests/integration/serve_lib.sh
sky_fleet_begin adversary
# boards tracked by pid file (sky_serve_board) are stopped on any exit
_adv_end() {
	for _f in "$W"/pid.*; do
		[ -f "$_f" ] && kill "$(cat "$_f")" 2>/dev/null
	done
	sky_fleet_end
}
trap _adv_end EXIT
if ! command -v curl >/dev/null 2>&1; then
	fail adversary_curl "curl is not installed (tools/install-deps.sh)"
	exit 1
fi

sky_serve_model adversary 4 || exit 1
sky_fleet_broker
"$SKY" pki client --dir "$PKI" t >"$W/client.out" 2>&1 || { fail adversary_client "$(cat "$W/client.out")"; exit 1; }
kill -HUP "$SKY_BROKER_PID" # mosquitto reads the ACL with the client's lines
MPORT=$(_sky_free_port)
sky_fleet_planner --metrics "127.0.0.1:$MPORT" ||
	{ fail adversary_skyplan_starts "$(tail -3 "$W/skyplan.log")"; exit 1; }
N=3
for b in b1 b2 b3; do
	"$SKY" pki issue --dir "$PKI" --id "$b" --state "$W/$b/state" >/dev/null 2>"$W/$b.issue" ||
		{ fail adversary_board_issued "$(cat "$W/$b.issue")"; exit 1; }
	sky_serve_board "$b"
done
sky_wait 120 sh -c "[ \$('$SKY' fleet status --state '$STATE' --json | grep -o '\"state\":\"online\"' | wc -l) -ge 3 ]" ||
	{ fail adversary_boards_online "$(sky_serve_online) of 3 online"; exit 1; }
for b in bx by; do
	"$SKY" pki issue --dir "$PKI" --id $b --state "$W/$b" >/dev/null 2>"$W/$b.issue" ||
		{ fail adversary_outsider_issued "$(cat "$W/$b.issue")"; exit 1; }
done
# shellcheck disable=SC2046
bx() { timeout 20 mosquitto_pub $(sky_mq_tls "$W/bx/board.crt" "$W/bx/board.key") -q 1 "$@" 2>>"$W/bx.err"; }

# refusals skyplan counted for JOB, by REASON: at least MIN in sky fleet status
refused() { # JOB REASON MIN
	_n=$("$SKY" fleet status --state "$STATE" 2>/dev/null | sed -n "/^job $1 /,/^job /p" |
		sed -n "s/.*refused:.* $2 \([0-9]*\).*/\1/p" | head -1)
	[ "${_n:-0}" -ge "$3" ]
}
# drops a board of JOB counted as REASON (its metrics, in sky fleet status)
dropped() { # JOB REASON
	"$SKY" fleet status --state "$STATE" 2>/dev/null | sed -n "/^job $1 /,/^job /p" |
		grep -q "dropped:.* $2 [1-9]"
}
prom() { # JOB REASON: its sky_job_messages_refused_total is at least 1
	curl -s "http://127.0.0.1:$MPORT/metrics" |
		grep -q "^sky_job_messages_refused_total{job=\"$1\",reason=\"$2\"} [1-9]"
}

# ---- a training job -------------------------------------------------------------
J=jv
# junk on stage 1's forward topic and a forged ready of stage 0, retained:
# every stage gets them the moment it subscribes
# (the ready under its kind's 1 KiB limit, so that it reaches the stages'
# sender check; the frame is dropped as a retained copy, which frames never are)
head -c 4096 /dev/urandom >"$W/junk"
head -c 512 /dev/urandom >"$W/junk-ready"
bx -r -t "sky/v1/job/$J/stage/1/fwd/bx" -f "$W/junk"
bx -r -t "sky/v1/job/$J/stage/0/ready/bx" -f "$W/junk-ready"
# a checkpoint image holding every block (0..2L+1 = 0..9) at step S, its
# tensors zero: were it committed, the job would go on from it
forge_ckpt() { # STEP OUT
	python3 - "$1" "$2" "$J" <<'EOF'
import json, struct, sys
step, out, job = int(sys.argv[1]), sys.argv[2], sys.argv[3]
data = b"\0" * 16
meta = {"format": "sky-ckpt", "sky_job": job, "sky_epoch": "1", "sky_step": str(step),
        "sky_blk0": "0", "sky_nblk": "10", "sky_nvec": "2", "sky_sha256": "0" * 64}
hdr = {"__metadata__": meta}
for b in range(10):
    hdr["p.%d" % b] = {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}
h = json.dumps(hdr).encode()
h += b" " * (-len(h) % 8)
open(out, "wb").write(struct.pack("<Q", len(h)) + h + data)
EOF
}
# while the job runs: checkpoints of the next steps, and metrics claiming
# every stage is done (with a payload naming the stage boards)
attack_train() {
	_i=0
	while [ ! -f "$W/$J.over" ] && [ $_i -lt 300 ]; do
		_i=$((_i + 1))
		# junk on stage 1's forward topic as the job runs (not retained)
		bx -t "sky/v1/job/$J/stage/1/fwd/bx" -f "$W/junk"
		forge_ckpt $((2 * (_i % 6) + 2)) "$W/forged.ckpt"
		bx -t "sky/v1/job/$J/ckpt/bx" -f "$W/forged.ckpt"
		# and one at step 2^53-1, the largest step JSON carries exactly
		forge_ckpt 9007199254740991 "$W/forged-max.ckpt"
		bx -t "sky/v1/job/$J/ckpt/bx" -f "$W/forged-max.ckpt"
		for k in 0 1 2; do
			bx -t "sky/v1/job/$J/metrics/bx" \
				-m "{\"v\":1,\"stage\":$k,\"board\":\"b$((k + 1))\",\"epoch\":1,\"step\":12,\"steps\":12,\"done\":true}"
		done
		sleep 0.2
	done
}
attack_train &
APID=$!
PIDS="$PIDS $APID"
sky_fleet_run_job $J 4 --algo even --sched 1f1b --steps 12 --micro 2 --optimizer adamw --seed 5 \
	--checkpoint-every 2
wrc=$?
touch "$W/$J.over"
wait $APID 2>/dev/null
[ $wrc -eq 0 ] && pass adversary_training_job_ends || fail adversary_training_job_ends "watch rc $wrc: $(tail -3 "$W/$J.watch.err")"
sky_fleet_same_as_one_board $J 4 --steps 12 --micro 2 --optim adamw --seed 5
sky_wait 15 refused $J metrics_not_stage 1 && prom $J metrics_not_stage &&
	pass adversary_forged_done_metrics_refused_and_counted ||
	fail adversary_forged_done_metrics_refused_and_counted "$("$SKY" fleet status --state "$STATE" | grep -A6 "^job $J ")"
sky_wait 15 refused $J ckpt_not_holder 1 && prom $J ckpt_not_holder &&
	grep -q "job $J: checkpoint image (no stage of the plan) from bx refused (ckpt_not_holder)" "$W/skyplan.log" &&
	! grep -q "checkpoint part from bx" "$W/skyplan.log" &&
	pass adversary_forged_checkpoint_refused_before_hashing_and_counted ||
	fail adversary_forged_checkpoint_refused_before_hashing_and_counted "$(grep "bx" "$W/skyplan.log" | tail -3)"
# the boards: bx's ready (and its live junk frames) dropped on the sender level
sky_wait 15 dropped $J sender && pass adversary_junk_frame_and_forged_ready_dropped_as_sender ||
	fail adversary_junk_frame_and_forged_ready_dropped_as_sender "$("$SKY" fleet status --state "$STATE" | grep -A6 "^job $J ")"
# the refusal lines are throttled: one per reason per 10 s window
lines=$(grep -c "refused (metrics_not_stage)" "$W/skyplan.log")
echo "MEASURE adversary_metrics_refusal_log_lines $lines"
[ "$lines" -ge 1 ] && [ "$lines" -le 30 ] && pass adversary_refusals_logged_throttled ||
	fail adversary_refusals_logged_throttled "$lines lines"
# the retained junk frame never reached the stage's transport: a frame is
# never retained, so skyd drops a retained copy when it arrives
grep -q "retained message on sky/v1/job/$J/stage/1/fwd/bx (4096 bytes) dropped: that kind of message is never retained" "$W"/b*.log &&
	pass adversary_retained_junk_frame_dropped_as_retained ||
	fail adversary_retained_junk_frame_dropped_as_retained "$(grep -h "retained" "$W"/b*.log | head -3)"
bx -r -n -t "sky/v1/job/$J/stage/1/fwd/bx" # bx clears its retained junk
bx -r -n -t "sky/v1/job/$J/stage/0/ready/bx"

# ---- a serving job ---------------------------------------------------------------
JOB=sv
"$SKY" job submit --pki "$PKI" --broker "$BR" --job $JOB --min-boards 3 --task infer \
	--weights "$W/q.safetensors" --algo even --clients sky-client-t --wait 120 >"$W/sv.submit" 2>&1 ||
	{ fail adversary_serving_submitted "$(tail -3 "$W/sv.submit" "$W/skyplan.log")"; exit 1; }
first=""
sky_wait 120 sh -c "grep -q 'job $JOB: every stage is ready' '$W'/b*.log" ||
	fail adversary_serving_ready "$(grep "$JOB" "$W"/b*.log | tail -3)"
first=$(sky_serve_stage_board 0)
# answers to the client's requests (ids c<k>-<row>), a ready for stage 0
# and done reports to the first stage, all from bx
fake() { printf '{"v":1,"id":"c%s-%s","ok":true,"job":"%s","epoch":1,"logits":[0.25,-0.5]}\n' "$1" "$2" $JOB; }
attack_serve() {
	_i=0
	while [ ! -f "$W/$JOB.over" ] && [ $_i -lt 300 ]; do
		_i=$((_i + 1))
		bx -t "sky/v1/job/$JOB/stage/0/ready/bx" -m '{"epoch":1,"board":"bx"}'
		bx -t "sky/v1/job/$JOB/stage/0/done/bx" -m "{\"epoch\":1,\"batch\":$_i,\"n\":4}"
		sleep 0.2
	done
}
# the answers stream on one connection, every 20 ms, so that every
# client hears some while it waits for its own
answers() {
	_i=0
	while [ ! -f "$W/$JOB.over" ] && [ $_i -lt 3000 ]; do
		_i=$((_i + 1))
		fake $((_i % 6 + 1)) $((_i % 4))
		sleep 0.02
	done
}
attack_serve &
APID=$!
# (as by, a second outsider: a second connection of bx's would close the first)
# shellcheck disable=SC2046
answers | timeout 120 mosquitto_pub $(sky_mq_tls "$W/by/board.crt" "$W/by/board.key") -q 1 \
	-t "sky/v1/job/$JOB/resp/sky-client-t/by" -l 2>>"$W/by.err" &
RPID=$!
PIDS="$PIDS $APID $RPID"
sleep 1 # the stream has begun
N=0 # sky_serve_ask counts its clients in N
for k in 1 2 3 4 5 6; do
	sky_serve_ask
	sleep 0.3
done
sky_serve_check adversary 0 6
touch "$W/$JOB.over"
wait $APID $RPID 2>/dev/null
refused_by_client=0
for k in 1 2 3 4 5 6; do
	grep -q "response(s) from a sender the job's plan does not allow dropped" "$W/out/$k.err" &&
		refused_by_client=$((refused_by_client + 1))
done
echo "MEASURE adversary_clients_that_dropped_forged_answers $refused_by_client of 6"
[ $refused_by_client -ge 1 ] && pass adversary_client_drops_answers_from_outside_the_plan ||
	fail adversary_client_drops_answers_from_outside_the_plan "$(cat "$W"/out/*.err | head -c 300)"
sky_wait 15 refused $JOB answer_not_stage 1 && prom $JOB answer_not_stage &&
	pass adversary_forged_answers_refused_by_the_planner_and_counted ||
	fail adversary_forged_answers_refused_by_the_planner_and_counted "$("$SKY" fleet status --state "$STATE" | grep -A6 "^job $JOB ")"
sky_wait 15 refused $JOB ready_not_stage 1 && prom $JOB ready_not_stage &&
	pass adversary_forged_ready_refused_by_the_planner_and_counted ||
	fail adversary_forged_ready_refused_by_the_planner_and_counted "$("$SKY" fleet status --state "$STATE" | grep -A6 "^job $JOB ")"
sky_wait 15 dropped $JOB sender && pass adversary_forged_ready_and_done_dropped_by_the_first_stage ||
	fail adversary_forged_ready_and_done_dropped_by_the_first_stage "$("$SKY" fleet status --state "$STATE" | grep -A6 "^job $JOB ")"

# ---- a board of another live job ---------------------------------------------------
# bw is enrolled and holds stage 0 of job sb's signed plan (a serving job of
# its own and another operator's, on bw alone: b1..b3 serve sv). Its skyd is then stopped (a
# connection with its certificate would close skyd's, the client id being
# the CN), so its membership of sb's plan stays: sb is live and not
# re-planned (no idle board). With bw's certificate: metrics saying every
# stage of sv is done, a checkpoint image for sv, answers on sv's resp topic
# and a ready on sv's stage topic. Each is refused as from outside sv's plan
# (being in another job's plan gives nothing), counted, and sv goes on
# answering with sky eval's logits.
count() { # JOB REASON: skyplan's count of refusals (0 if none)
	_n=$("$SKY" fleet status --state "$STATE" 2>/dev/null | sed -n "/^job $1 /,/^job /p" |
		sed -n "s/.*refused:.* $2 \([0-9]*\).*/\1/p" | head -1)
	echo "${_n:-0}"
}
"$SKY" pki issue --dir "$PKI" --id bw --state "$W/bw/state" >/dev/null 2>"$W/bw.issue" ||
	{ fail adversary_member_issued "$(cat "$W/bw.issue")"; exit 1; }
sky_serve_board bw
sky_wait 60 sh -c "[ \$('$SKY' fleet status --state '$STATE' --json | grep -o '\"state\":\"online\"' | wc -l) -ge 4 ]" ||
	fail adversary_member_online "$(sky_serve_online) of 4 online"
# sb is another operator's (bob's), so that its plan takes bw alone: b1..b3
# are busy with sv, a job of another operator
"$SKY" pki operator --dir "$PKI" --name bob >"$W/bob.out" 2>&1 ||
	fail adversary_member_operator "$(cat "$W/bob.out")"
kill -HUP "$SKY_BROKER_PID" # mosquitto reads the ACL with bob's lines
sleep 1
"$SKY" job submit --pki "$PKI/operators/bob" --broker "$BR" --job sb --min-boards 1 --task infer \
	--weights "$W/q.safetensors" --algo even --clients sky-client-t --wait 60 >"$W/sb.submit" 2>&1 ||
	fail adversary_member_job_submitted "$(tail -3 "$W/sb.submit" "$W/skyplan.log")"
sky_wait 60 grep -q "job sb: every stage is ready" "$W/bw.log" ||
	fail adversary_member_job_ready "$(grep "sb" "$W/bw.log" | tail -3)"
kill "$(cat "$W/pid.bw")" 2>/dev/null
sky_wait 20 sh -c "! kill -0 $(cat "$W/pid.bw") 2>/dev/null"
rm -f "$W/pid.bw"
# bw is verifiably in sb's signed plan (its skyd accepted stage 0 of it),
# and skyplan keeps sb paused on it (no re-plan: b1..b3 are busy)
grep -q "plan sb epoch [0-9]* accepted: stage 0 of" "$W/bw.log" &&
	grep -q "job sb paused: board bw (stage 0) offline" "$W/skyplan.log" &&
	pass adversary_member_is_in_another_live_jobs_plan ||
	fail adversary_member_is_in_another_live_jobs_plan "$(grep "plan sb" "$W/bw.log"; "$SKY" fleet status --state "$STATE" | grep "^job")"
# shellcheck disable=SC2046
bw() { timeout 20 mosquitto_pub $(sky_mq_tls "$W/bw/state/board.crt" "$W/bw/state/board.key") -q 1 "$@" 2>>"$W/bw.err"; }
m0=$(count $JOB metrics_not_stage) c0=$(count $JOB ckpt_not_holder)
a0=$(count $JOB answer_not_stage) r0=$(count $JOB ready_not_stage)
J=$JOB # forge_ckpt names job J in the image
forge_ckpt 2 "$W/forged-sv.ckpt"
attack_member() { # one connection at a time: bw's would close each other
	_i=0
	while [ ! -f "$W/$JOB.member.over" ] && [ $_i -lt 100 ]; do
		_i=$((_i + 1))
		for k in 0 1 2; do
			bw -t "sky/v1/job/$JOB/metrics/bw" \
				-m "{\"v\":1,\"stage\":$k,\"board\":\"b$((k + 1))\",\"epoch\":1,\"step\":1,\"steps\":1,\"done\":true}"
		done
		bw -t "sky/v1/job/$JOB/ckpt/bw" -f "$W/forged-sv.ckpt"
		bw -t "sky/v1/job/$JOB/stage/0/ready/bw" -m '{"epoch":1,"board":"bw"}'
		for r in 0 1 2 3; do fake $((7 + _i % 2)) $r; done |
			bw -t "sky/v1/job/$JOB/resp/sky-client-t/bw" -l
		sleep 0.2
	done
}
attack_member &
APID=$!
PIDS="$PIDS $APID"
sleep 1
for k in 7 8; do
	sky_serve_ask
	sleep 0.3
done
sky_serve_check adversary_member 6 8
touch "$W/$JOB.member.over"
wait $APID 2>/dev/null
for rs in "metrics_not_stage $m0" "ckpt_not_holder $c0" "answer_not_stage $a0" "ready_not_stage $r0"; do
	set -- $rs
	sky_wait 15 refused $JOB "$1" $(($2 + 1)) &&
		pass "adversary_member_of_another_job_${1}_refused_and_counted" ||
		fail "adversary_member_of_another_job_${1}_refused_and_counted" "was $2, now $(count $JOB "$1")"
done
# (ckpt_not_holder is the sender check's reason, taken before any hash;
# its log line may be one of the throttled ones, so the count is the check)

# ---- the same board against a training job ----------------------------------------
# jm trains on b1..b3 (the operator's own job: it takes them from sv, which
# is then let go as displaced, with no moment the boards are idle for bob's
# paused sb to take). bw, still in sb's signed plan, sends with its own
# certificate what the ACL lets it: a checkpoint image of every block at
# the next steps and one at step 2^53-1, metrics saying every stage is
# done, and junk on stage 1's fwd topic. jm ends with `sky train`'s losses
# and weights byte for byte, and each refusal is counted with its reason.
# The job runs 200 steps (a few seconds), so that attacks land while it
# runs: the first refusal of each reason is logged at once (later ones are
# throttled), and the test checks it came between jm's plan and its end.
# The junk frame and a ready of stage 0 are also left retained before it
# starts, for every stage to get when it subscribes.
J=jm
# skyplan logs one refusal line per reason per 10 s (planner/svc_log.c): the
# window of bw's refusals on sv passes first, so that jm's first refusal of
# each reason is logged when it comes
sleep 10
bw -r -t "sky/v1/job/$J/stage/1/fwd/bw" -f "$W/junk"
bw -r -t "sky/v1/job/$J/stage/0/ready/bw" -f "$W/junk-ready"
attack_member_train() {
	# from jm's first plan on (before it, jm is no job: its refusals would
	# not show that the attacks meet the running job)
	sky_wait 60 grep -q "job $J epoch [0-9]* published" "$W/skyplan.log"
	_i=0
	while [ ! -f "$W/$J.over" ] && [ $_i -lt 200 ]; do
		_i=$((_i + 1))
		bw -t "sky/v1/job/$J/stage/1/fwd/bw" -f "$W/junk"
		forge_ckpt $((2 * _i + 2)) "$W/forged-m.ckpt"
		bw -t "sky/v1/job/$J/ckpt/bw" -f "$W/forged-m.ckpt"
		forge_ckpt 9007199254740991 "$W/forged-m-max.ckpt"
		bw -t "sky/v1/job/$J/ckpt/bw" -f "$W/forged-m-max.ckpt"
		for k in 0 1 2; do
			bw -t "sky/v1/job/$J/metrics/bw" \
				-m "{\"v\":1,\"stage\":$k,\"board\":\"b$((k + 1))\",\"epoch\":1,\"step\":200,\"steps\":200,\"done\":true}"
		done
		sleep 0.2
	done
}
attack_member_train &
APID=$!
PIDS="$PIDS $APID"
N=3 # sky_fleet_run_job's --min-boards (sky_serve_ask counted clients in N)
sky_fleet_run_job $J 4 --algo even --sched 1f1b --steps 200 --micro 2 --optimizer adamw --seed 5 \
	--checkpoint-every 2
wrc=$?
touch "$W/$J.over"
wait $APID 2>/dev/null
[ $wrc -eq 0 ] && pass adversary_member_training_job_ends || fail adversary_member_training_job_ends "watch rc $wrc: $(tail -3 "$W/$J.watch.err")"
# (line numbers in skyplan's log: its order of events)
line_of() { grep -n "$1" "$W/skyplan.log" | head -1 | cut -d: -f1; }
l_plan=$(line_of "job $J epoch [0-9]* published") l_done=$(line_of "job $J done under generation")
l_sb=$(line_of "job sb re-planned")
# bw stayed in sb's plan for all of jm's run (sb takes b1..b3 only once jm is done)
[ -n "$l_plan" ] && [ -n "$l_done" ] && { [ -z "$l_sb" ] || [ "$l_sb" -gt "$l_done" ]; } &&
	pass adversary_member_in_sbs_plan_through_the_training_job ||
	fail adversary_member_in_sbs_plan_through_the_training_job "jm planned at line $l_plan, done at $l_done, sb re-planned at $l_sb"
during_jm() { # REASON LOG-LINE: its first refusal between jm's plan and its end
	l=$(line_of "job $J: $2")
	[ -n "$l" ] && [ -n "$l_plan" ] && [ -n "$l_done" ] && [ "$l" -gt "$l_plan" ] && [ "$l" -lt "$l_done" ] &&
		pass "adversary_member_${1}_landed_while_the_training_job_ran" ||
		fail "adversary_member_${1}_landed_while_the_training_job_ran" "line $l, jm from $l_plan to $l_done"
}
during_jm ckpt_not_holder "checkpoint image (no stage of the plan) from bw refused (ckpt_not_holder)"
during_jm metrics_not_stage "metrics from bw refused (metrics_not_stage)"
sky_fleet_same_as_one_board $J 4 --steps 200 --micro 2 --optim adamw --seed 5
for rs in metrics_not_stage ckpt_not_holder; do
	sky_wait 15 refused $J $rs 1 && prom $J $rs &&
		pass "adversary_member_of_another_job_${rs}_on_a_training_job_refused_and_counted" ||
		fail "adversary_member_of_another_job_${rs}_on_a_training_job_refused_and_counted" "$(count $J $rs)"
done
sky_wait 15 dropped $J sender && pass adversary_member_forged_ready_on_a_training_job_dropped_as_sender ||
	fail adversary_member_forged_ready_on_a_training_job_dropped_as_sender "$("$SKY" fleet status --state "$STATE" | grep -A6 "^job $J ")"
grep -q "retained message on sky/v1/job/$J/stage/1/fwd/bw (4096 bytes) dropped: that kind of message is never retained" "$W"/b[123].log &&
	pass adversary_member_junk_frame_on_a_training_job_dropped_as_retained ||
	fail adversary_member_junk_frame_on_a_training_job_dropped_as_retained "$(grep -h "retained message on sky/v1/job/$J" "$W"/b*.log | head -3)"
bw -r -n -t "sky/v1/job/$J/stage/1/fwd/bw" # bw's retained junk cleared
bw -r -n -t "sky/v1/job/$J/stage/0/ready/bw"
"$SKY" fleet status --state "$STATE" | sed -n '/^job /,$p' | grep "^job\|refused\|sender" | sed 's/^/  /'
for f in "$W"/pid.*; do
	[ -f "$f" ] && kill "$(cat "$f")" 2>/dev/null
	rm -f "$f"
done
