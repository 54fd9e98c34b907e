#!/bin/sh
# skyplan --metrics against a live loopback fleet (a real mosquitto from
# tests/integration/broker.sh, skyplan, three skyd boards):
#   - a bad ADDR:PORT is refused before anything starts, naming the problem,
#     and a taken port is refused with "cannot listen on";
#   - GET /metrics answers with the text format's content type, and the
#     scrape passes `promtool check metrics` (SKIP if promtool is missing);
#   - a scrape and `sky fleet status --json` taken at the same moment (the
#     same snapshot time) agree: boards online, offline and enrolled, each
#     board's online flag and probe forward, backward and memory figures,
#     the job's plan epoch; and again after a board is stopped;
#   - a planned job has a predicted step time and re-plans 0;
#   - tools/grafana/sky-fleet.json is JSON (schema 36+) and every metric its
#     panels query is one the scrape defines; a real Prometheus (if
#     installed) scrapes skyplan and evaluates every panel's query.
# Prints PASS/FAIL lines. Bounded: every wait has a deadline.
set -u
cd "$(dirname "$0")/../.."
. tests/integration/broker.sh

K=2
LAYERS=3
BOARDS="m1 m2 m3"
. tests/integration/lib.sh

sky_test_workdir metrics
PLAN_PID=""
PROM_PID=""
cleanup() {
	[ -n "$PROM_PID" ] && kill "$PROM_PID" 2>/dev/null && wait "$PROM_PID" 2>/dev/null
	for b in $BOARDS; do
		p=$(cat "$W/$b.pid" 2>/dev/null) && kill "$p" 2>/dev/null
	done
	[ -n "$PLAN_PID" ] && kill "$PLAN_PID" 2>/dev/null
	for b in $BOARDS; do
		p=$(cat "$W/$b.pid" 2>/dev/null) && wait "$p" 2>/dev/null
	done
	[ -n "$PLAN_PID" ] && wait "$PLAN_PID" 2>/dev/null
	sky_broker_stop
	if [ "$fails" -eq 0 ] && [ -z "${SKY_KEEP:-}" ]; then rm -rf "$W"; else echo "(logs kept in $W)"; fi
}
trap cleanup EXIT

if ! command -v curl >/dev/null 2>&1; then
	fail metrics_curl "curl is not installed (tools/install-deps.sh)"
	exit 1
fi
if ! sky_broker_start "$W/broker"; then
	fail metrics_broker "mosquitto did not start"
	exit 1
fi
BR="127.0.0.1:$SKY_BROKER_PORT"
PKI=$SKY_PKI_DIR
SKY="$SKY_BIN/sky"
STATE="$W/skyplan"
wait_for() { sky_wait "$WAIT_S" "$@"; } # at most $WAIT_S seconds

# ---- a bad address is refused before anything starts --------------------------
for bad in 127.0.0.1 127.0.0.1:0 127.0.0.1:99999 localhost:http ::1:9464; do
	"$SKY_BIN/skyplan" --pki "$PKI" --broker "$BR" --state "$W/bad" --metrics "$bad" \
		>"$W/bad.log" 2>&1
	rc=$?
	if [ $rc -eq 2 ] && grep -q "skyplan: --metrics: '$bad'" "$W/bad.log"; then
		pass "metrics_refuses_address_$bad"
	else
		fail "metrics_refuses_address_$bad" "exit $rc: $(head -c 200 "$W/bad.log")"
	fi
done

MPORT=$(_sky_free_port)
MURL="http://127.0.0.1:$MPORT/metrics"
"$SKY_BIN/skyplan" --pki "$PKI" --broker "$BR" --state "$STATE" --keepalive $K \
	--metrics "127.0.0.1:$MPORT" >"$W/skyplan.log" 2>&1 &
PLAN_PID=$!
WAIT_S=15
if ! wait_for grep -q "serving" "$W/skyplan.log"; then
	fail metrics_skyplan_starts "$(tail -3 "$W/skyplan.log")"
	exit 1
fi
grep -q "metrics at $MURL" "$W/skyplan.log" && pass metrics_logs_its_url ||
	fail metrics_logs_its_url "$(head -5 "$W/skyplan.log")"

