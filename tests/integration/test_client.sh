#!/bin/sh
# Clients of serving jobs (issue 10) against a real mosquitto on loopback:
#   - `sky pki client` identities: a client publishes requests only under
#     its own CN and reads only its own responses (the broker refuses the
#     rest: MQTT v5 "Not authorized" on publish, nothing delivered on read),
#     on the tools listener where it connects, and gets nothing at all on
#     the fleet listener; an idle board identity (the first stage's rights)
#     reads the requests and answers (positive controls);
#   - skyplan answers a request for a job it does not know with
#     unknown_job, to the asking client, echoing the id ("" for an
#     unreadable request), and `sky infer` prints it and exits 1;
#   - a flood of 1000 requests from one client is rate-limited: most are
#     dropped unread, the log stays short, and another client is still
#     answered.
# Prints PASS/FAIL lines; every wait has a deadline; nothing asserts on
# elapsed time.
set -u
cd "$(dirname "$0")/../.."
. tests/integration/broker.sh
. tests/integration/lib.sh

sky_test_workdir client
PIDS=""
cleanup() {
	for p in $PIDS; do kill "$p" 2>/dev/null; done
	for p in $PIDS; do wait "$p" 2>/dev/null; done
	sky_broker_stop
	if [ "$fails" -eq 0 ] && [ -z "${SKY_KEEP:-}" ]; then rm -rf "$W"; else echo "(logs kept in $W)"; fi
}
trap cleanup EXIT

if ! sky_broker_start "$W/broker"; then
	fail client_broker "mosquitto did not start"
	exit 1
fi
BR="127.0.0.1:$SKY_BROKER_PORT"
PKI=$SKY_PKI_DIR
SKY="$SKY_BIN/sky"
wait_file() { # pattern file [tenths]: bounded wait for a line
	_i=0
	while [ $_i -lt "${3:-150}" ]; do
		grep -q -- "$1" "$2" 2>/dev/null && return 0
		sleep 0.1
		_i=$((_i + 1))
	done
	return 1
}

# ---- identities ------------------------------------------------------------------
ok=1
for n in alice bob; do
	"$SKY" pki client --dir "$PKI" "$n" >"$W/client-$n.out" 2>&1 || ok=0
done
"$SKY" pki client --dir "$PKI" alice >"$W/client-again.out" 2>&1 && ok=0
# two idle boards: bx reads requests (as a first stage would), by answers
# (a second connection with bx's certificate would close bx's)
for b in bx by; do
	"$SKY" pki issue --dir "$PKI" --id $b --state "$W/$b" >/dev/null 2>&1 || ok=0
done
kill -HUP "$SKY_BROKER_PID" # mosquitto reads the ACL again (alice reading below shows it has)
cn=$(openssl x509 -in "$PKI/clients/alice/client.crt" -noout -subject 2>/dev/null)
if [ $ok = 1 ] && echo "$cn" | grep -q "CN *= *sky-client-alice" &&
	grep -q "already exists" "$W/client-again.out" &&
	[ "$(stat -c %a "$PKI/clients/alice/client.key")" = 600 ]; then
	pass client_identity_issued
else
	fail client_identity_issued "ok=$ok subject '$cn': $(cat "$W"/client-*.out | head -c 300)"
fi
A="$PKI/clients/alice/client.crt $PKI/clients/alice/client.key"
B="$PKI/clients/bob/client.crt $PKI/clients/bob/client.key"
X="$W/bx/board.crt $W/bx/board.key"
Y="$W/by/board.crt $W/by/board.key"
# shellcheck disable=SC2086
tpub() { c=$1; k=$2; shift 2; timeout 20 mosquitto_pub $(sky_mq_claim_tls "$c" "$k") "$@"; }
# shellcheck disable=SC2086
fpub() { c=$1; k=$2; shift 2; timeout 20 mosquitto_pub $(sky_mq_tls "$c" "$k") "$@"; }

# ---- the ACL ------------------------------------------------------------------------
# bx (a board's rights, fleet listener) reads every request; alice (tools
# listener) tries to read every response and every request
: >"$W/bx.sub"
: >"$W/alice.sub"
# shellcheck disable=SC2046,SC2086
timeout 120 mosquitto_sub $(sky_mq_tls $X) -v -t 'sky/v1/job/+/req/bx/+' >"$W/bx.sub" 2>&1 &
PIDS="$PIDS $!"
# shellcheck disable=SC2046,SC2086
timeout 120 mosquitto_sub $(sky_mq_claim_tls $A) -v -t 'sky/v1/job/+/resp/+/+' -t 'sky/v1/job/+/req/+/+' \
	>"$W/alice.sub" 2>&1 &
