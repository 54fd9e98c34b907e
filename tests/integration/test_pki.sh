#!/bin/sh
# The fleet PKI against a real mosquitto on loopback: `sky pki init` output,
# enrollment checks (`sky pki issue` runs the board's and the CA's code
# without MQTT), mutual TLS and the generated ACL.
#
# Non-delivery is observed without timing assumptions: a subscriber
# allowed to read the topic runs; the refused publishes go out with QoS 1
# (so the broker has handled them when mosquitto_pub returns); then an
# allowed "end" marker is published and awaited (bounded wait). If the
# refused payload is not in the subscriber's output once the marker is
# there, the broker dropped it. MQTT v5 publishes are also checked for the
# broker's "Not authorized" reason code.
set -u
cd "$(dirname "$0")/../.." || exit 1
. tests/integration/broker.sh

. tests/integration/lib.sh
SKY="$SKY_BIN/sky"

sky_broker_start || {
	fail broker_start "could not start mosquitto (see above)"
	exit 1
}
P=$SKY_PKI_DIR
W=$SKY_BROKER_DIR
SUB_PID=""
cleanup() {
	[ -n "$SUB_PID" ] && kill "$SUB_PID" 2>/dev/null
	sky_broker_stop
	[ -n "${W2:-}" ] && rm -rf "$W2"
}
trap cleanup EXIT

# ---- files ------------------------------------------------------------------
bad=""
for k in ca.key broker.key planner.key operator.key claim/claim.key; do
	m=$(stat -c %a "$P/$k" 2>/dev/null)
	[ "$m" = 600 ] || bad="$bad $k=$m"
done
for c in ca.crt broker.crt planner.crt operator.crt claim/claim.crt claim/ca.crt mosquitto.conf acl \
	acl-claim; do
	[ -s "$P/$c" ] || bad="$bad missing:$c"
done
[ -z "$bad" ] && pass pki_init_files_and_key_modes || fail pki_init_files_and_key_modes "$bad"

if openssl verify -CAfile "$P/ca.crt" "$P/broker.crt" "$P/planner.crt" "$P/claim/claim.crt" \
	>/dev/null 2>&1 &&
	openssl x509 -in "$P/broker.crt" -noout -ext subjectAltName 2>/dev/null | grep -q 'IP Address:127.0.0.1'; then
	pass pki_certs_verify_with_openssl
else
	fail pki_certs_verify_with_openssl "openssl rejects a certificate or the broker SAN is missing"
fi

if "$SKY" pki init --dir "$P" --port 1 >/dev/null 2>&1; then
	fail pki_init_refuses_overwrite "a second init replaced the CA"
else
	pass pki_init_refuses_overwrite
fi
if "$SKY" pki --help >/dev/null && "$SKY" pki init --help >/dev/null &&
	! "$SKY" pki init >/dev/null 2>&1 && ! "$SKY" pki token >/dev/null 2>&1 &&
	! "$SKY" pki bogus >/dev/null 2>&1; then
	pass pki_cli_help_and_errors
else
	fail pki_cli_help_and_errors "--help must exit 0, missing --dir or unknown subcommand non-zero"
fi
grep -q '^require_certificate true$' "$P/mosquitto.conf" &&
	grep -q '^use_identity_as_username true$' "$P/mosquitto.conf" &&
	grep -q '^use_username_as_clientid true$' "$P/mosquitto.conf" &&
	grep -q '^clientid_prefixes sky:$' "$P/mosquitto.conf" &&
	grep -q "^listener $SKY_CLAIM_PORT 127.0.0.1$" "$P/mosquitto.conf" &&
	grep -q '^allow_anonymous false$' "$P/mosquitto.conf" &&
	grep -q "^listener $SKY_BROKER_PORT 127.0.0.1$" "$P/mosquitto.conf" &&
	grep -q '^set_tcp_nodelay true$' "$P/mosquitto.conf" &&
	grep -q '^max_packet_size [0-9]' "$P/mosquitto.conf" &&
	pass broker_conf_contents || fail broker_conf_contents "a required line is missing"