# a second planner on the same metrics port is refused, saying why
"$SKY_BIN/skyplan" --pki "$PKI" --broker "$BR" --state "$W/second" \
	--metrics "127.0.0.1:$MPORT" >"$W/second.log" 2>&1
rc=$?
if [ $rc -eq 1 ] && grep -q "cannot listen on 127.0.0.1:$MPORT: Address already in use" \
	"$W/second.log"; then
	pass metrics_refuses_a_taken_port
else
	fail metrics_refuses_a_taken_port "exit $rc: $(head -c 300 "$W/second.log")"
fi

# ---- three boards enroll and probe; a job over them ------------------------------
for b in $BOARDS; do
	mkdir -p "$W/$b"
	cp -r "$PKI/claim" "$W/$b/claim"
	tok=$("$SKY" pki token --dir "$PKI" --ttl 300) || fail metrics_token "sky pki token failed"
	"$SKY_BIN/skyd" --state "$W/$b/state" --broker "$BR" --keepalive $K --model tiny \
		--layers $LAYERS --probe-seconds 1 --no-link-probe --enroll --claim "$tok" --id "$b" \
		--pki-ca "$W/$b/claim/ca.crt" >>"$W/$b.log" 2>&1 &
	echo $! >"$W/$b.pid"
done
fleet_json() { "$SKY" fleet status --state "$STATE" --json 2>/dev/null; }
scrape() { curl -sf --max-time 10 "$MURL"; }
all_online() {
	[ "$(fleet_json | grep -o '"state":"online"' | wc -l)" -eq 3 ] &&
		[ "$(fleet_json | grep -o '"caps":{' | wc -l)" -eq 3 ]
}
WAIT_S=90
wait_for all_online && pass metrics_boards_online ||
	fail metrics_boards_online "$(fleet_json | head -c 300)"
"$SKY" job submit --pki "$PKI" --broker "$BR" --model tiny --layers $LAYERS --job j1 \
	--min-boards 3 --algo even --wait 30 --json >"$W/job1.json" 2>"$W/job1.err"
grep -q '"accepted":3,' "$W/job1.json" && pass metrics_job_planned ||
	fail metrics_job_planned "$(head -c 300 "$W/job1.json" "$W/job1.err")"

# ---- the scrape: its HTTP answer and promtool ------------------------------------
if curl -s --max-time 10 -D "$W/headers" -o "$W/scrape.txt" "$MURL" &&
	grep -qi '^content-type: text/plain; version=0.0.4; charset=utf-8' "$W/headers" &&
	grep -q '^HTTP/1.1 200' "$W/headers"; then
	pass metrics_http_200_text_format
else
	fail metrics_http_200_text_format "$(cat "$W/headers" 2>/dev/null | head -5)"
fi
code=$(curl -s --max-time 10 -o /dev/null -w '%{http_code}' "http://127.0.0.1:$MPORT/")
[ "$code" = 404 ] && pass metrics_other_paths_404 || fail metrics_other_paths_404 "got $code"
if command -v promtool >/dev/null 2>&1; then
	if promtool check metrics <"$W/scrape.txt" >"$W/promtool.out" 2>&1; then
		pass metrics_promtool_check
	else
		fail metrics_promtool_check "$(head -5 "$W/promtool.out")"
	fi
else
	echo "SKIP metrics_promtool_check: promtool not installed (Debian package prometheus)"
fi

# ---- the Grafana dashboard queries only metrics that a scrape defines -----------------
D=tools/grafana/sky-fleet.json
missing=""
for m in $(grep -o '"expr": "[^"]*' "$D" | grep -o 'sky_[a-z0-9_]*' | sort -u); do
	grep -q "^# TYPE $m " "$W/scrape.txt" || missing="$missing $m"
done
n=$(grep -o '"expr": "[^"]*' "$D" | grep -o 'sky_[a-z0-9_]*' | sort -u | wc -l)
schema=$(sed -n 's/^  "schemaVersion": \([0-9]*\),$/\1/p' "$D")
if [ -z "$missing" ] && [ "$n" -ge 15 ] && [ "${schema:-0}" -ge 36 ]; then
	pass metrics_dashboard_queries_scraped_metrics
