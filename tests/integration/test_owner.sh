#!/bin/sh
# Data stays home: a job with a data owner trains over a U-shaped plan.
# mosquitto (tests/integration/broker.sh), skyplan and 4 skyd processes
# enroll and probe a tiny BERT; jobs name b1 (then b3) as their data owner
# and are split evenly (U-shaped):
# the owner holds the first stage (embeddings, first layers) and the last
# (last layers, head, labels, loss), the other boards the layers between.
#  (a) same maths: per-step losses and the collected weights equal `sky
#      train` with the same seed byte for byte, under 1F1B/AdamW/clip and
#      under GPipe/SGD;
#  (b) a subscriber with a separate identity (bx, an enrolled board in no
#      job) takes every message on the job's topics: every frame between
#      stages is sealed (the header's flag), and no payload holds the
#      bytes of any micro-batch's token ids or labels (`sky job data` makes
#      them as the owner does); the boards between say they hold no data.
# b1 runs at a tenth of a core, the others at half of one (skyd --speed).
# Then the same 1F1B job without an owner, for the measured step of both.
#
# PASS/FAIL lines, MEASURE lines; bounded (every wait has a deadline).
set -u
cd "$(dirname "$0")/../.."
. tests/integration/fleet.sh
sky_fleet_begin owner
SUB_PID=""
trap 'sky_fleet_end $SUB_PID' EXIT
sky_fleet_start
N=4
# b1 is slow (a tenth of a core; the others half of one each): alone it
# would be the slowest plan, so the planner gives it little of the model
for i in 1 2 3 4; do
	speed=0.5
	[ $i = 1 ] && speed=0.1
	sky_fleet_enroll "b$i" --speed $speed
done
sky_wait 60 sky_fleet_reported || fail owner_boards_report "not all $N boards reported"
"$SKY" pki issue --dir "$PKI" --id bx --state "$W/bx" >/dev/null 2>"$W/bx.err" ||
	fail outsider_identity_issued "$(cat "$W/bx.err")"

# u_shaped NAME OWNER: the submit's plan lines name OWNER first and last,
# and no other board twice
u_shaped() {
	sed -n 's/^ *stage *[0-9]* *\([A-Za-z0-9_.-]*\) *half-layers.*/\1/p' "$W/$1.submit" >"$W/$1.boards"
	n=$(wc -l <"$W/$1.boards")
	if [ "$n" -ge 3 ] && [ "$(head -1 "$W/$1.boards")" = "$2" ] && [ "$(tail -1 "$W/$1.boards")" = "$2" ] &&
		[ "$(sort "$W/$1.boards" | uniq -d)" = "$2" ] && [ "$(grep -c "^$2\$" "$W/$1.boards")" -eq 2 ]; then
		pass "${1}_plan_u_shaped_owner_$2_first_and_last"
	else
		fail "${1}_plan_u_shaped_owner_$2_first_and_last" "stages: $(tr '\n' ' ' <"$W/$1.boards")"
	fi
	echo "MEASURE ${1}_plan $(sed -n 's/^ *stage *\([0-9]*\) *\([A-Za-z0-9_.-]*\) *half-layers *\([0-9]*-[0-9]*\).*/\2:\3/p' \
		"$W/$1.submit" | tr '\n' ' ')"
}

# ---- (a) + (b): 1F1B, AdamW, clip, sealed frames, owner b1 -----------------
# (even: on a model this small optimal keeps everything on the owner, its
# step the shortest; tests/planner/test_partition_owner.c covers optimal)
# everything on the job's topics, as a board outside the job can read it
mosquitto_sub $(sky_mq_tls "$W/bx/board.crt" "$W/bx/board.key") -q 1 -v -F '%t %x' \
	-t 'sky/v1/job/oa/#' >"$W/oa.sub" 2>"$W/oa.sub.err" &
SUB_PID=$!
sleep 0.5
sky_fleet_run_job oa 4 --algo even --sched 1f1b --steps 4 --micro 4 --optimizer adamw --seed 5 \
	--clip 0.05 --warmup 1 --data-owner b1
wrc=$?
[ $wrc -eq 0 ] && [ "$(grep -c '"step"' "$W/oa.watch")" -eq 4 ] && pass oa_watch_one_line_per_step ||
	fail oa_watch_one_line_per_step "rc $wrc: $(cat "$W/oa.watch" "$W/oa.watch.err" | head -5)"
u_shaped oa b1
sky_fleet_same_as_one_board oa 4 --steps 4 --micro 4 --optim adamw --seed 5 --clip 0.05 --warmup 1
sleep 1 # the last messages reach the subscriber
kill "$SUB_PID" 2>/dev/null
wait "$SUB_PID" 2>/dev/null
SUB_PID=""

