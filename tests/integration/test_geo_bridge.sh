#!/bin/sh
# Sites bridged to a core (sky pki bridge, sky pki site-broker), on loopback
# ports: a core broker with the planner, site A's broker with boards a1 and
# a2, site B's broker with board b1, each site bridged to the core over
# mutual TLS, and board c1 on the core broker itself (the core site). A
# training job split a1 | a2 | b1 | c1 has a same-site cut (a1 -> a2), a
# cut between sites (a2 -> b1) and one to the core site (b1 -> c1, frames
# addressed sky/v1/site/core/...). A subscriber on the core (identity "spy",
# which the test grants every sky/v1 topic there) sees the cross-site frames,
# addressed sky/v1/site/<dst>/..., and never a frame of the same-site cut,
# which the same subscriber does see on site A's broker; the collected
# weights equal `sky train` byte for byte. Before the job: a non-Sky topic
# and a board's own echo published on a site never reach the core, a
# board's caps do; the planner's link probe to each site comes back through
# that site's broker.
#
# PASS/FAIL lines; bounded (every wait has a deadline).
set -u
cd "$(dirname "$0")/../.."
. tests/integration/broker.sh
. tests/integration/lib.sh
sky_test_workdir geo
export OPENBLAS_NUM_THREADS=1
PIDS=""
SITE_PIDS=""
cleanup() {
	for p in $PIDS $SITE_PIDS; do kill "$p" 2>/dev/null; done
	for p in $PIDS $SITE_PIDS; do wait "$p" 2>/dev/null; done
	sky_broker_stop
	if [ "$fails" -eq 0 ] && [ -z "${SKY_KEEP:-}" ]; then rm -rf "$W"; else echo "(logs kept in $W)"; fi
}
trap cleanup EXIT

if ! sky_broker_start "$W/core"; then
	fail geo_core_broker "mosquitto did not start"
	exit 1
fi
PKI=$SKY_PKI_DIR
SKY="$SKY_BIN/sky"
BR="127.0.0.1:$SKY_BROKER_PORT"

# ---- two site brokers, bridged ------------------------------------------------
listening() { ss -Hltn "sport = :$1" 2>/dev/null | grep -q .; }
for s in A B; do
	port=$(_sky_free_port) || { fail geo_port "no free port"; exit 1; }
	eval "PORT_$s=$port"
	"$SKY" pki bridge --dir "$PKI" --port "$port" --core "$BR" "$s" >"$W/bridge-$s.out" 2>&1 ||
		fail "geo_pki_bridge_$s" "$(cat "$W/bridge-$s.out")"
done
grep -q "^user sky-bridge-A$" "$PKI/acl" && grep -q "^user sky-bridge-B$" "$PKI/acl" &&
	pass geo_core_acl_has_bridge_sections || fail geo_core_acl_has_bridge_sections "$(tail -5 "$PKI/acl")"
# a refusal names its reason
"$SKY" pki bridge --dir "$PKI" A >"$W/again.out" 2>&1
[ $? -eq 1 ] && grep -q "already has a bridge" "$W/again.out" && pass geo_bridge_twice_refused ||
	fail geo_bridge_twice_refused "$(cat "$W/again.out")"
"$SKY" pki bridge --dir "$PKI" core >"$W/core.out" 2>&1
[ $? -eq 1 ] && grep -q "core broker's own site" "$W/core.out" && pass geo_site_named_core_refused ||
	fail geo_site_named_core_refused "$(cat "$W/core.out")"

# the observer: a board identity in no job, granted all of sky/v1 on the core
# (and a non-Sky topic on site A, to publish it there); the brokers read the
# ACLs again on SIGHUP
"$SKY" pki issue --dir "$PKI" --id spy --state "$W/spy" >/dev/null 2>"$W/spy.err" ||
	fail geo_spy_issued "$(cat "$W/spy.err")"
printf '\nuser spy\ntopic read sky/v1/#\ntopic read other/#\n' >>"$PKI/acl"
printf '\nuser spy\ntopic write other/#\n' >>"$PKI/sites/A/acl"
kill -HUP "$SKY_BROKER_PID"
for s in A B; do
	mosquitto -c "$PKI/sites/$s/mosquitto.conf" >"$W/broker-$s.log" 2>&1 &
	SITE_PIDS="$SITE_PIDS $!"
