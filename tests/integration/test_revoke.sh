#!/bin/sh
# Revoking a board: three skyd boards hold a job's plan; `sky pki revoke b2`
# puts b2's certificate on the CA's CRL (openssl verifies it against the CA
# and finds b2's serial), skyplan marks b2 revoked (sky fleet status),
# ignores what b2 still sends on the connection it holds, and re-plans the
# job over b1 and b3 (a new epoch they accept). mosquitto, sent SIGHUP by
# `sky pki revoke --broker-pid`, refuses b2's certificate in the TLS
# handshake while another board's passes; after a broker restart b2's skyd
# cannot get back in while b1 and b3 do. The CA refuses to enroll b2 again
# (the reply says it is revoked). Revoking again changes nothing; an unknown
# id is an error naming it. A board issued two certificates has both on the
# CRL after its revoke, and the broker refuses both.
#
# PASS/FAIL lines; bounded (every wait has a deadline).
set -u
cd "$(dirname "$0")/../.."
. tests/integration/fleet.sh
sky_fleet_begin revoke
sky_fleet_start
sky_fleet_boards 3 --no-link-probe

"$SKY" job submit --pki "$PKI" --broker "$BR" --model tiny --layers 4 --job j1 \
	--min-boards $N --algo even --wait 30 --json >"$W/job1.json" 2>"$W/job1.err"
if grep -q "\"accepted\":$N," "$W/job1.json"; then
	pass revoke_job_planned_over_3
else
	fail revoke_job_planned_over_3 "$(cat "$W/job1.json" "$W/job1.err" | head -c 300)"
fi
E1=$(cat "$STATE/epoch")

# an idle board identity for TLS checks (a running board's own certificate
# would close that board's connection)
"$SKY" pki issue --dir "$PKI" --id bx --state "$W/bx" >/dev/null 2>"$W/bx.err" ||
	fail revoke_control_identity "$(cat "$W/bx.err")"
pub_as() { # pub_as CERT KEY TOPIC: one QoS 1 publish, bounded
	timeout 15 mosquitto_pub $(sky_mq_tls "$1" "$2") -q 1 -t "$3" -m x >"$W/pub.out" 2>&1
}
[ "$(sky_fleet_field b2 state)" = online ] && pass revoke_b2_online_before ||
	fail revoke_b2_online_before "b2 is $(sky_fleet_field b2 state)"

# ---- revoke ---------------------------------------------------------------------
"$SKY" pki revoke --dir "$PKI" b2 --reason keyCompromise --broker-pid "$SKY_BROKER_PID" \
	>"$W/revoke.out" 2>&1
rc=$?
if [ $rc -eq 0 ] && grep -q "revoked board b2 for keyCompromise" "$W/revoke.out" &&
	grep -q "sent SIGHUP" "$W/revoke.out"; then
	pass revoke_command
else
	fail revoke_command "rc $rc: $(cat "$W/revoke.out")"
fi
if command -v openssl >/dev/null 2>&1; then
	serial=$(openssl x509 -in "$PKI/certs/b2.crt" -noout -serial | cut -d= -f2)
	openssl crl -in "$PKI/crl.pem" -noout -text -verify -CAfile "$PKI/ca.crt" \
		>"$W/crl.txt" 2>&1
	if grep -q "verify OK" "$W/crl.txt" && grep -q "Serial Number: $serial" "$W/crl.txt" &&
		grep -q "Key Compromise" "$W/crl.txt" && grep -q "Version 2" "$W/crl.txt"; then
		pass revoke_crl_verifies_with_openssl_and_lists_b2
	else
		fail revoke_crl_verifies_with_openssl_and_lists_b2 "serial $serial: $(head -c 600 "$W/crl.txt")"
	fi
else
	echo "SKIP revoke_crl_verifies_with_openssl_and_lists_b2 (no openssl)"
fi

# the planner drops it and re-plans the job over the other two
b2_revoked() { [ "$(sky_fleet_field b2 state)" = revoked ]; }
sky_wait 15 b2_revoked && grep -q "board b2 revoked (keyCompromise" "$W/skyplan.log" &&
	pass revoke_planner_marks_b2_revoked ||
	fail revoke_planner_marks_b2_revoked "b2 is '$(sky_fleet_field b2 state)'; $(grep -i revok "$W/skyplan.log" | head -3)"
"$SKY" fleet status --state "$STATE" >"$W/status.txt" 2>&1
grep -q "^b2  *revoked " "$W/status.txt" && grep -q "^1 revoked" "$W/status.txt" &&
	pass revoke_fleet_status_shows_it || fail revoke_fleet_status_shows_it "$(cat "$W/status.txt")"
