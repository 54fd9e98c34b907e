#!/bin/sh
# The fleet trains: mosquitto (tests/integration/broker.sh), skyplan and 4
# skyd processes enroll, probe and train a tiny BERT together over MQTT,
# under two plans (4 layers split evenly, GPipe, AdamW, sealed frames; 3
# layers split by the paper's algorithm, 1F1B, SGD, plaintext frames). Each
# job must reproduce `sky train` on one board with the same seed,
# micro-batching and optimizer: the same per-step losses (sky job watch)
# and the same final weights, byte for byte (the file sky job collect
# assembles against `sky train --save`; OpenBLAS on one thread). The
# collected file evaluates with sky eval. Then a board is stopped (SIGSTOP)
# in a job with a short frame deadline: its neighbours report a stall
# naming stage, step and micro-batch, and the watch exits 1.
#
# PASS/FAIL lines, MEASURE lines; bounded (every wait has a deadline).
set -u
cd "$(dirname "$0")/../.."
. tests/integration/fleet.sh
sky_fleet_begin train
sky_fleet_start
sky_fleet_boards 4

# inject JOB TOPIC FRAME-OPTIONS...: a crafted frame, published retained (which
# frames never are: the receiver drops the retained copy) with
# the identity of bx, a board enrolled in the fleet but in no job (the ACL lets
# any board publish on every job's stage topics, under its own id as the last
# level; a running board's own certificate
# would close that board's connection, the broker naming clients by their
# certificate), so the receiving stage gets it when it subscribes at the
# job's start, before any right frame
"$SKY" pki issue --dir "$PKI" --id bx --state "$W/bx" >/dev/null 2>"$W/bx.err" ||
	fail outsider_board_issued "$(cat "$W/bx.err")"
inject() {
	job=$1
	topic=$2
	shift 2
	f="$W/inject.$(echo "$topic" | tr / _)"
	"$SKY" job frame --job "$job" --shape 8,16,32 --out "$f" "$@" || fail inject_frame "$*"
	mosquitto_pub $(sky_mq_tls "$W/bx/board.crt" "$W/bx/board.key") -q 1 -r \
		-t "sky/v1/job/$job/$topic/bx" -f "$f" || fail inject_publish "$topic"
}
next_epoch() { echo $(($(cat "$STATE/epoch" 2>/dev/null || echo 0) + 1)); }

# ---- plan 1: 4 layers, even split, GPipe, AdamW, sealed frames ---------------
# an outsider's frame (bx holds no stage), right in every field, cannot enter the job
inject ja stage/1/fwd --epoch "$(next_epoch)" --step 0 --stage 1 --dir fwd --mb 0
sky_fleet_run_job ja 4 --algo even --sched gpipe --steps 4 --micro 4 --optimizer adamw --seed 5 --clip 0.05 \
	--warmup 1
wrc=$?
[ $wrc -eq 0 ] && [ "$(grep -c '"step"' "$W/ja.watch")" -eq 4 ] && pass ja_watch_one_line_per_step ||
	fail ja_watch_one_line_per_step "rc $wrc: $(cat "$W/ja.watch" "$W/ja.watch.err" | head -5)"
grep -q "sealed frames" "$W/b1.log" && pass ja_frames_sealed || fail ja_frames_sealed "no 'sealed frames' in b1.log"
sky_fleet_same_as_one_board ja 4 --steps 4 --micro 4 --optim adamw --seed 5 --clip 0.05 --warmup 1
# a frame is never retained: the stage's connection drops the retained copy
# when it arrives, before the transport sees it (docs/security.md)
rdropped() { grep -q "retained message on sky/v1/job/$1/bx ([0-9]* bytes) dropped: that kind of message is never retained" "$W"/b*.log; }
rdropped ja/stage/1/fwd && pass ja_outsiders_retained_frame_dropped ||
	fail ja_outsiders_retained_frame_dropped "$(grep -h "retained" "$W"/b*.log | head -3)"
sed -n 's/.*half-layers *\([0-9]*-[0-9]*\) .*/\1/p' "$W/ja.submit" | tr '\n' ' ' >"$W/ja.split"
echo "MEASURE ja_plan_half_layers $(cat "$W/ja.split")"

# ---- plan 2: 3 layers, the paper's split, 1F1B, SGD, plaintext frames --------
sky_fleet_run_job jb 3 --algo sky --sched 1f1b --steps 5 --micro 3 --optimizer sgd --lr 0.05 --seed 9 \
	--plaintext-frames
wrc=$?
[ $wrc -eq 0 ] && pass jb_job_ends || fail jb_job_ends "watch rc $wrc: $(cat "$W/jb.watch.err")"
sky_fleet_same_as_one_board jb 3 --steps 5 --micro 3 --optim sgd --lr 0.05 --seed 9
sed -n 's/.*half-layers *\([0-9]*-[0-9]*\) .*/\1/p' "$W/jb.submit" | tr '\n' ' ' >"$W/jb.split"
echo "MEASURE jb_plan_half_layers $(cat "$W/jb.split")"
[ "$(cat "$W/ja.split")" != "$(cat "$W/jb.split")" ] && pass two_different_plans ||
	fail two_different_plans "both split $(cat "$W/ja.split")"