# ---- enrollment (no MQTT) -------------------------------------------------------
issue() { "$SKY" pki issue --dir "$P" "$@" >/dev/null 2>"$W/issue.err"; }
if issue --id b01 --state "$W/b01" && issue --id b02 --state "$W/b02" &&
	[ "$(stat -c %a "$W/b01/board.key")" = 600 ] &&
	openssl verify -CAfile "$P/ca.crt" "$W/b01/board.crt" >/dev/null 2>&1 &&
	openssl x509 -in "$W/b01/board.crt" -noout -subject | grep -q 'CN *= *b01$'; then
	pass enroll_issues_board_cert
else
	fail enroll_issues_board_cert "$(cat "$W/issue.err")"
fi

bad=""
ctl=$(printf 'a\001b')
tab=$(printf 'a\tb')
long=$(printf '%065d' 0)
for id in 'a#b' 'a+b' 'a/b' '#' '+' "$ctl" "$tab" 'a b' 'a.b' '' "$long" sky-claim sky-planner; do
	if issue --id "$id" --state "$W/bad"; then
		bad="$bad [$id]"
	fi
done
[ -z "$bad" ] && pass enroll_refuses_bad_ids || fail enroll_refuses_bad_ids "accepted:$bad"

tok=$("$SKY" pki token --dir "$P")
if issue --id b03 --state "$W/b03" --token "$tok"; then
	if issue --id b04 --state "$W/b04" --token "$tok"; then
		fail enroll_token_one_time "a used token was accepted again"
	elif grep -q 'already used' "$W/issue.err"; then
		pass enroll_token_one_time
	else
		fail enroll_token_one_time "refused for another reason: $(cat "$W/issue.err")"
	fi
else
	fail enroll_token_one_time "fresh token refused: $(cat "$W/issue.err")"
fi

tok=$("$SKY" pki token --dir "$P" --ttl 1)
sleep 2.2
if issue --id b05 --state "$W/b05" --token "$tok"; then
	fail enroll_token_expiry "an expired token was accepted"
elif grep -q 'expired' "$W/issue.err"; then
	pass enroll_token_expiry
else
	fail enroll_token_expiry "refused for another reason: $(cat "$W/issue.err")"
fi

tok=$("$SKY" pki token --dir "$P" --id b06)
if issue --id b07 --state "$W/b07" --token "$tok"; then
	fail enroll_token_bound_to_id "a token bound to b06 enrolled b07"
elif issue --id b06 --state "$W/b06" --token "$tok"; then
	pass enroll_token_bound_to_id
else
	fail enroll_token_bound_to_id "bound token refused for its own id: $(cat "$W/issue.err")"
fi

tok=$("$SKY" pki token --dir "$P")
if issue --id b01 --state "$W/b01-again" --token "$tok"; then
	fail enroll_unbound_token_cannot_take_enrolled_id "b01 was re-issued to a new key"
else
	pass enroll_unbound_token_cannot_take_enrolled_id
fi

if issue --id b08 --state "$W/b08" --token 0123456789abcdef0123456789abcdef; then
	fail enroll_unknown_token "a token never minted was accepted"
else
	pass enroll_unknown_token
fi

# ---- plan envelopes through the CLI --------------------------------------------------
printf '{"job":"j1","epoch":3}' >"$W/plan.json"
W3=$(mktemp -d "${TMPDIR:-/tmp}/sky-forger.XXXXXX")
"$SKY" pki init --dir "$W3/pki" --port 1 >/dev/null
if "$SKY" pki sign --key "$P/planner.key" --cert "$P/planner.crt" "$W/plan.json" >"$W/env" &&
	[ "$("$SKY" pki verify --cert "$W/b01/planner.crt" "$W/env")" = '{"job":"j1","epoch":3}' ] &&
	"$SKY" pki sign --key "$W3/pki/planner.key" --cert "$W3/pki/planner.crt" "$W/plan.json" \
		>"$W/forged" &&
	! "$SKY" pki verify --cert "$W/b01/planner.crt" "$W/forged" >/dev/null 2>"$W/forged.err" &&
	grep -q 'does not verify' "$W/forged.err" &&
	head -c 60 "$W/env" >"$W/trunc" &&
	! "$SKY" pki verify --cert "$W/b01/planner.crt" "$W/trunc" >/dev/null 2>"$W/trunc.err" &&
	grep -q 'not JSON or truncated' "$W/trunc.err" &&
	sed 's/epoch\\":3/epoch\\":4/' "$W/env" >"$W/tampered" && ! cmp -s "$W/env" "$W/tampered" &&
	! "$SKY" pki verify --cert "$W/b01/planner.crt" "$W/tampered" >/dev/null 2>"$W/tampered.err" &&
	grep -q 'does not verify' "$W/tampered.err"; then
	pass envelope_cli_verifies_own_and_rejects_forged