done
sky_wait 10 listening "$PORT_A" && sky_wait 10 listening "$PORT_B" ||
	fail geo_site_brokers_listen "$(tail -3 "$W/broker-A.log" "$W/broker-B.log")"
bridged() { [ "$(grep -c "New bridge connected" "$SKY_BROKER_LOG")" -ge 4 ]; }
sky_wait 20 bridged && pass geo_bridges_connect_with_mutual_tls ||
	fail geo_bridges_connect_with_mutual_tls "$(grep -i bridge "$SKY_BROKER_LOG" | tail -4)"

spy() { # spy PORT: mosquitto options for the observer on that broker
	echo "-h 127.0.0.1 -p $1 -i $(_sky_mq_id) --cafile $PKI/ca.crt --cert $W/spy/board.crt --key $W/spy/board.key"
}
mosquitto_sub $(spy "$SKY_BROKER_PORT") -t 'sky/v1/#' -t 'other/#' -F '%t' >"$W/core.topics" 2>&1 &
CORE_SUB=$!
PIDS="$PIDS $CORE_SUB"
sleep 1
mosquitto_pub $(spy "$PORT_A") -t other/site-a -m x -q 1 || fail geo_publish_other "refused on site A"
mosquitto_pub $(spy "$PORT_A") -t sky/v1/board/spy/echo -m x -q 1 || fail geo_publish_echo "refused"
mosquitto_pub $(spy "$PORT_A") -t sky/v1/board/spy/caps -m '{}' -q 1 || fail geo_publish_caps "refused"
sky_wait 10 grep -q "^sky/v1/board/spy/caps$" "$W/core.topics" && pass geo_caps_cross_to_core ||
	fail geo_caps_cross_to_core "$(cat "$W/core.topics")"
sleep 1
grep -q "^other/" "$W/core.topics" && fail geo_non_sky_topic_stays_on_site "$(cat "$W/core.topics")" ||
	pass geo_non_sky_topic_stays_on_site
grep -q "/echo$" "$W/core.topics" && fail geo_board_echo_stays_on_site "$(cat "$W/core.topics")" ||
	pass geo_board_echo_stays_on_site

# the planner's link probe: in through a site's probe connection, back out
# through its main one (seen by the observer above: a second connection
# with its certificate would close the first)
P="-h 127.0.0.1 -p $SKY_BROKER_PORT --cafile $PKI/ca.crt --cert $PKI/planner.crt --key $PKI/planner.key"
mosquitto_pub $P -i "$(_sky_mq_id)" -t sky/v1/site/A/echo -m probe-a
mosquitto_pub $P -i "$(_sky_mq_id)" -t sky/v1/site/B/echo -m probe-b
back() { grep -q "^sky/v1/site/A/back/echo$" "$W/core.topics" &&
	grep -q "^sky/v1/site/B/back/echo$" "$W/core.topics"; }
sky_wait 20 back && pass geo_link_probe_turns_around_at_each_site ||
	fail geo_link_probe_turns_around_at_each_site "$(grep echo "$W/core.topics")"

