#!/bin/sh
# Sites and link-aware plans (issue 12, the planner side), from the outside:
#   - sky plan --json on the geo fleet (3 sites x 3 boards, interleaved, site
#     paths of 20 Mbit/s, mini with 24 layers) for even, optimal --link-blind
#     and optimal: the keys the geo benchmark reads, and link-aware optimal's
#     simulated step at least 1.3x shorter than link-blind's;
#   - sky sim --link-blind prices the link-blind plans on the fleet as it is;
#   - live: a TLS mosquitto, skyplan --links, three skyd boards in two sites
#     (skyd --site): `sky fleet status` groups them by site and shows the
#     site paths, and the signed plan names each stage's site.
# Bounded waits; about 20 s on an idle machine.
set -u
cd "$(dirname "$0")/../.."
. tests/integration/broker.sh
. tests/integration/lib.sh

SKY="$SKY_BIN/sky"
FLEET=planner/data/geo-3x3.json
sky_test_workdir geo_plan
PIDS=""
cleanup() {
	for p in $PIDS; do kill "$p" 2>/dev/null; done
	for p in $PIDS; do wait "$p" 2>/dev/null; done
	sky_broker_stop
	if [ "$fails" -eq 0 ] && [ -z "${SKY_KEEP:-}" ]; then rm -rf "$W"; else echo "(logs kept in $W)"; fi
}
trap cleanup EXIT

# ---- sky plan --json: even, optimal --link-blind, optimal --------------------
json_num() { sed -n "s/.*\"$2\":\([0-9.e+-]*\).*/\1/p" "$1" | head -1; }
for a in even blind optimal; do
	case $a in
	even) args="--algo even" ;;
	blind) args="--algo optimal --link-blind" ;;
	optimal) args="--algo optimal" ;;
	esac
	# shellcheck disable=SC2086
	"$SKY" plan --fleet "$FLEET" --model mini --layers 24 --micro-batches 8 $args --json \
		>"$W/$a.json" 2>"$W/$a.err" || fail "geo_plan_$a" "exit $?: $(cat "$W/$a.err")"
done
keys_ok=1
for a in even blind optimal; do
	for k in cross_site_cuts wan_bytes_per_step sim_step_s link_blind sites site cut_crosses_sites; do
		grep -q "\"$k\":" "$W/$a.json" || { keys_ok=0; fail geo_plan_json_keys "$a lacks $k"; }
	done
done
[ $keys_ok = 1 ] && pass geo_plan_json_keys
grep -q '"sim_step_link_blind_s":' "$W/blind.json" && ! grep -q '"sim_step_link_blind_s":' "$W/optimal.json" &&
	pass geo_plan_link_blind_reports_both_models ||
	fail geo_plan_link_blind_reports_both_models "$(head -c 300 "$W/blind.json")"
S_EVEN=$(json_num "$W/even.json" sim_step_s)
S_BLIND=$(json_num "$W/blind.json" sim_step_s)
S_OPT=$(json_num "$W/optimal.json" sim_step_s)
C_EVEN=$(json_num "$W/even.json" cross_site_cuts)
C_BLIND=$(json_num "$W/blind.json" cross_site_cuts)
C_OPT=$(json_num "$W/optimal.json" cross_site_cuts)
echo "MEASURE geo_sim_step_s even $S_EVEN ($C_EVEN cuts cross sites) optimal_link_blind $S_BLIND ($C_BLIND) optimal $S_OPT ($C_OPT)"
if awk -v b="$S_BLIND" -v o="$S_OPT" 'BEGIN { exit !(o > 0 && b >= 1.3 * o) }'; then
	pass geo_plan_link_aware_1_3x_link_blind
else
	fail geo_plan_link_aware_1_3x_link_blind "link-blind $S_BLIND s, link-aware $S_OPT s"
fi
[ "$C_EVEN" = 8 ] && [ "$C_OPT" -lt "$C_BLIND" ] && pass geo_plan_cross_site_cuts ||
	fail geo_plan_cross_site_cuts "even $C_EVEN, link-blind $C_BLIND, optimal $C_OPT"