else
	fail envelope_cli_verifies_own_and_rejects_forged "see $W"
fi
rm -rf "$W3"

# ---- TLS and ACL against mosquitto ------------------------------------------------
PL="$P/planner.crt $P/planner.key"
OP="$P/operator.crt $P/operator.key"
B1="$W/b01/board.crt $W/b01/board.key"
B2="$W/b02/board.crt $W/b02/board.key"
CL="$P/claim/claim.crt $P/claim/claim.key"
# shellcheck disable=SC2086 # identity pairs are two words on purpose
pub() { # cert key [mosquitto_pub args...]
	c=$1
	k=$2
	shift 2
	timeout 20 mosquitto_pub $(sky_mq_tls "$c" "$k") "$@"
}
# shellcheck disable=SC2086
cpub() { # the same on the claim listener
	c=$1
	k=$2
	shift 2
	timeout 20 mosquitto_pub $(sky_mq_claim_tls "$c" "$k") "$@"
}

wait_for() { # pattern file: bounded wait (~15 s) for a line
	i=0
	while [ $i -lt 150 ]; do
		grep -q -- "$1" "$2" 2>/dev/null && return 0
		sleep 0.1
		i=$((i + 1))
	done
	return 1
}

# sub_start IDENT_CERT IDENT_KEY FILTER OUT: starts a subscriber and waits
# until a marker from b02 (on its own heartbeat topic) reaches it.
sub_start() {
	: >"$4"
	# shellcheck disable=SC2046
	timeout 120 mosquitto_sub $(sky_mq_tls "$1" "$2") -v -t "$3" -t sky/v1/board/b02/heartbeat \
		>"$4" 2>&1 &
	SUB_PID=$!
	i=0
	while [ $i -lt 50 ]; do
		pub $B2 -q 1 -t sky/v1/board/b02/heartbeat -m "ready-$i" 2>/dev/null
		grep -q 'ready-' "$4" && return 0
		sleep 0.2
		i=$((i + 1))
	done
	return 1
}
# sub_end OUT: publishes the end marker, waits for it, stops the subscriber.
sub_end() {
	pub $B2 -q 1 -t sky/v1/board/b02/heartbeat -m "end-marker" 2>/dev/null
	wait_for end-marker "$1"
	r=$?
	kill "$SUB_PID" 2>/dev/null
	wait "$SUB_PID" 2>/dev/null
	SUB_PID=""
	return $r
}

OUT="$W/sub.out"
if ! sub_start $PL 'sky/v1/board/#' "$OUT"; then
	fail acl_subscriber_ready "planner subscriber never saw b02's marker: $(tail -3 "$OUT")"
