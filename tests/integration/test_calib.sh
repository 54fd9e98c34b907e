#!/bin/sh
# A board whose probe lied gets a corrected plan for the next job: mosquitto,
# skyplan and two skyd boards of the same speed (tiny BERT, 8 layers), b2's
# probe reporting 8 times what it measured (SKY_PROBE_FAKE_SCALE, skyd's test
# hook). Planned on the probes, `optimal` gives b2 a small share. A short
# even job (every board runs layers: the calibration) measures both; its
# stages' metrics are folded into each board's own figures, kept in
# <state>/calib.json across a restart of skyplan; the next `optimal` job is
# planned on them: b2's figures are corrected (the share it then gets is
# printed, not asserted), and the plan's figures file says "calibrated"
# (the first said "probe"). The fold itself (bounds, the
# sender's own figures only) is tests/planner/test_calib.c.
#
# PASS/FAIL lines, MEASURE lines; bounded (every wait has a deadline).
set -u
cd "$(dirname "$0")/../.."
. tests/integration/fleet.sh
sky_fleet_begin calib
sky_fleet_start
SKY_FLEET_SKYD_OPTS="--keepalive 2 --model tiny --layers 8 --probe-seconds 1"
N=2
sky_fleet_enroll b1
SKY_PROBE_FAKE_SCALE=8
export SKY_PROBE_FAKE_SCALE
sky_fleet_enroll b2
unset SKY_PROBE_FAKE_SCALE
sky_wait 60 sky_fleet_reported ||
	fail calib_boards_report "not all $N boards reported: $(sky_fleet_json | head -c 300)"
grep -q "SKY_PROBE_FAKE_SCALE" "$W/b2.log" && pass calib_b2_probe_lies ||
	fail calib_b2_probe_lies "no SKY_PROBE_FAKE_SCALE warning in b2.log"

# units JOB BOARD: how many half-layers BOARD holds in JOB's plan (sky job submit's listing)
units() {
	sed -n "s/.* $2 *half-layers *\([0-9]*\)-\([0-9]*\) .*/\1 \2/p" "$W/$1.submit" |
		awk '{ n += $2 - $1 + 1 } END { print n + 0 }'
}
figures() { sed -n 's/.*"figures":"\([a-z]*\)","boards".*/\1/p' "$STATE/plans/$1.figures.json" 2>/dev/null; }

sky_fleet_run_job c0 8 --algo optimal --no-replicas --steps 2 --micro 2 --seed 1 ||
	fail c0_runs "$(tail -3 "$W/c0.watch.err")"
u0=$(units c0 b2)
echo "MEASURE calib_probe_plan_b2_half_layers $u0"
[ "$(figures c0)" = probe ] && pass c0_planned_on_probes ||
	fail c0_planned_on_probes "figures '$(figures c0)': $(cat "$STATE/plans/c0.figures.json" 2>/dev/null)"

# the calibration: every board runs layers, a few steps
sky_fleet_run_job cal 8 --algo even --steps 4 --micro 2 --seed 1 || fail cal_runs "$(tail -3 "$W/cal.watch.err")"
sky_wait 10 grep -q '"board":"b2"' "$STATE/calib.json" && pass cal_measured_b2 ||
	fail cal_measured_b2 "$(cat "$STATE/calib.json" 2>/dev/null)"

# skyplan again on the same state: the figures come back from calib.json
kill "$PLAN_PID" 2>/dev/null
wait "$PLAN_PID" 2>/dev/null
PLAN_PID=""
sky_fleet_planner || fail calib_skyplan_restarts "$(tail -3 "$W/skyplan.log")"
grep -q "figures measured by their jobs read from" "$W/skyplan.log" && pass calib_figures_read_back ||
	fail calib_figures_read_back "$(grep -i calib "$W/skyplan.log" | tail -3)"
sky_wait 60 sky_fleet_reported || fail calib_boards_report_again "$(sky_fleet_json | head -c 300)"

sky_fleet_run_job c1 8 --algo optimal --no-replicas --steps 2 --micro 2 --seed 1 ||
	fail c1_runs "$(tail -3 "$W/c1.watch.err")"
u1=$(units c1 b2)
echo "MEASURE calib_calibrated_plan_b2_half_layers $u1"
[ "$(figures c1)" = calibrated ] && pass c1_planned_on_calibrated_figures ||
	fail c1_planned_on_calibrated_figures "figures '$(figures c1)'"
# b2's lie is corrected: its calibrated figures are within a few times
# b1's (the boards are equal; timing noise on a loaded machine moves them)
# and far below what its probe claimed (8x). How many half-layers optimal
# then gives b2 is printed above, not asserted: at these tiny shapes a cut
# can cost more than the compute it moves, so a plan on one board can be
# right even with honest figures.
if python3 - "$STATE/plans/c1.figures.json" <<'PY'
import json, sys
b = {x["id"]: x for x in json.load(open(sys.argv[1]))["boards"]}
b1, b2 = b["b1"], b["b2"]
assert b2["figures"] == "calibrated" and b2["from_job"] == "cal", b2
t = lambda x, k: x[k + "fwd_s"] + x[k + "bwd_s"]
assert t(b2, "") < t(b2, "probe_") / 2, b2          # the 8x lie undone
assert t(b2, "") < 4 * t(b1, ""), (b1, b2)          # equal boards, within noise
PY
then pass c1_b2_figures_corrected
else fail c1_b2_figures_corrected "b2 held $u0 of 16 half-layers on its probe, $u1 calibrated: $(cat "$STATE/plans/c1.figures.json")"; fi
exit $((fails > 0))