replanned() {
	e1=$(sky_fleet_field b1 assignment.epoch)
	e3=$(sky_fleet_field b3 assignment.epoch)
	[ -n "$e1" ] && [ "$e1" = "$e3" ] && [ "${e1%.*}" -gt "$E1" ] &&
		[ "$(sky_fleet_field b1 assignment.ack)" = accepted ] &&
		[ "$(sky_fleet_field b3 assignment.ack)" = accepted ] &&
		[ -z "$(sky_fleet_field b2 assignment.job)" ]
}
if sky_wait 30 replanned && grep -q "job j1 epoch $E1: re-planning over the online boards (board b2 revoked" "$W/skyplan.log"; then
	pass revoke_job_replanned_without_b2
else
	fail revoke_job_replanned_without_b2 "b1 $(sky_fleet_field b1 assignment.epoch)/$(sky_fleet_field b1 assignment.ack) b3 $(sky_fleet_field b3 assignment.epoch)/$(sky_fleet_field b3 assignment.ack); $(grep -E 're-plan|j1 epoch' "$W/skyplan.log" | tail -3)"
fi
# b2 still holds the connection it opened before the CRL: what it sends is ignored
ignored() { [ "$(sky_fleet_json | sed -n 's/.*"revoked_ignored":\([0-9]*\).*/\1/p')" -gt 0 ] 2>/dev/null; }
sky_wait 10 ignored && grep -q "board b2 is revoked: its .* ignored" "$W/skyplan.log" &&
	pass revoke_b2_messages_ignored ||
	fail revoke_b2_messages_ignored "$(sky_fleet_json | grep -o '"revoked_ignored":[0-9]*')"

# ---- the broker: new handshakes with b2's certificate fail ---------------------
lines=$(wc -l <"$SKY_BROKER_LOG")
if ! pub_as "$W/b2/state/board.crt" "$W/b2/state/board.key" sky/v1/board/b2/echo &&
	tail -n +"$((lines + 1))" "$SKY_BROKER_LOG" | grep -q "certificate verify failed"; then
	pass revoke_broker_refuses_b2_handshake_after_sighup
else
	fail revoke_broker_refuses_b2_handshake_after_sighup "$(cat "$W/pub.out"); $(tail -n +"$((lines + 1))" "$SKY_BROKER_LOG" | head -5)"
fi
pub_as "$W/bx/board.crt" "$W/bx/board.key" sky/v1/board/bx/echo &&
	pass revoke_broker_admits_other_boards || fail revoke_broker_admits_other_boards "$(cat "$W/pub.out")"

# a restart cuts b2's old connection; it cannot come back, b1 and b3 do
lines=$(wc -l <"$SKY_BROKER_LOG")
b2lines=$(wc -l <"$W/b2.log")
sky_broker_restart || fail revoke_broker_restarts "$(tail -5 "$SKY_BROKER_LOG")"
online_again() {
	[ "$(sky_fleet_field b1 state)" = online ] && [ "$(sky_fleet_field b3 state)" = online ] &&
		grep -q "connected to .* as sky-planner" "$W/skyplan.log"
}
b2_refused() {
	tail -n +"$((b2lines + 1))" "$W/b2.log" | grep -qi "retrying" &&
		tail -n +"$((lines + 1))" "$SKY_BROKER_LOG" | grep -q "certificate verify failed"
}
sleep 1
if sky_wait 30 b2_refused && sky_wait 30 online_again && ! tail -n +"$((lines + 1))" "$SKY_BROKER_LOG" | grep -q "as b2 "; then
	pass revoke_b2_cannot_reconnect_others_do
else
	fail revoke_b2_cannot_reconnect_others_do "b1 $(sky_fleet_field b1 state) b3 $(sky_fleet_field b3 state); b2: $(tail -n 2 "$W/b2.log")"
fi
[ "$(sky_fleet_field b2 state)" = revoked ] && pass revoke_b2_stays_revoked ||
	fail revoke_b2_stays_revoked "b2 is $(sky_fleet_field b2 state)"

# ---- the CA refuses to enroll it again, over MQTT and offline ----------------------
tok=$("$SKY" pki token --dir "$PKI" --id b2 --ttl 300)
timeout 30 "$SKY_BIN/skyd" --enroll --claim "$tok" --id b2 --pki-ca "$PKI/claim/ca.crt" \
	--state "$W/b2again" --broker "$BR" --keepalive 2 --model tiny --layers 4 \
	--probe-seconds 1 --no-link-probe >"$W/b2again.log" 2>&1
rc=$?
if [ $rc -ne 0 ] && [ $rc -ne 124 ] && grep -q "is revoked" "$W/b2again.log" &&
	[ ! -f "$W/b2again/board.crt" ]; then
	pass revoke_enroll_again_refused_over_mqtt
else
	fail revoke_enroll_again_refused_over_mqtt "rc $rc: $(tail -3 "$W/b2again.log")"