else
	pub $B1 -q 1 -t sky/v1/board/b01/caps -m allowed-own-caps
	# refused: no certificate, a certificate from another CA, the claim
	# identity, a board under another board's id
	W2=$(mktemp -d "${TMPDIR:-/tmp}/sky-otherca.XXXXXX")
	"$SKY" pki init --dir "$W2/pki" --port "$SKY_BROKER_PORT" >/dev/null
	timeout 20 mosquitto_pub -h 127.0.0.1 -p "$SKY_BROKER_PORT" --cafile "$P/ca.crt" -q 1 \
		-t sky/v1/board/b01/caps -m no-cert-payload >/dev/null 2>&1
	rc_nocert=$?
	# shellcheck disable=SC2046 # sky_mq_tls prints several arguments
	timeout 20 mosquitto_pub $(sky_mq_tls "$W2/pki/planner.crt" "$W2/pki/planner.key") -q 1 \
		-t sky/v1/board/b01/caps -m other-ca-payload >/dev/null 2>&1
	rc_otherca=$?
	pub $CL -V 5 -q 1 -t sky/v1/board/b01/caps -m claim-caps-payload 2>"$W/claim1.err"
	pub $CL -V 5 -q 1 -t sky/v1/board/sky-claim/caps -m claim-own-caps-payload 2>"$W/claim2.err"
	pub $B1 -q 1 -t sky/v1/board/b02/caps -m b01-as-b02-v311
	pub $B1 -V 5 -q 1 -t sky/v1/board/b02/caps -m b01-as-b02-v5 2>"$W/b01v5.err"
	pub $B1 -V 5 -q 1 -t sky/v1/board/b02/status -m b01-as-b02-status 2>>"$W/b01v5.err"
	if sub_end "$OUT"; then
		grep -q 'sky/v1/board/b01/caps allowed-own-caps' "$OUT" &&
			pass acl_board_publishes_own_caps ||
			fail acl_board_publishes_own_caps "the allowed message did not arrive"
		if [ $rc_nocert -ne 0 ] && ! grep -q no-cert-payload "$OUT"; then
			pass tls_refuses_client_without_certificate
		else
			fail tls_refuses_client_without_certificate "rc=$rc_nocert"
		fi
		if [ $rc_otherca -ne 0 ] && ! grep -q other-ca-payload "$OUT"; then
			pass tls_refuses_certificate_from_other_ca
		else
			fail tls_refuses_certificate_from_other_ca "rc=$rc_otherca"
		fi
		if ! grep -q claim-caps-payload "$OUT" && ! grep -q claim-own-caps-payload "$OUT" &&
			grep -q 'Not authorized' "$W/claim1.err" && grep -q 'Not authorized' "$W/claim2.err"; then
			pass acl_claim_identity_cannot_publish_caps
		else
			fail acl_claim_identity_cannot_publish_caps "delivered or no v5 refusal"
		fi
		if ! grep -q 'b01-as-b02' "$OUT" && [ "$(grep -c 'Not authorized' "$W/b01v5.err")" = 2 ]; then
			pass acl_board_cannot_publish_as_other_board
		else
			fail acl_board_cannot_publish_as_other_board "delivered or no v5 refusal"
		fi
	else
		fail acl_end_marker "end marker never arrived"
	fi
fi

# Everything the ACL does not name is refused (MQTT v5 reason code),
# for a board, the claim identity, the planner and the operator, on the
# fleet listener and on the claim listener.
bad=""
for t in sky/v1/other foo sky/v2/board/b01/caps sky/v1/jobs/submit sky/v1/job/j1/plan \
	sky/v1/enroll/n1/cert sky/v1/enroll/n1/csr sky/v1/board/b01 sky/v1/board/b01/caps/x \
	sky/v1/board/b02/cmd sky/v1/board/b01/cmd sky/v1/jobs/b01/submit sky/v1/jobs/sky-operator/submit \
	sky/v1/job/j1/metrics sky/v1/job/j1/metrics/b02 sky/v1/job/j1/stage/2/bwd \
	sky/v1/job/j1/stage/2/bwd/b02 sky/v1/job/j1/stage/0/done/b02 \
	sky/v1/job/j1/resp/sky-client-x/b02 sky/v1/job/j1/resp/sky-client-x \
	sky/v1/site/B/job/j1/stage/1/fwd/b02 sky/v1/job/j1/req/b01/sky-client-x; do
	pub $B1 -V 5 -q 1 -t "$t" -m x 2>"$W/deny.err"
	grep -q 'Not authorized' "$W/deny.err" || bad="$bad b01:$t"
done
# the claim identity: nothing on the fleet listener, only a CSR on its own
for t in sky/v1/enroll/n1/csr sky/v1/enroll/n1/cert sky/v1/job/j1/plan sky/v1/job/j1/stage/1/fwd \
	sky/v1/jobs/submit sky/v1/board/sky-claim/caps foo; do
	pub $CL -V 5 -q 1 -t "$t" -m x 2>"$W/deny.err"
	grep -q 'Not authorized' "$W/deny.err" || bad="$bad claim:$t"