WAN=$(json_num "$W/optimal.json" wan_bytes_per_step)
# mini at micro-batch 8 x 128: a cut is 8 * 128 * 256 * 4 bytes, sent 2 x 8 times a step
awk -v w="$WAN" -v c="$C_OPT" 'BEGIN { exit !(w == c * 2 * 8 * 1048576) }' &&
	pass geo_plan_wan_bytes || fail geo_plan_wan_bytes "$WAN bytes for $C_OPT cuts"

# sky sim --link-blind: the same plans, priced on the fleet as it is
"$SKY" sim --fleet "$FLEET" --model mini --layers 24 --micro-batches 8 --algo optimal \
	--link-blind --json >"$W/sim.json" 2>"$W/sim.err"
S_SIM=$(json_num "$W/sim.json" step_s)
awk -v a="$S_SIM" -v b="$S_BLIND" 'BEGIN { exit !(a == b) }' && grep -q '"step_link_blind_s":' "$W/sim.json" &&
	pass geo_sim_link_blind_priced_with_sites ||
	fail geo_sim_link_blind_priced_with_sites "sim $S_SIM s, plan $S_BLIND s: $(cat "$W/sim.err")"

# ---- live: sites reported, kept, shown, and carried by the plan --------------
if ! sky_broker_start "$W/broker"; then
	fail geo_broker "mosquitto did not start"
	exit 1
fi
BR="127.0.0.1:$SKY_BROKER_PORT"
PKI=$SKY_PKI_DIR
STATE="$W/skyplan"
cat >"$W/links.json" <<EOT
{"links":[{"a":"factory","b":"core","bw_Bps":2.5e6,"lat_s":0.03},
          {"a":"shop","b":"core","bw_Bps":2.5e6,"lat_s":0.01}]}
EOT
"$SKY_BIN/skyplan" --pki "$PKI" --broker "$BR" --state "$STATE" --links "$W/links.json" \
	>"$W/skyplan.log" 2>&1 &
PIDS="$PIDS $!"
wait_for() { sky_wait "$WAIT_S" "$@"; } # at most $WAIT_S seconds
WAIT_S=15
wait_for grep -q "serving" "$W/skyplan.log" || fail geo_skyplan_starts "$(tail -3 "$W/skyplan.log")"
for b in f1:factory f2:factory s1:shop; do
	id=${b%%:*} site=${b#*:}
	mkdir -p "$W/$id"
	cp -r "$PKI/claim" "$W/$id/claim"
	tok=$("$SKY" pki token --dir "$PKI" --ttl 300)
	"$SKY_BIN/skyd" --enroll --claim "$tok" --id "$id" --pki-ca "$W/$id/claim/ca.crt" \
		--state "$W/$id/state" --broker "$BR" --keepalive 2 --model tiny --layers 6 \
		--probe-seconds 1 --site "$site" >"$W/$id.log" 2>&1 &
	PIDS="$PIDS $!"
done
fleet_json() { "$SKY" fleet status --state "$STATE" --json 2>/dev/null; }
three_with_sites() { [ "$(fleet_json | grep -o '"site":"[a-z]*"' | wc -l)" -eq 3 ]; }
WAIT_S=60
if wait_for three_with_sites; then
	pass geo_boards_report_their_sites
else
	fail geo_boards_report_their_sites "$(fleet_json | head -c 400)"
fi
"$SKY" fleet status --state "$STATE" >"$W/status.txt" 2>&1
if grep -q "^site factory: 2 boards" "$W/status.txt" && grep -q "^site shop: 1 board" "$W/status.txt" &&
	grep -q "^f1 .*online" "$W/status.txt" && grep -q "^  factory  *core  *2.500  *30.000  *given" "$W/status.txt"; then
	pass geo_fleet_status_groups_by_site
else
	fail geo_fleet_status_groups_by_site "$(cat "$W/status.txt")"
fi
"$SKY" job submit --pki "$PKI" --broker "$BR" --model tiny --layers 6 --job g1 --min-boards 3 \
	--algo even --wait 30 --json >"$W/job.json" 2>"$W/job.err"
if grep -q '"accepted":3,' "$W/job.json" && grep -q '"board":"f1","site":"factory"' "$W/job.json" &&
	grep -q '"board":"s1","site":"shop"' "$W/job.json"; then
	pass geo_signed_plan_names_stage_sites
else
	fail geo_signed_plan_names_stage_sites "$(cat "$W/job.json" "$W/job.err" | head -c 400)"
fi
exit "$fails"
