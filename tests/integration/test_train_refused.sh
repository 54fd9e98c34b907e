#!/bin/sh
# A board that refuses its role for memory, over a real broker: mosquitto,
# skyplan and 3 skyd processes. b1 and b2 report 2 MiB to plan for, b3
# reports 3 MiB but admits plans against 600000 bytes only
# (SKY_TEST_REAL_MEM_BYTES, a board whose real memory is less than it
# said). The planner gives b3 the most layers; b3 refuses its stage, its
# ack naming the bytes and its budget. The job has checkpoints, so skyplan
# follows it: it learns b3's budget and re-plans at once without the role
# on b3, and `sky job submit --wait` follows that re-plan and exits 0 once
# every board of the new plan accepted. The job then trains to the end
# with the losses and weights of `sky train`. MEASURE: seconds from the
# refusal to the re-plan (skyplan's log).
#
# PASS/FAIL lines, MEASURE lines; bounded (every wait has a deadline).
set -u
cd "$(dirname "$0")/../.."
. tests/integration/fleet.sh
sky_fleet_begin train_refused
printf 'name = small\nthreads = 1\nmem_cap_mb = 2\n' >"$W/small.conf"
printf 'name = big\nthreads = 1\nmem_cap_mb = 3\n' >"$W/big.conf"
sky_fleet_start
N=3
sky_fleet_enroll b1 --profile "$W/small.conf"
sky_fleet_enroll b2 --profile "$W/small.conf"
SKY_TEST_REAL_MEM_BYTES=600000
export SKY_TEST_REAL_MEM_BYTES
sky_fleet_enroll b3 --profile "$W/big.conf"
unset SKY_TEST_REAL_MEM_BYTES
sky_wait 60 sky_fleet_reported ||
	fail train_refused_boards_report "not all $N boards reported: $(sky_fleet_json | head -c 300)"

J=refused
"$SKY" job watch $J --pki "$PKI" --broker "$BR" --timeout 180 --json >"$W/$J.watch" 2>"$W/$J.watch.err" &
WPID=$!
sleep 0.5 # the watch subscribes before the job can start
t0=$(date +%s)
"$SKY" job submit --pki "$PKI" --broker "$BR" --model tiny --layers 4 --job $J --min-boards 3 \
	--task train --steps 4 --micro 2 --optimizer adamw --seed 3 --no-replicas --checkpoint-every 1 --wait 90 \
	>"$W/$J.submit" 2>&1
src=$?
t1=$(date +%s)
sed 's/^/  /' "$W/$J.submit"
echo "MEASURE submit_to_all_accepted $((t1 - t0)) s (exit $src)"

# the first plan's table: b3 refused, with the bytes it needs and its budget
grep -q "b3 .*REFUSED [0-9]* bytes: .*600000" "$W/$J.submit" &&
	pass refusal_shown_with_needed_bytes_and_budget ||
	fail refusal_shown_with_needed_bytes_and_budget "no 'b3 ... REFUSED ... 600000' line in the submit's output"
# the re-plan's table, every board accepted, and the exit code says so
[ $src -eq 0 ] && tail -1 "$W/$J.submit" | grep -q "^[0-9]* accepted, 0 refused, 0 missing" &&
	pass submit_follows_the_replan_and_exits_0 ||
	fail submit_follows_the_replan_and_exits_0 "exit $src, last line: $(tail -1 "$W/$J.submit")"
grep -q "the planner re-plans job $J" "$W/$J.submit" && pass submit_says_the_planner_replans ||
	fail submit_says_the_planner_replans "no 'the planner re-plans' line"

# the board's own log, and the planner's: refusal, learned budget, re-plan
grep -q "plan $J epoch [0-9]* refused: .*600000" "$W/b3.log" && pass board_logs_its_refusal ||
	fail board_logs_its_refusal "$(grep -i "refus" "$W/b3.log" | tail -2)"
grep -q "board b3 refused job $J epoch" "$W/skyplan.log" && pass planner_logs_the_refusal ||
	fail planner_logs_the_refusal "$(grep -i refus "$W/skyplan.log" | tail -3)"
grep -q "board b3 refused stage [0-9]*: it needs [0-9]* bytes, its budget is 600000" "$W/skyplan.log" &&
	pass planner_replans_naming_bytes_and_budget ||
	fail planner_replans_naming_bytes_and_budget "$(grep "$J" "$W/skyplan.log" | tail -4)"