PIDS="$PIDS $!"
ready=0
i=0
while [ $i -lt 50 ]; do # until both subscribers are in place
	# shellcheck disable=SC2086
	fpub $Y -q 1 -t sky/v1/job/j1/resp/sky-client-alice/by -m "alice-ready-$i" 2>/dev/null
	# shellcheck disable=SC2086
	tpub $A -q 1 -t sky/v1/job/j1/req/bx/sky-client-alice -m "bx-ready-$i" 2>/dev/null
	grep -q alice-ready "$W/alice.sub" && grep -q bx-ready "$W/bx.sub" && ready=1 && break
	sleep 0.2
	i=$((i + 1))
done
bad=""
# shellcheck disable=SC2086
{
	tpub $A -V 5 -q 1 -t sky/v1/job/j1/req/bx/sky-client-alice -m alice-own-request 2>"$W/e1"
	grep -q 'Not authorized' "$W/e1" && bad="$bad alice-refused-own-request;"
	tpub $A -V 5 -q 1 -t sky/v1/job/j1/req/bx/sky-client-bob -m alice-as-bob 2>"$W/e2"
	grep -q 'Not authorized' "$W/e2" || bad="$bad alice-published-as-bob;"
	for t in sky/v1/job/j1/resp/sky-client-alice/sky-client-alice \
		sky/v1/job/j1/resp/sky-client-bob/sky-client-alice sky/v1/job/j1/resp/sky-client-alice \
		sky/v1/job/j1/stage/0/fwd/sky-client-alice sky/v1/job/j1/req/sky-client-alice \
		sky/v1/job/j1/plan sky/v1/jobs/sky-client-alice/submit \
		sky/v1/board/sky-client-alice/caps; do
		tpub $A -V 5 -q 1 -t "$t" -m alice-forged 2>"$W/e3"
		grep -q 'Not authorized' "$W/e3" || bad="$bad alice-wrote:$t;"
	done
	# the fleet listener gives a client nothing, not even its own topics
	fpub $A -V 5 -q 1 -t sky/v1/job/j1/req/bx/sky-client-alice -m alice-on-fleet 2>"$W/e4"
	grep -q 'Not authorized' "$W/e4" || bad="$bad alice-wrote-on-the-fleet-listener;"
	# bob's traffic, which alice must not see
	fpub $Y -q 1 -t sky/v1/job/j1/resp/sky-client-bob/by -m bob-secret-response
	tpub $B -q 1 -t sky/v1/job/j1/req/bx/sky-client-bob -m bob-secret-request
	fpub $Y -q 1 -t sky/v1/job/j1/resp/sky-client-alice/by -m alice-end
	tpub $B -q 1 -t sky/v1/job/j1/req/bx/sky-client-bob -m bx-end
}
wait_file alice-end "$W/alice.sub" || ready=0
wait_file bx-end "$W/bx.sub" || ready=0
grep -q alice-own-request "$W/bx.sub" || bad="$bad bx-did-not-get-alices-request;"
grep -q 'alice-as-bob\|alice-forged\|alice-on-fleet' "$W/bx.sub" && bad="$bad a-refused-message-was-delivered;"
grep -q 'bob-secret' "$W/alice.sub" && bad="$bad alice-read-bobs-traffic;"
grep -q 'sky/v1/job/j1/req/' "$W/alice.sub" && bad="$bad alice-read-requests;"
if [ $ready = 1 ] && [ -z "$bad" ]; then
	pass client_acl_own_requests_and_responses_only
else
	fail client_acl_own_requests_and_responses_only "ready=$ready$bad alice saw: $(tr '\n' '|' <"$W/alice.sub" | head -c 300)"
fi

# ---- the planner answers for a job it does not know ---------------------------------
"$SKY_BIN/skyplan" --pki "$PKI" --broker "$BR" --state "$W/skyplan" >"$W/skyplan.log" 2>&1 &
PIDS="$PIDS $!"
wait_file "serving" "$W/skyplan.log" 200 || fail client_skyplan_starts "$(tail -3 "$W/skyplan.log")"
"$SKY" infer --pki "$PKI/clients/alice" --broker "$BR" --job nojob --tokens 101,2023,102 --id r1 \
	--json --timeout 30 >"$W/infer1.out" 2>"$W/infer1.err"