done
# (its CSR only under its own client id: sky:n1 may not use nonce n1 nor
# another connection's sky:n2, nor write its own answer)
for t in sky/v1/enroll/n1/cert sky/v1/enroll/n1/csr sky/v1/enroll/sky:n2/csr \
	sky/v1/enroll/sky:n1/cert sky/v1/job/j1/plan sky/v1/job/j1/stage/1/fwd sky/v1/jobs/submit \
	sky/v1/board/sky-claim/caps foo; do
	cpub $CL -V 5 -i sky:n1 -q 1 -t "$t" -m x 2>"$W/deny.err"
	grep -q 'Not authorized' "$W/deny.err" || bad="$bad claim-listener:$t"
done
# a board on the claim listener gets nothing, not even its own topics
for t in sky/v1/board/b01/caps sky/v1/enroll/n1/csr sky/v1/job/j1/metrics/b01; do
	cpub $B1 -V 5 -q 1 -t "$t" -m x 2>"$W/deny.err"
	grep -q 'Not authorized' "$W/deny.err" || bad="$bad b01-on-claim-listener:$t"
done
# (the planner may write sky/v1/job/+/metrics/sky-planner: the board pattern grants it
# to every identity, and a user "deny" would also take away its read)
for t in sky/v1/board/b01/caps sky/v1/board/sky-planner/caps sky/v1/enroll/n1/csr \
	sky/v1/job/j1/stage/1/fwd sky/v1/jobs/submit sky/v1/jobs/sky-operator/submit foo \
	sky/v1/job/j1/stage/1/fwd/sky-planner sky/v1/job/j1/resp/sky-client-x/b01; do
	pub $PL -V 5 -q 1 -t "$t" -m x 2>"$W/deny.err"
	grep -q 'Not authorized' "$W/deny.err" || bad="$bad planner:$t"
done
# the operator: its own submit topic and nothing else
for t in sky/v1/jobs/sky-op-x/submit sky/v1/jobs/sky-operator/reply sky/v1/jobs/submit \
	sky/v1/job/j1/plan sky/v1/job/j1/metrics sky/v1/job/j1/metrics/sky-operator \
	sky/v1/job/j1/stage/1/fwd sky/v1/job/j1/stage/1/fwd/sky-operator \
	sky/v1/board/sky-operator/caps sky/v1/board/b01/cmd sky/v1/enroll/n1/cert foo; do
	pub $OP -V 5 -q 1 -t "$t" -m x 2>"$W/deny.err"
	grep -q 'Not authorized' "$W/deny.err" || bad="$bad operator:$t"
done
# and the grants the fleet needs still work (v5 reports no refusal)
for t in sky/v1/board/b01/status sky/v1/board/b01/heartbeat sky/v1/board/b01/plan-ack \
	sky/v1/board/b01/echo sky/v1/job/j1/metrics/b01 sky/v1/job/j1/stage/2/bwd/b01 \
	sky/v1/job/j1/resp/sky-client-x/b01 sky/v1/site/B/job/j1/stage/1/fwd/b01; do
	pub $B1 -V 5 -q 1 -t "$t" -m x 2>"$W/deny.err"
	grep -q 'Not authorized' "$W/deny.err" && bad="$bad b01-should-be-allowed:$t"
done
for t in sky/v1/job/j1/plan sky/v1/enroll/n1/cert sky/v1/board/b01/cmd sky/v1/jobs/sky-operator/reply \
	sky/v1/job/j1/resp/sky-client-x/sky-planner sky/v1/job/j1/replay/b01/sky-client-x; do
	pub $PL -V 5 -q 1 -t "$t" -m x 2>"$W/deny.err"
	grep -q 'Not authorized' "$W/deny.err" && bad="$bad planner-should-be-allowed:$t"
done
pub $OP -V 5 -q 1 -t sky/v1/jobs/sky-operator/submit -m x 2>"$W/deny.err"
grep -q 'Not authorized' "$W/deny.err" && bad="$bad operator-should-be-allowed:submit"
cpub $CL -V 5 -i sky:n1 -q 1 -t sky/v1/enroll/sky:n1/csr -m x 2>"$W/deny.err"
grep -q 'Not authorized' "$W/deny.err" && bad="$bad claim-should-be-allowed:csr"
[ -z "$bad" ] && pass acl_denies_everything_not_named || fail acl_denies_everything_not_named "$bad"