# every message between stages (activations, gradients, norms, readiness):
# a v2 frame ("SKYF", version 2) with the sealed flag (header byte 10)
awk '$1 ~ /\/stage\/[0-9]+\/(fwd|bwd|norm|ready)\/[^\/]+$/ { print $2 }' "$W/oa.sub" >"$W/oa.frames"
nf=$(wc -l <"$W/oa.frames")
ns=$(cut -c1-24 "$W/oa.frames" | grep -c '^534b594602..........0100')
nt=$(awk '$1 ~ /\/stage\/[0-9]+\/(fwd|bwd)\/[^\/]+$/' "$W/oa.sub" | wc -l)
cuts=$(($(wc -l <"$W/oa.boards") - 1))
echo "MEASURE oa_frames_seen $nf (tensors $nt) sealed $ns messages_seen $(wc -l <"$W/oa.sub")"
# 4 steps x 4 micro-batches x each cut forward and back
[ "$nt" -eq $((4 * 4 * 2 * cuts)) ] && [ "$ns" -eq "$nf" ] && pass oa_every_frame_sealed ||
	fail oa_every_frame_sealed "$ns of $nf frames sealed, $nt tensors for $cuts cuts: $(cut -c1-40 "$W/oa.frames" | sort | uniq -c | head -3)"
# the owner's data: every micro-batch of the job, each sequence's first 16
# token ids (64 bytes) and the micro-batch's labels (32 bytes)
: >"$W/oa.data"
for idx in $(seq 0 15); do
	"$SKY" job data --model tiny --layers 4 --seed 5 --index "$idx" >"$W/data.$idx" ||
		fail oa_job_data "sky job data failed"
	head -1 "$W/data.$idx" | fold -w 256 | cut -c1-128 >>"$W/oa.data"
	sed -n 2p "$W/data.$idx" >>"$W/oa.data"
done
echo "MEASURE oa_data_patterns $(wc -l <"$W/oa.data")"
# the search finds them where they are (a planted copy)
printf 'x 00%s00\n' "$(sed -n 3p "$W/oa.data")" | cut -d' ' -f2 | grep -q -F -f "$W/oa.data" ||
	fail oa_data_search_works "a planted token run was not found"
hits=$(cut -d' ' -f2- "$W/oa.sub" | grep -c -F -f "$W/oa.data")
[ "$hits" -eq 0 ] && pass oa_no_token_ids_or_labels_in_any_payload ||
	fail oa_no_token_ids_or_labels_in_any_payload \
		"$hits messages hold them: $(grep -F -f "$W/oa.data" "$W/oa.sub" | cut -d' ' -f1 | sort | uniq -c | head -3)"
# only the owner made data; the boards between say they hold none
nodata=$(grep -l "job oa: data owner b1; this stage holds no data" "$W"/b[234].log | wc -l)
grep -q "job oa: data owner b1; this board makes the data" "$W/b1.log" && [ "$nodata" -ge 1 ] &&
	[ "$nodata" -eq "$(($(wc -l <"$W/oa.boards") - 2))" ] && pass oa_only_the_owner_holds_data ||
	fail oa_only_the_owner_holds_data "$nodata boards without data; b1: $(grep -c 'makes the data' "$W/b1.log")"

# ---- (a) again: GPipe, SGD, even split, owner b3 -----------------------------
sky_fleet_run_job ob 4 --algo even --sched gpipe --steps 3 --micro 3 --optimizer sgd --lr 0.05 --seed 9 \
	--data-owner b3
wrc=$?
[ $wrc -eq 0 ] && pass ob_job_ends || fail ob_job_ends "watch rc $wrc: $(cat "$W/ob.watch.err")"
u_shaped ob b3
sky_fleet_same_as_one_board ob 4 --steps 3 --micro 3 --optim sgd --lr 0.05 --seed 9

# a data owner the fleet does not have: refused, named
"$SKY" job submit --pki "$PKI" --broker "$BR" --model tiny --layers 4 --job oz --min-boards $N \
	--task train --wait 10 --data-owner nosuch >"$W/oz.submit" 2>&1
grep -q "data owner nosuch" "$W/oz.submit" "$W/skyplan.log" && pass unknown_owner_refused_by_name ||
	fail unknown_owner_refused_by_name "$(tail -2 "$W/oz.submit")"

# ---- the measured step with and without an owner (same fleet, same job, even) -
step_of() { # median step_s of the slowest stage per step, steps 2..
	sed -n 's/.*"step":\([0-9]*\),.*"step_s":\([0-9.e+-]*\),.*/\1 \2/p' "$W/$1.watch" |
		awk '$1 > 1 { print $2 }' | sort -n | awk '{ a[NR] = $1 } END { if (NR) print a[int((NR + 1) / 2)] }'
}
sky_fleet_run_job oc 4 --algo even --sched 1f1b --steps 9 --micro 4 --optimizer adamw --seed 2 ||
	fail oc_job_ends "$(cat "$W/oc.watch.err")"
sky_fleet_run_job od 4 --algo even --sched 1f1b --steps 9 --micro 4 --optimizer adamw --seed 2 \
	--data-owner b1 || fail od_job_ends "$(cat "$W/od.watch.err")"
u_shaped od b1
echo "MEASURE oc_plan $(sed -n 's/^ *stage *\([0-9]*\) *\([A-Za-z0-9_.-]*\) *half-layers *\([0-9]*-[0-9]*\).*/\2:\3/p' \
	"$W/oc.submit" | tr '\n' ' ')"
echo "MEASURE step_s_median no_owner $(step_of oc) owner_b1 $(step_of od) (tiny, 4 layers, 4 micro-batches, 1f1b)"
exit $((fails > 0))