else
	fail metrics_dashboard_queries_scraped_metrics "$n metrics, schema '$schema', not in the scrape:$missing"
fi
if command -v python3 >/dev/null 2>&1; then
	python3 -m json.tool "$D" >/dev/null 2>"$W/dash.err" && pass metrics_dashboard_is_json ||
		fail metrics_dashboard_is_json "$(head -2 "$W/dash.err")"
else
	echo "SKIP metrics_dashboard_is_json: no python3 to parse it"
fi

# ---- a real Prometheus scrapes skyplan; every dashboard query evaluates -----------
if command -v prometheus >/dev/null 2>&1; then
	PPORT=$(_sky_free_port)
	cat >"$W/prometheus.yml" <<EOC
global:
  scrape_interval: 1s
scrape_configs:
  - job_name: sky
    static_configs:
      - targets: ['127.0.0.1:$MPORT']
EOC
	prometheus --config.file="$W/prometheus.yml" --storage.tsdb.path="$W/tsdb" \
		--web.listen-address="127.0.0.1:$PPORT" >"$W/prometheus.log" 2>&1 &
	PROM_PID=$!
	query() { curl -sf --max-time 10 -G "http://127.0.0.1:$PPORT/api/v1/query" \
		--data-urlencode "query=$1"; }
	three_scraped() { query 'count(sky_board_layer_forward_seconds)' 2>/dev/null |
		grep -q '"value":\[[0-9.]*,"3"\]'; }
	WAIT_S=60
	if wait_for three_scraped; then
		pass metrics_prometheus_scrapes_skyplan
		bad=""
		sed -n 's/^ *"expr": "\(.*\)",\{0,1\}$/\1/p' "$D" | sed 's/\\"/"/g' |
			sed 's/\$instance/.*/g; s/\$__rate_interval/1m/g' >"$W/exprs"
		while IFS= read -r e; do
			query "$e" >"$W/q.json" 2>/dev/null && grep -q '"status":"success"' "$W/q.json" ||
				bad="$bad [$e]"
		done <"$W/exprs"
		[ -z "$bad" ] && [ "$(wc -l <"$W/exprs")" -ge 20 ] &&
			pass metrics_dashboard_queries_evaluate ||
			fail metrics_dashboard_queries_evaluate "$(wc -l <"$W/exprs") queries; failed:$bad"
		query 'sum(sky_boards{instance=~".*",state="online"})' | grep -q '"3"\]' &&
			pass metrics_prometheus_sees_three_online ||
			fail metrics_prometheus_sees_three_online "$(query 'sky_boards' | head -c 300)"
	else
		fail metrics_prometheus_scrapes_skyplan "$(tail -3 "$W/prometheus.log")"
	fi
	kill "$PROM_PID" 2>/dev/null
	wait "$PROM_PID" 2>/dev/null
	PROM_PID=""
else
	echo "SKIP metrics_prometheus_scrapes_skyplan: prometheus not installed"
fi

# ---- a scrape and sky fleet status at the same moment ------------------------------
# value of one sample (exact name and labels) in a scrape file
sample() { awk -v k="$2" '$1 == k { print $2; found = 1 } END { exit !found }' "$1"; }
# field of one board in a fleet.json file (numbers and strings)
board_field() {
	sed 's/{"id":/\n{"id":/g' "$1" | grep "^{\"id\":\"$2\"" | head -1 |
		sed -n "s/.*\"$3\":\"\{0,1\}\([^\",}]*\).*/\1/p"
}
# numbers equal to 1e-12 relative (both print shortest round-trip digits)
same() { awk -v a="$1" -v b="$2" 'BEGIN { d = a - b; if (d < 0) d = -d; m = a < 0 ? -a : a;
	exit !(a != "" && b != "" && d <= 1e-12 * m) }'; }