fi
"$SKY" pki issue --dir "$PKI" --id b2 --state "$W/b2issue" >"$W/issue.out" 2>&1 &&
	fail revoke_issue_refused "issued: $(cat "$W/issue.out")" ||
	{ grep -q "refused: board 'b2' is revoked" "$W/issue.out" && pass revoke_issue_refused ||
		fail revoke_issue_refused "$(cat "$W/issue.out")"; }

# ---- again, and an unknown id ------------------------------------------------------
cp "$PKI/crl.pem" "$W/crl.before"
"$SKY" pki revoke --dir "$PKI" b2 >"$W/again.out" 2>&1
rc=$?
[ $rc -eq 0 ] && grep -q "already revoked" "$W/again.out" && cmp -s "$PKI/crl.pem" "$W/crl.before" &&
	[ "$(wc -l <"$PKI/revoked")" -eq 1 ] && pass revoke_again_changes_nothing ||
	fail revoke_again_changes_nothing "rc $rc: $(cat "$W/again.out")"
"$SKY" pki revoke --dir "$PKI" nosuch >"$W/unknown.out" 2>&1
rc=$?
[ $rc -eq 1 ] && grep -q "no board 'nosuch'" "$W/unknown.out" && pass revoke_unknown_id_named ||
	fail revoke_unknown_id_named "rc $rc: $(cat "$W/unknown.out")"
"$SKY" pki revoke --dir "$PKI" b1 --reason sometimes >"$W/reason.out" 2>&1
rc=$?
[ $rc -eq 2 ] && grep -q "unknown revocation reason 'sometimes'" "$W/reason.out" &&
	pass revoke_bad_reason_refused || fail revoke_bad_reason_refused "rc $rc: $(cat "$W/reason.out")"

# ---- a board with two certificates: both go on the CRL --------------------------
# bz is issued twice (the second time as after a lost key: a token bound to
# it); both certificates are valid and the broker admits both, until a
# revoke, after which it refuses both handshakes
"$SKY" pki issue --dir "$PKI" --id bz --state "$W/bz1" >/dev/null 2>"$W/bz1.err" &&
	"$SKY" pki issue --dir "$PKI" --id bz --state "$W/bz2" >/dev/null 2>"$W/bz2.err" ||
	fail revoke_two_certs_issued "$(cat "$W/bz1.err" "$W/bz2.err")"
s1=$(openssl x509 -in "$W/bz1/board.crt" -noout -serial | cut -d= -f2)
s2=$(openssl x509 -in "$W/bz2/board.crt" -noout -serial | cut -d= -f2)
[ -n "$s1" ] && [ -n "$s2" ] && [ "$s1" != "$s2" ] && pass revoke_two_certs_issued ||
	fail revoke_two_certs_issued "serials '$s1' '$s2'"
pub_as "$W/bz1/board.crt" "$W/bz1/board.key" sky/v1/board/bz/echo &&
	pub_as "$W/bz2/board.crt" "$W/bz2/board.key" sky/v1/board/bz/echo &&
	pass revoke_both_certs_admitted_before || fail revoke_both_certs_admitted_before "$(cat "$W/pub.out")"
"$SKY" pki revoke --dir "$PKI" bz --broker-pid "$SKY_BROKER_PID" >"$W/bz.out" 2>&1 ||
	fail revoke_bz "$(cat "$W/bz.out")"
openssl crl -in "$PKI/crl.pem" -noout -text -verify -CAfile "$PKI/ca.crt" >"$W/crl2.txt" 2>&1
grep -q "verify OK" "$W/crl2.txt" && grep -q "Serial Number: $s1" "$W/crl2.txt" &&
	grep -q "Serial Number: $s2" "$W/crl2.txt" && pass revoke_crl_lists_both_certs ||
	fail revoke_crl_lists_both_certs "$s1 $s2: $(grep Serial "$W/crl2.txt")"
for k in 1 2; do
	lines=$(wc -l <"$SKY_BROKER_LOG")
	if ! pub_as "$W/bz$k/board.crt" "$W/bz$k/board.key" sky/v1/board/bz/echo &&
		tail -n +"$((lines + 1))" "$SKY_BROKER_LOG" | grep -q "certificate verify failed"; then
		pass revoke_broker_refuses_bz_cert_$k
	else
		fail revoke_broker_refuses_bz_cert_$k "$(cat "$W/pub.out"); $(tail -n +"$((lines + 1))" "$SKY_BROKER_LOG" | head -3)"
	fi
done

for p in $PIDS $PLAN_PID; do kill "$p" 2>/dev/null; done
for p in $PIDS $PLAN_PID; do wait "$p" 2>/dev/null; done
PIDS=""
PLAN_PID=""
exit $fails