# Reads: the claim identity and a board get no plan and no other board's
# messages even when they subscribe to them. Each subscriber's end marker
# is a message it may read, published after the refused ones.
pub $PL -q 1 -r -t sky/v1/job/j1/plan -m retained-plan
OUT2="$W/sub2.out"
: >"$OUT2"
# shellcheck disable=SC2046
timeout 60 mosquitto_sub $(sky_mq_claim_tls $CL) -i sky:rd -v -t 'sky/v1/#' >"$OUT2" 2>&1 &
CPID=$!
OUT3="$W/sub3.out"
: >"$OUT3"
# shellcheck disable=SC2046
timeout 60 mosquitto_sub $(sky_mq_tls $B1) -v -t 'sky/v1/job/+/plan' -t 'sky/v1/board/b02/#' \
	>"$OUT3" 2>&1 &
BPID=$!
ready=1
i=0
while [ $i -lt 50 ]; do # the claim identity may read its own enrollment replies
	pub $PL -q 1 -t sky/v1/enroll/sky:rd/cert -m "claim-ready-$i"
	grep -q claim-ready "$OUT2" && break
	sleep 0.2
	i=$((i + 1))
done
grep -q claim-ready "$OUT2" || ready=0
# the board may read plans: its retained copy arriving shows it subscribed
wait_for retained-plan "$OUT3" || ready=0
pub $B2 -q 1 -t sky/v1/board/b02/caps -m b02-private-caps
pub $PL -q 1 -t sky/v1/board/b02/cmd -m b02-private-cmd
cpub $CL -i sky:n2 -q 1 -t sky/v1/enroll/sky:n2/csr -m claim-csr-private
pub $PL -q 1 -t sky/v1/enroll/sky:n2/cert -m claim-other-cert
pub $PL -q 1 -t sky/v1/enroll/sky:rd/cert -m claim-end
pub $PL -q 1 -t sky/v1/job/j2/plan -m board-end
wait_for claim-end "$OUT2" || ready=0
wait_for board-end "$OUT3" || ready=0
kill $CPID $BPID 2>/dev/null
wait $CPID $BPID 2>/dev/null
if [ $ready -eq 1 ] && ! grep -q 'b02-private' "$OUT3" && ! grep -q 'retained-plan' "$OUT2" &&
	! grep -q 'b02-private' "$OUT2" && ! grep -q 'claim-csr-private' "$OUT2" &&
	! grep -q 'claim-other-cert' "$OUT2"; then
	pass acl_reads_limited
else
	fail acl_reads_limited "ready=$ready board: $(tr '\n' '|' <"$OUT3") claim: $(tr '\n' '|' <"$OUT2")"
fi

# ---- max_packet_size -------------------------------------------------------------------
sky_broker_stop
SKY_BROKER_MAX_PACKET=4096 sky_broker_start || {
	fail max_packet_broker "could not start the small-packet broker"
	exit 1
}
P=$SKY_PKI_DIR
W=$SKY_BROKER_DIR
PL="$P/planner.crt $P/planner.key"
"$SKY" pki issue --dir "$P" --id b01 --state "$W/b01" >/dev/null &&
	"$SKY" pki issue --dir "$P" --id b02 --state "$W/b02" >/dev/null
B1="$W/b01/board.crt $W/b01/board.key"
B2="$W/b02/board.crt $W/b02/board.key"
big="$W/big"
head -c 8192 /dev/zero | tr '\0' 'Z' >"$big"
OUT="$W/sub.out"
if grep -q '^max_packet_size 4096$' "$P/mosquitto.conf" && sub_start $PL 'sky/v1/board/#' "$OUT"; then
	pub $B1 -q 1 -t sky/v1/board/b01/caps -f "$big" >/dev/null 2>&1
	pub $B1 -q 1 -t sky/v1/board/b01/caps -m small-ok
	if sub_end "$OUT" && grep -q small-ok "$OUT" && ! grep -q ZZZZZZZZ "$OUT"; then
		pass broker_refuses_packet_over_max_packet_size
	else
		fail broker_refuses_packet_over_max_packet_size "oversize delivered or small lost"
	fi
else
	fail broker_refuses_packet_over_max_packet_size "broker config or subscriber not ready"
fi

[ $fails -eq 0 ]