# takes a scrape and the status with the same snapshot time into $W/s.txt, $W/f.json
same_moment() {
	_i=0
	while [ $_i -lt 50 ]; do
		scrape >"$W/s.txt" && fleet_json >"$W/f.json" && scrape >"$W/s2.txt" &&
			t1=$(sample "$W/s.txt" sky_registry_updated_timestamp_seconds) &&
			t2=$(sample "$W/s2.txt" sky_registry_updated_timestamp_seconds) &&
			tf=$(sed -n 's/.*"updated_unix":\([0-9]*\).*/\1/p' "$W/f.json") &&
			[ "$t1" = "$tf" ] && [ "$t2" = "$tf" ] && cmp -s "$W/s.txt" "$W/s2.txt" && return 0
		sleep 0.1
		_i=$((_i + 1))
	done
	return 1
}
agree() { # label
	if ! same_moment; then
		fail "metrics_$1_same_moment" "no scrape and status with one snapshot time"
		return
	fi
	bad=""
	for st in online offline enrolled; do
		want=$(grep -o "\"state\":\"$st\"" "$W/f.json" | wc -l)
		got=$(sample "$W/s.txt" "sky_boards{state=\"$st\"}")
		[ "$got" = "$want" ] || bad="$bad $st: scrape $got, status $want;"
	done
	for b in $BOARDS; do
		on=0
		[ "$(board_field "$W/f.json" "$b" state)" = online ] && on=1
		got=$(sample "$W/s.txt" "sky_board_online{board=\"$b\"}")
		[ "$got" = "$on" ] || bad="$bad $b online: scrape $got, status $on;"
		for f in fwd_s:sky_board_layer_forward_seconds bwd_s:sky_board_layer_backward_seconds \
			mem_bytes:sky_board_memory_budget_bytes; do
			want=$(board_field "$W/f.json" "$b" "${f%%:*}")
			got=$(sample "$W/s.txt" "${f#*:}{board=\"$b\"}")
			same "$got" "$want" || bad="$bad $b ${f%%:*}: scrape '$got', status '$want';"
		done
	done
	want=$(sed -n 's/.*"jobs":\[{"job":"j1","epoch":\([0-9]*\)}.*/\1/p' "$W/f.json")
	got=$(sample "$W/s.txt" 'sky_job_plan_epoch{job="j1"}')
	[ -n "$want" ] && [ "$got" = "$want" ] || bad="$bad epoch: scrape '$got', status '$want';"
	if [ -z "$bad" ]; then
		pass "metrics_$1_agrees_with_fleet_status"
	else
		fail "metrics_$1_agrees_with_fleet_status" "$bad"
	fi
}
agree all_online
[ "$(sample "$W/s.txt" sky_boards{state=\"online\"})" = 3 ] && pass metrics_three_online ||
	fail metrics_three_online "$(grep '^sky_boards' "$W/s.txt")"
pred=$(sample "$W/s.txt" 'sky_job_step_predicted_seconds{job="j1"}')
awk -v p="${pred:-0}" 'BEGIN { exit !(p > 0) }' && pass metrics_predicted_step ||
	fail metrics_predicted_step "'$pred'"
[ "$(sample "$W/s.txt" 'sky_job_replans_total{job="j1"}')" = 0 ] && pass metrics_replans_zero ||
	fail metrics_replans_zero "$(grep replans "$W/s.txt")"

# ---- a board goes away: both see it ------------------------------------------------
p=$(cat "$W/m3.pid")
kill -TERM "$p" 2>/dev/null
wait "$p" 2>/dev/null
rm -f "$W/m3.pid"
m3_offline() { [ "$(sample "$W/s.txt" 'sky_board_online{board="m3"}' 2>/dev/null)" = 0 ] ||
	{ scrape >"$W/s.txt" 2>/dev/null; return 1; }; }
WAIT_S=20
wait_for m3_offline && pass metrics_board_offline_in_scrape ||
	fail metrics_board_offline_in_scrape "$(grep '^sky_board_online' "$W/s.txt")"
agree one_offline
[ "$(sample "$W/s.txt" sky_boards{state=\"offline\"})" = 1 ] && pass metrics_one_offline ||
	fail metrics_one_offline "$(grep '^sky_boards' "$W/s.txt")"

exit $((fails > 0))