# how long the re-plan took after the refusal came, from skyplan's log
python3 -c '
import re, sys
from datetime import datetime
t = {}
for line in open(sys.argv[1]):
    for k, pat in (("refused", "board b3 refused job " + sys.argv[2] + " epoch"),
                   ("replan", "job " + sys.argv[2] + " epoch 2 published")):
        if pat in line and k not in t:
            t[k] = datetime.strptime(line[:23], "%Y-%m-%dT%H:%M:%S.%f")
if len(t) == 2:
    print("MEASURE refusal_to_replan_published %.3f s" % (t["replan"] - t["refused"]).total_seconds())' \
	"$W/skyplan.log" $J

wait $WPID
wrc=$?
[ $wrc -eq 0 ] && pass job_ends || fail job_ends "watch rc $wrc: $(tail -3 "$W/$J.watch.err")"
"$SKY" job collect $J --pki "$PKI" --broker "$BR" --out "$W/$J.safetensors" --timeout 30 \
	>"$W/$J.collect" 2>&1 || fail collect "$(cat "$W/$J.collect")"

# the plan that ran: a later epoch than the refused one, and no stage on b3
e1=$(sed -n 's/^job [^ ]* epoch \([0-9]*\): .*/\1/p' "$W/$J.submit" | head -1)
e2=$(sed -n 's/^job [^ ]* epoch \([0-9]*\): .*/\1/p' "$W/$J.submit" | tail -1)
last=$(sed -n '/^job [^ ]* epoch '"$e2"': /,$p' "$W/$J.submit")
echo "MEASURE epochs refused $e1, ran $e2"
[ -n "$e1" ] && [ -n "$e2" ] && [ "$e2" -gt "$e1" ] && ! echo "$last" | grep -q " b3 " &&
	pass replan_is_a_later_epoch_without_b3 ||
	fail replan_is_a_later_epoch_without_b3 "epochs $e1 then $e2; last table: $(echo "$last" | tr '\n' '|')"
sky_fleet_same_as_one_board $J 4 --steps 4 --micro 2 --optim adamw --seed 3

# ---- the same without checkpoints, on b4 (3 MiB reported, 600000 bytes
# real, enrolled now): the planner does not follow the job, so nothing
# re-plans it, and submit says so and exits 1; the planner still learned
# b4's budget, so the job cancelled and submitted again is planned within
# it and runs.
N=4
SKY_TEST_REAL_MEM_BYTES=600000
export SKY_TEST_REAL_MEM_BYTES
sky_fleet_enroll b4 --profile "$W/big.conf"
unset SKY_TEST_REAL_MEM_BYTES
sky_wait 60 sky_fleet_reported ||
	fail b4_reports "b4 did not report: $(sky_fleet_json | head -c 300)"
J=plain
"$SKY" job submit --pki "$PKI" --broker "$BR" --model tiny --layers 4 --job $J --min-boards 4 \
	--task train --steps 3 --micro 2 --optimizer adamw --seed 4 --no-replicas --wait 60 \
	>"$W/$J.submit" 2>&1
src=$?
sed 's/^/  /' "$W/$J.submit"
grep -q "b4 .*REFUSED [0-9]* bytes: .*600000" "$W/$J.submit" && [ $src -eq 1 ] &&
	grep -q "job $J is not re-planned" "$W/$J.submit" &&
	pass unfollowed_refusal_exits_1_saying_it_is_not_replanned ||
	fail unfollowed_refusal_exits_1_saying_it_is_not_replanned "exit $src: $(tail -2 "$W/$J.submit" | tr '\n' '|')"
grep -q "job $J is not re-planned (it is not followed: no checkpoints); board b4's budget is now" \
	"$W/skyplan.log" && pass unfollowed_refusal_teaches_the_planner ||
	fail unfollowed_refusal_teaches_the_planner "$(grep "$J" "$W/skyplan.log" | tail -3)"
"$SKY" job cancel --job $J --pki "$PKI" --broker "$BR" >"$W/$J.cancel" 2>&1 ||
	fail unfollowed_cancel "$(cat "$W/$J.cancel")"
# submitted again (under another name: a watch started before a submission
# under the old name would read the cancelled run's retained state)
J=plain2
sky_fleet_run_job $J 4 --steps 3 --micro 2 --optimizer adamw --seed 4 --no-replicas ||
	fail ${J}_job_ends "watch rc $?: $(tail -3 "$W/$J.watch.err")"
sed 's/^/  /' "$W/$J.submit"
grep -q " b4 " "$W/$J.submit" && fail resubmitted_job_has_no_role_on_b4 "$(cat "$W/$J.submit")" ||
	pass resubmitted_job_has_no_role_on_b4
sky_fleet_same_as_one_board $J 4 --steps 3 --micro 2 --optim adamw --seed 4

exit $((fails > 0))