# ---- bad frames from a board's identity: dropped, counted, and the job still
# equals one board -----------------------------------------------------------------
E=$(next_epoch)
inject je stage/1/fwd --epoch $((E + 7)) --step 0 --stage 1 --dir fwd --mb 0
inject je stage/2/fwd --epoch "$E" --step 999 --stage 2 --dir fwd --mb 0
inject je stage/3/fwd --epoch "$E" --step 0 --stage 3 --dir fwd --mb 0 --shape 8,16,31
inject je stage/0/bwd --epoch "$E" --step 0 --stage 0 --dir bwd --mb 0 --defect checksum
inject je stage/1/bwd --epoch "$E" --step 0 --stage 1 --dir bwd --mb 1 --defect truncated
inject je stage/2/bwd --epoch "$E" --step 0 --stage 2 --dir bwd --mb 0 --shape 8,16,64
sky_fleet_run_job je 4 --algo even --sched 1f1b --steps 3 --micro 2 --optimizer adamw --seed 4 --plaintext-frames ||
	fail je_job_ends "$(cat "$W/je.watch.err")"
sky_fleet_same_as_one_board je 4 --steps 3 --micro 2 --optim adamw --seed 4
# every one is dropped as a retained copy before it is decoded (the
# sender check: test_adversary.sh; the frame checks themselves:
# tests/runtime/test_transport.c)
for t in stage/1/fwd stage/2/fwd stage/3/fwd stage/0/bwd stage/1/bwd stage/2/bwd; do
	rdropped "je/$t" && pass "je_outsiders_retained_frame_dropped_$(echo $t | tr / _)" ||
		fail "je_outsiders_retained_frame_dropped_$(echo $t | tr / _)" "$(grep -h "retained.*je" "$W"/b*.log | head -6)"
done
"$SKY" fleet status --state "$STATE" | sed -n '/^job je /,/^job /p' | head -5 | sed 's/^/  /'

# the collected file is a model sky eval reads
"$SKY" eval --weights "$W/jb.safetensors" >"$W/jb.eval" 2>&1 &&
	pass collected_file_evaluates || fail collected_file_evaluates "$(tail -3 "$W/jb.eval")"

# ---- a longer job learns (loss falls) ---------------------------------------
sky_fleet_run_job jc 2 --algo even --sched 1f1b --steps 40 --micro 2 --optimizer adamw --lr 0.003 --seed 3
first=$(sed -n 's/.*"step":1,"loss":\([-0-9.e]*\),.*/\1/p' "$W/jc.watch")
last=$(sed -n 's/.*"step":40,"loss":\([-0-9.e]*\),.*/\1/p' "$W/jc.watch")
echo "MEASURE jc_loss_first_last $first $last"
[ -n "$first" ] && [ -n "$last" ] && awk "BEGIN{exit !($last < $first - 0.05)}" &&
	pass jc_1f1b_loss_falls || fail jc_1f1b_loss_falls "first $first last $last"

# ---- a board stopped mid-job: its neighbours report a stall, the watch exits 1
# (no checkpoints, so no re-plan when the broker drops the stopped board:
# tests/integration/test_faults.sh has those) --
"$SKY" job watch jd --pki "$PKI" --broker "$BR" --timeout 120 >"$W/jd.watch" 2>&1 &
wpid=$!
sleep 0.5
"$SKY" job submit --pki "$PKI" --broker "$BR" --model tiny --layers 4 --job jd --min-boards $N \
	--task train --algo even --sched gpipe --steps 100000 --micro 2 --stall-s 3 --wait 30 \
	--checkpoint-every 0 \
	>"$W/jd.submit" 2>&1 || fail jd_submitted "$(cat "$W/jd.submit")"
sky_wait 60 grep -q "^step 1 " "$W/jd.watch" || fail jd_steps "no step line: $(head -3 "$W/jd.watch")"
kill -STOP "$PID_b3"
wait $wpid
wrc=$?
kill -CONT "$PID_b3"
stall=$(grep -m1 "^STALL" "$W/jd.watch")
echo "MEASURE stall_line $stall"
if [ $wrc -ne 0 ] && echo "$stall" | grep -q "stage [0-9] stalled at step [0-9]* micro-batch [-0-9]*: no"; then
	pass stall_reported_with_stage_step_mb
else
	fail stall_reported_with_stage_step_mb "rc $wrc: $(head -3 "$W/jd.watch")"
fi
grep -h "job jd stopped" "$W"/b*.log | head -2 | sed 's/^/  /'
[ "$(grep -l "job jd stopped: stage" "$W"/b*.log | wc -l)" -ge 1 ] && pass stalled_boards_stop_the_job ||
	fail stalled_boards_stop_the_job "no board logged 'job jd stopped'"
exit $((fails > 0))