rc=$?
if [ $rc = 1 ] && grep -q '"id":"r1"' "$W/infer1.out" && grep -q '"code":"unknown_job"' "$W/infer1.out" &&
	grep -q '"ok":false' "$W/infer1.out" && grep -q 'refused by job nojob (unknown_job)' "$W/infer1.err"; then
	pass planner_answers_unknown_job_with_the_request_id
else
	fail planner_answers_unknown_job_with_the_request_id "rc $rc: $(cat "$W/infer1.out" "$W/infer1.err" | head -c 400)"
fi
# an unreadable request: answered with id "", to its sender only
# shellcheck disable=SC2086
tpub $A -q 1 -t sky/v1/job/nojob/req/sky-planner/sky-client-alice -m 'not json at all'
# shellcheck disable=SC2086
fpub $Y -q 1 -t sky/v1/job/j1/resp/sky-client-alice/by -m alice-end2
if wait_file '"id":"".*"job":"nojob".*"code":"unknown_job"' "$W/alice.sub"; then
	pass planner_answers_an_unreadable_request_without_an_id
else
	fail planner_answers_an_unreadable_request_without_an_id "$(tail -3 "$W/alice.sub")"
fi
# wrong usage: no identity, an identity that is not a client's
"$SKY" infer --broker "$BR" --job nojob --tokens 1 >/dev/null 2>"$W/u1.err"
r1=$?
"$SKY" infer --cert "$PKI/operator.crt" --key "$PKI/operator.key" --ca "$PKI/ca.crt" --broker "$BR" \
	--job nojob --tokens 1 >/dev/null 2>"$W/u2.err"
r2=$?
if [ $r1 = 2 ] && grep -q "no client identity" "$W/u1.err" && [ $r2 = 1 ] &&
	grep -q "not a client identity" "$W/u2.err"; then
	pass infer_refuses_a_missing_or_wrong_identity
else
	fail infer_refuses_a_missing_or_wrong_identity "$r1 $r2: $(cat "$W/u1.err" "$W/u2.err" | head -c 300)"
fi

# ---- a flood -----------------------------------------------------------------------------
BEFORE=$(grep -c '"code":"unknown_job"' "$W/alice.sub")
LINES0=$(wc -l <"$W/skyplan.log")
awk 'BEGIN {for (i = 0; i < 1000; i++) printf "{\"v\":1,\"id\":\"f%d\",\"tokens\":[1]}\n", i}' >"$W/flood"
# shellcheck disable=SC2046,SC2086
timeout 60 mosquitto_pub $(sky_mq_claim_tls $A) -q 1 -t sky/v1/job/flood/req/sky-planner/sky-client-alice \
	-l <"$W/flood" >/dev/null 2>&1
# bob is another client: its own budget
"$SKY" infer --pki "$PKI/clients/bob" --broker "$BR" --job nojob --tokens 1 --id b1 --json \
	--timeout 30 >"$W/infer2.out" 2>&1
grep -q '"code":"unknown_job"' "$W/infer2.out" && bob=1 || bob=0
# the "N more suppressed" line comes when the log window (10 s) ends
wait_file "inference request refusals: [0-9]* more suppressed" "$W/skyplan.log" 300
# shellcheck disable=SC2086
fpub $Y -q 1 -t sky/v1/job/j1/resp/sky-client-alice/by -m alice-end3
wait_file alice-end3 "$W/alice.sub"
ANSWERED=$(($(grep -c '"code":"unknown_job"' "$W/alice.sub") - BEFORE))
DROPPED=$(sed -n 's/.*(\([0-9]*\) requests dropped unread by the rate limit so far).*/\1/p' \
	"$W/skyplan.log" | tail -1)
LINES=$(tail -n +"$((LINES0 + 1))" "$W/skyplan.log" | grep -c "request")
echo "MEASURE request_flood answered $ANSWERED dropped_unread ${DROPPED:-0} log_lines $LINES"
if [ "$bob" = 1 ] && [ "$ANSWERED" -ge 1 ] && [ "$ANSWERED" -le 250 ] &&
	[ "${DROPPED:-0}" -ge $((1000 - ANSWERED - 50)) ] && [ "$LINES" -le 30 ]; then
	pass request_flood_is_rate_limited_and_logged_briefly
else
	fail request_flood_is_rate_limited_and_logged_briefly \
		"bob answered $bob; $ANSWERED answered, ${DROPPED:-0} dropped unread, $LINES log lines"
fi

exit $((fails > 0))