# ---- planner on the core, boards on their sites ----------------------------------
STATE="$W/skyplan"
"$SKY_BIN/skyplan" --pki "$PKI" --broker "$BR" --state "$STATE" >"$W/skyplan.log" 2>&1 &
PIDS="$PIDS $!"
sky_wait 10 grep -q "serving" "$W/skyplan.log" || {
	fail geo_skyplan_starts "$(tail -3 "$W/skyplan.log")"
	exit 1
}
n_caps() { "$SKY" fleet status --state "$STATE" --json 2>/dev/null | grep -o '"caps":{' | wc -l; }
# one at a time: the planner lists boards in the order they first reported,
# and the even split keeps that order (a1 | a2 | b1 | c1)
PORT_core=$SKY_BROKER_PORT
N=0
for b in a1:A a2:A b1:B c1:core; do
	id=${b%:*}
	s=${b#*:}
	eval "port=\$PORT_$s"
	"$SKY" pki issue --dir "$PKI" --id "$id" --state "$W/$id" >/dev/null 2>"$W/$id.err" ||
		fail "geo_issue_$id" "$(cat "$W/$id.err")"
	"$SKY_BIN/skyd" --state "$W/$id" --broker "127.0.0.1:$port" --site "$s" --keepalive 2 \
		--model tiny --layers 4 --probe-seconds 1 >"$W/$id.log" 2>&1 &
	PIDS="$PIDS $!"
	N=$((N + 1))
	caps_n() { [ "$(n_caps)" -ge "$N" ]; }
	sky_wait 60 caps_n || fail "geo_${id}_reports_through_the_bridge" "$(tail -3 "$W/$id.log")"
done
"$SKY" fleet status --state "$STATE" --json >"$W/fleet.json" 2>&1
grep -q '"site":"B"' "$W/fleet.json" && pass geo_planner_sees_board_sites ||
	fail geo_planner_sees_board_sites "$(head -c 600 "$W/fleet.json")"

# the planner measured each site's path through its bridge
# (fleet.json "links": the registry's site paths)
links() { grep -qs '"a":"A","b":"core","bw_Bps"' "$STATE/fleet.json" &&
	grep -qs '"a":"B","b":"core","bw_Bps"' "$STATE/fleet.json"; }
sky_wait 30 links && pass geo_planner_measures_each_sites_path ||
	fail geo_planner_measures_each_sites_path "$(grep -o '"links":[^]]*' "$STATE/fleet.json"; grep site "$W/skyplan.log")"
grep "site [AB]: path" "$W/skyplan.log" | head -2 | sed 's/^/  /'

# the same-site cut's frames, seen on site A (so that not seeing them on the
# core means something)
mosquitto_sub $(spy "$PORT_A") -t 'sky/v1/job/+/stage/+/fwd/+' -t 'sky/v1/job/+/stage/+/bwd/+' -F '%t' \
	>"$W/siteA.topics" 2>&1 &
PIDS="$PIDS $!"
sleep 0.5
J=jg
"$SKY" job watch "$J" --pki "$PKI" --broker "$BR" --timeout 180 --json >"$W/$J.watch" \
	2>"$W/$J.watch.err" &
wpid=$!
sleep 0.5
"$SKY" job submit --pki "$PKI" --broker "$BR" --model tiny --layers 4 --job "$J" --min-boards 4 \
	--task train --wait 30 --algo even --sched 1f1b --steps 3 --micro 2 --optimizer adamw \
	--seed 7 >"$W/$J.submit" 2>&1 || fail geo_job_submitted "$(cat "$W/$J.submit")"
wait $wpid && pass geo_job_ends || fail geo_job_ends "$(tail -3 "$W/$J.watch.err")"
"$SKY" job collect "$J" --pki "$PKI" --broker "$BR" --out "$W/$J.safetensors" --timeout 30 \
	>"$W/$J.collect" 2>&1 || fail geo_job_collect "$(cat "$W/$J.collect")"
order=$(awk '$1 == "stage" {printf "%s ", $3}' "$W/$J.submit")
[ "$order" = "a1 a2 b1 c1 " ] && pass geo_plan_has_same_site_cross_site_and_core_cuts ||
	fail geo_plan_has_same_site_cross_site_and_core_cuts "stages on boards: $order"
sleep 1
kill "$CORE_SUB" 2>/dev/null

# plan a1 | a2 | b1 | c1: stage 0 -> 1 within A, 1 -> 2 from A to B, 2 -> 3
# from B to the core
same=$(grep -c "^sky/v1/job/$J/stage/1/fwd/a1$\|^sky/v1/job/$J/stage/0/bwd/a2$" "$W/siteA.topics")
core_plain=$(grep -c "^sky/v1/job/$J/stage/[0-9]*/\(fwd\|bwd\)/" "$W/core.topics")
cross_fwd=$(grep -c "^sky/v1/site/B/job/$J/stage/2/fwd/a2$" "$W/core.topics")
cross_bwd=$(grep -c "^sky/v1/site/A/job/$J/stage/1/bwd/b1$" "$W/core.topics")
to_core=$(grep -c "^sky/v1/site/core/job/$J/stage/3/fwd/b1$" "$W/core.topics")
from_core=$(grep -c "^sky/v1/site/B/job/$J/stage/2/bwd/c1$" "$W/core.topics")
echo "MEASURE geo_frames same_site_on_A=$same plain_on_core=$core_plain cross_fwd_on_core=$cross_fwd cross_bwd_on_core=$cross_bwd to_core=$to_core from_core=$from_core"
[ "$same" -ge 12 ] && pass geo_same_site_frames_flow_on_site ||
	fail geo_same_site_frames_flow_on_site "$same frames of cut 0|1 on site A (want 3 steps x 2 mb x 2)"
[ "$core_plain" -eq 0 ] && pass geo_same_site_frames_never_reach_core ||
	fail geo_same_site_frames_never_reach_core "$core_plain plain stage frames on the core"
[ "$cross_fwd" -ge 6 ] && [ "$cross_bwd" -ge 6 ] && pass geo_cross_site_frames_cross_the_core ||
	fail geo_cross_site_frames_cross_the_core "fwd $cross_fwd bwd $cross_bwd (want >= 6 each)"
[ "$to_core" -ge 6 ] && [ "$from_core" -ge 6 ] && pass geo_frames_to_and_from_the_core_site ||
	fail geo_frames_to_and_from_the_core_site "to $to_core from $from_core (want >= 6 each)"

# the same maths as one board
"$SKY" train --model tiny --layers 4 --eval 4 --save "$W/$J.ref.safetensors" --steps 3 --micro 2 \
	--optim adamw --seed 7 >"$W/$J.ref" 2>&1 || fail geo_sky_train "$(tail -2 "$W/$J.ref")"
if [ -s "$W/$J.safetensors" ] && cmp -s "$W/$J.safetensors" "$W/$J.ref.safetensors"; then
	pass geo_final_weights_bit_exact_with_sky_train
else
	fail geo_final_weights_bit_exact_with_sky_train \
		"$(cmp "$W/$J.safetensors" "$W/$J.ref.safetensors" 2>&1 | head -1)"
fi

# ---- a revoked board is refused at its site's broker too ----------------------------
# (the site broker checks its copy of the CA's CRL, which sky pki revoke renews)
"$SKY" pki issue --dir "$PKI" --id bx --state "$W/bx" >/dev/null 2>"$W/bx.err" ||
	fail geo_issue_bx "$(cat "$W/bx.err")"
"$SKY" pki revoke --dir "$PKI" spy >"$W/revoke.out" 2>&1 || fail geo_revoke "$(cat "$W/revoke.out")"
cmp -s "$PKI/crl.pem" "$PKI/sites/A/crl.pem" && pass geo_site_crl_follows_revoke ||
	fail geo_site_crl_follows_revoke "sites/A/crl.pem differs from crl.pem"
set -- $SITE_PIDS
lines=$(wc -l <"$W/broker-A.log")
kill -HUP "$1"
sleep 1
if ! mosquitto_pub $(spy "$PORT_A") -t other/site-a -m x -q 1 >"$W/pub.out" 2>&1 &&
	tail -n +"$((lines + 1))" "$W/broker-A.log" | grep -q "certificate verify failed"; then
	pass geo_site_broker_refuses_revoked_board
else
	fail geo_site_broker_refuses_revoked_board "$(cat "$W/pub.out"); $(tail -n +"$((lines + 1))" "$W/broker-A.log" | head -5)"
fi
mosquitto_pub -h 127.0.0.1 -p "$PORT_A" -i "$(_sky_mq_id)" --cafile "$PKI/ca.crt" \
	--cert "$W/bx/board.crt" --key "$W/bx/board.key" -t sky/v1/board/bx/echo -m x -q 1 \
	>"$W/pub.out" 2>&1 && pass geo_site_broker_admits_other_boards ||
	fail geo_site_broker_admits_other_boards "$(cat "$W/pub.out")"
exit $((fails > 0))
