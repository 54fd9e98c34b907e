#!/bin/sh
# The fleet serves: mosquitto (tests/integration/broker.sh) and 4 skyd
# boards serve an int8 model made here (`sky train --save` a few steps of
# tiny, `sky quantize`). Each board finds its slice (`sky slice`) in its
# cache (<state>/slices/<sha256>.safetensors, where deployment puts it)
# and runs its half-layers; a client identity publishes requests and reads
# the responses with mosquitto_pub/sub. Under several signed infer plans
# (even, cuts in the middle of layers, 1, 2 and 4 threads per board, and
# b4 running the aarch64 build under qemu when it is there: the last stage
# (pooler and classifier), a middle one, the first (embeddings); the int8
# layers and the fp32 ends, sky_ends.h, are the same bits on both) every
# request's logits equal `sky eval --precision int8 --tokens` on one board,
# bit for bit. Each bad request gets its code (malformed, wrong_length,
# bad_token, bad_mask, oversize, not_allowed, busy) and the fleet still
# answers a good one after them.
#
# The first plan is submitted through skyplan (`sky job submit --task
# infer --weights`: upload, plan on int8 times, slices sent to the boards'
# caches). The others pin what submit does not choose (cuts in the middle
# of layers, where the qemu board sits, threads per board): skyplan is
# stopped and the test signs them with the planner key, slices placed in
# the caches by `sky slice`. Until `sky pki client` is merged, the client
# certificates are made with the fleet CA (openssl), with their ACL lines.
#
# PASS/FAIL lines, MEASURE lines; bounded (every wait has a deadline).
set -u
cd "$(dirname "$0")/../.."
. tests/integration/fleet.sh
sky_fleet_begin serve
ARM=build/generic-aarch64/bin/skyd
QEMU=""
command -v qemu-aarch64 >/dev/null 2>&1 && [ -x "$ARM" ] && QEMU="timeout -s KILL 600 qemu-aarch64 -L / -cpu max"

# ---- the model: a few training steps, quantised -----------------------------
"$SKY" train --model tiny --layers 4 --steps 3 --seed 2 --save "$W/m.safetensors" >"$W/train.log" 2>&1 &&
	"$SKY" quantize --in "$W/m.safetensors" --out "$W/q.safetensors" --calib 2 >"$W/quant.log" 2>&1 ||
	{ fail serve_model_made "$(tail -2 "$W/train.log" "$W/quant.log")"; exit 1; }

sky_fleet_broker

# ---- a client identity (CN sky-client-t, and sky-client-u not on the plans'
# list), its ACL lines, and the broker restarted to read them ---------------------
client_cert() { # NAME
	openssl ecparam -name prime256v1 -genkey -noout -out "$W/$1.key" 2>/dev/null &&
		openssl req -new -key "$W/$1.key" -subj "/CN=$1" -out "$W/$1.csr" 2>/dev/null &&
		openssl x509 -req -in "$W/$1.csr" -CA "$PKI/ca.crt" -CAkey "$PKI/ca.key" \
			-CAcreateserial -days 2 -sha256 -out "$W/$1.crt" 2>/dev/null
}
for c in sky-client-t sky-client-u; do
	client_cert $c || { fail serve_client_cert "openssl failed for $c"; exit 1; }
	# on the tools listener (the claim listener's ACL), as `sky pki client` writes it
	printf '\nuser %s\ntopic write sky/v1/job/+/req/+/%s\ntopic read sky/v1/job/+/resp/%s/+\ntopic read sky/v1/job/+/plan\n' \
		$c $c $c >>"$PKI/acl-claim"
done
sky_broker_restart || { fail serve_broker_restart "mosquitto did not restart"; exit 1; }

# ---- four boards (b4 the aarch64 build under qemu when it is there) --------------
for i in 1 2 3 4; do
	"$SKY" pki issue --dir "$PKI" --id "b$i" --state "$W/b$i/state" >/dev/null 2>"$W/b$i.issue" ||
		fail serve_board_issued "$(cat "$W/b$i.issue")"
done
SKY_FLEET_SKYD_OPTS="--keepalive 10 --model tiny --layers 4 --probe-seconds 1"
for i in 1 2 3 4; do
	SKYD=""
	[ $i = 4 ] && [ -n "$QEMU" ] && SKYD="$QEMU $ARM"
	sky_fleet_skyd "b$i" --no-link-probe
done
online() { grep -q "caps published\|reported caps\|connected" "$W/b$1.log"; }
for i in 1 2 3 4; do
	sky_wait 240 online $i || fail serve_board_online "b$i: $(tail -3 "$W/b$i.log")"
done
[ -n "$QEMU" ] && pass serve_qemu_board_runs || echo "SKIP serve_qemu_board (needs qemu-aarch64 and $ARM)"

# ---- plans ---------------------------------------------------------------------
EPOCH=0
CLIENTS='"sky-client-t"'
# plan JOB THREADS BATCH WAIT_MS QUEUE board:first:last...: cuts each
# stage's slice into its board's cache, signs the plan with the planner key
# and publishes it retained, as skyplan would
plan() {
	job=$1 threads=$2 batch=$3 wait_ms=$4 queue=$5
	shift 5
	EPOCH=$((EPOCH + 1))
	stages=""
	for s in "$@"; do
		b=${s%%:*} r=${s#*:}
		first=${r%%:*} last=${r#*:}
		out=$("$SKY" slice --weights "$W/q.safetensors" --first "$first" --last "$last" \
			--out "$W/$b/state/slices") || { fail serve_slice_cut "$s"; return 1; }
		sha=$(echo "$out" | sed 's/.*"sha256":"\([0-9a-f]*\)".*/\1/')
		bytes=$(echo "$out" | sed 's/.*"bytes":\([0-9]*\).*/\1/')
		[ "$(sha256sum "$W/$b/state/slices/$sha.safetensors" | cut -c1-64)" = "$sha" ] ||
			fail serve_slice_named_by_sha256 "$out"
		stages="$stages${stages:+,}{\"board\":\"$b\",\"first\":$first,\"last\":$last,\"in_flight\":1,\"arena_bytes\":0,\"slice\":{\"sha256\":\"$sha\",\"bytes\":$bytes,\"chunks\":1,\"chunk_bytes\":$bytes}}"
	done
	printf '{"v":1,"job":"%s","epoch":%d,"algo":"test","micro_batches":1,"model":{"name":"tiny","hidden":32,"heads":2,"ffn":64,"layers":4,"seq":16,"batch":4},"infer":{"batch":%d,"wait_ms":%d,"queue":%d,"clients":[%s],"predicted_seq_s":0,"threads":%d,"sealed":false},"stages":[%s]}' \
		"$job" $EPOCH "$batch" "$wait_ms" "$queue" "$CLIENTS" "$threads" "$stages" >"$W/$job.plan.json"
	"$SKY" pki sign --key "$PKI/planner.key" --cert "$PKI/planner.crt" "$W/$job.plan.json" \
		>"$W/$job.plan.env" || { fail serve_plan_signed "$job"; return 1; }
	mosquitto_pub $(sky_mq_tls "$PKI/planner.crt" "$PKI/planner.key") -q 1 -r \
		-t "sky/v1/job/$job/plan" -f "$W/$job.plan.env" || { fail serve_plan_published "$job"; return 1; }
	# the first stage takes requests once every stage is ready
	first_board=${1%%:*}
	echo "$first_board" >"$W/$job.first"
	sky_wait 120 grep -q "job $job: every stage is ready" "$W/$first_board.log" ||
		{ fail "${job}_fleet_ready" "$(grep "$job" "$W"/b*.log | tail -5)"; return 1; }
}

# The requests: id, tokens, mask (empty: none)
REQS="r1|1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16|
r2|5,9,33|
r3|63,0,12,7,7,7,1|1,1,1,0,1,1,1
r4|42|
r5|3,1,4,1,5,9,2,6,5,3|1,1,1,1,1,1,1,1,0,0"

# ask JOB CLIENT FILE: publishes FILE's requests (one JSON per line) as
# CLIENT to the job's first stage board ($W/JOB.first), one at a time, each
# after the answer to the one before, on the tools listener (client ids
# are kept there: the subscriber and the publisher may share the
# certificate), into $W/JOB.resp; answers come on resp/CLIENT/<sender>
ask() { # JOB CLIENT FILE [OUT, default $W/JOB.resp]
	job=$1 cl=$2 file=$3 out=${4:-$W/$1.resp}
	first=$(cat "$W/$job.first" 2>/dev/null)
	: >"$out"
	: >"$out.all"
	timeout 600 mosquitto_sub $(sky_mq_claim_tls "$W/$cl.crt" "$W/$cl.key") -q 1 \
		-t "sky/v1/job/$job/resp/$cl/+" >"$out.all" 2>>"$W/$job.rr.err" &
	spid=$!
	sleep 1 # subscribed (nothing to read back: its topics are its own)
	n=0
	while IFS= read -r line; do
		n=$((n + 1))
		mosquitto_pub $(sky_mq_claim_tls "$W/$cl.crt" "$W/$cl.key") -q 1 \
			-t "sky/v1/job/$job/req/$first/$cl" -m "$line" 2>>"$W/$job.rr.err"
		sky_wait 60 sh -c "[ \$(wc -l <'$out.all') -ge $n ]" || { echo "(no answer)" >>"$out.all"; }
	done <"$file"
	kill $spid 2>/dev/null
	wait $spid 2>/dev/null
	cp "$out.all" "$out"
}

# same_bits JOB: every request's logits from the fleet equal sky eval's
same_bits() {
	job=$1
	: >"$W/$job.reqs"
	echo "$REQS" | while IFS='|' read -r id tok mask; do
		if [ -n "$mask" ]; then
			printf '{"v":1,"id":"%s","tokens":[%s],"mask":[%s]}\n' "$id" "$tok" "$mask"
		else
			printf '{"v":1,"id":"%s","tokens":[%s]}\n' "$id" "$tok"
		fi
	done >"$W/$job.reqs"
	ask "$job" sky-client-t "$W/$job.reqs"
	bad=0
	for id in r1 r2 r3 r4 r5; do
		line=$(echo "$REQS" | grep "^$id|")
		tok=$(echo "$line" | cut -d'|' -f2)
		mask=$(echo "$line" | cut -d'|' -f3)
		want=$("$SKY" eval --weights "$W/q.safetensors" --precision int8 --tokens "$tok" \
			${mask:+--mask "$mask"} | sed 's/.*"logits":\(\[[^]]*\]\).*/\1/')
		got=$(grep "\"id\":\"$id\"" "$W/$job.resp" | sed 's/.*"logits":\(\[[^]]*\]\).*/\1/')
		if [ -z "$want" ] || [ "$want" != "$got" ]; then
			bad=$((bad + 1))
			echo "  $job $id: fleet '$got', sky eval '$want'"
		fi
	done
	if [ $bad -eq 0 ]; then
		pass "${job}_logits_bit_exact_with_sky_eval"
	else
		fail "${job}_logits_bit_exact_with_sky_eval" "$bad of 5 differ ($(head -c 300 "$W/$job.resp"))"
	fi
}

# ---- plan 0: submitted through skyplan (deploy's path), optimal split ------------
if sky_fleet_planner &&
	"$SKY" job submit --pki "$PKI" --broker "$BR" --job da --min-boards 4 --task infer \
		--weights "$W/q.safetensors" --algo optimal --wait 120 --json >"$W/da.submit" \
		2>"$W/da.submit.err"; then
	# (a stage names its site between board and first)
	first=$(grep -oE '\{"board":"b[0-9]",("site":"[^"]*",)?"first":0,' "$W/da.submit" | head -1 |
		sed 's/.*"board":"\(b[0-9]\)".*/\1/')
	echo "$first" >"$W/da.first"
	if [ -n "$first" ] && sky_wait 120 grep -q "job da: every stage is ready" "$W/$first.log"; then
		same_bits da
		echo "MEASURE da_plan $(grep -oE '\{"board":"b[0-9]",("site":"[^"]*",)?"first":[0-9]+,"last":[0-9]+' \
			"$W/da.submit" | sed 's/{"board":"\(b[0-9]\)",.*"first":\([0-9]*\),"last":\([0-9]*\)/\1:\2-\3/' |
			tr '\n' ' ')"
		grep -q "sealed frames" "$W/$first.log" && pass da_frames_sealed || fail da_frames_sealed "$(grep "job da" "$W/$first.log" | head -3)"
	else
		fail da_fleet_ready "first stage '$first': $(grep -h "job da\|plan da" "$W"/b*.log | tail -5)"
	fi
else
	fail da_submitted "$(tail -3 "$W/skyplan.log" "$W/da.submit.err")"
fi
kill $PLAN_PID 2>/dev/null
wait $PLAN_PID 2>/dev/null
PLAN_PID=""
EPOCH=$(cat "$STATE/epoch" 2>/dev/null || echo 0)

# ---- plan 1: even split, whole layers, 1 thread (b4 last) ------------------------
plan sa 1 4 5 64 b1:0:1 b2:2:3 b3:4:5 b4:6:7 && same_bits sa
head -1 "$W/sa.resp" | sed 's/^/  /'

# ---- plan 2: cuts in the middle of layers, 2 threads (b4 in the middle) ----------
plan sb 2 4 5 64 b1:0:2 b2:3:3 b4:4:6 b3:7:7 && same_bits sb
# ---- plan 3: other boards first, uneven, 4 threads (b4 first) ---------------------
plan sc 4 2 5 64 b4:0:0 b3:1:4 b1:5:6 b2:7:7 && same_bits sc

# the wire: one batch's int8 frame against the same frame with fp32
# activations (4 bytes instead of 1 for each of B*S*H = 4*16*32 values)
fb=$(sed -n 's/.*job sa epoch.*serving stage 0 of 4.* \([0-9]*\)-byte int8 frames.*/\1/p' "$W/b1.log" | head -1)
if [ -n "$fb" ]; then
	f32=$((fb + 3 * 4 * 16 * 32))
	echo "MEASURE serve_frame_bytes int8 $fb fp32 $f32 ratio $(awk "BEGIN{printf \"%.3f\", $fb / $f32}") per_request_int8 $((fb / 4))"
fi

# sky eval --input: the same logits as --tokens, row by row (a safetensors
# file with "input_ids" and "attention_mask", I32 (2, 4))
python3 - "$W/in.safetensors" <<'PY'
import json, struct, sys
ids = [[5, 9, 33, 0], [1, 2, 3, 4]]
mask = [[1, 1, 1, 0], [1, 1, 0, 1]]
a = b"".join(struct.pack("<i", v) for r in ids for v in r)
m = b"".join(struct.pack("<i", v) for r in mask for v in r)
h = json.dumps({"input_ids": {"dtype": "I32", "shape": [2, 4], "data_offsets": [0, 32]},
                "attention_mask": {"dtype": "I32", "shape": [2, 4], "data_offsets": [32, 64]}}).encode()
h += b" " * (-len(h) % 8)
open(sys.argv[1], "wb").write(struct.pack("<Q", len(h)) + h + a + m)
PY
"$SKY" eval --weights "$W/q.safetensors" --precision int8 --input "$W/in.safetensors" >"$W/in.eval" 2>"$W/in.eval.err"
{
	"$SKY" eval --weights "$W/q.safetensors" --precision int8 --tokens 5,9,33,0 --mask 1,1,1,0
	"$SKY" eval --weights "$W/q.safetensors" --precision int8 --tokens 1,2,3,4 --mask 1,1,0,1
} >"$W/tok.eval" 2>"$W/tok.eval.err"
[ "$(wc -l <"$W/in.eval")" -eq 2 ] && cmp -s "$W/in.eval" "$W/tok.eval" && pass eval_input_file_same_as_tokens ||
	fail eval_input_file_same_as_tokens "$(cat "$W/in.eval" "$W/tok.eval")"

# ---- bad requests, then a good one ----------------------------------------------
big=$(head -c 70000 /dev/zero | tr '\0' ' ')
{
	echo '{"v":1,"id":"m1","tokens":[1,2'
	echo '{"v":1,"id":"w1","tokens":[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17]}'
	echo '{"v":1,"id":"w2","tokens":[1,2,3],"mask":[1,1]}'
	echo '{"v":1,"id":"t1","tokens":[1,64,3]}'
	echo '{"v":1,"id":"k1","tokens":[1,2,3],"mask":[1,2,1]}'
	echo "{\"v\":1,\"id\":\"o1\",\"tokens\":[1]}$big"
	echo '{"v":1,"id":"g1","tokens":[5,9,33]}'
} >"$W/bad.reqs"
ask sc sky-client-t "$W/bad.reqs"
check_code() { # ID CODE WORDS [NAME]
	if grep "\"id\":\"$1\"" "$W/sc.resp" | grep "\"code\":\"$2\"" | grep -q "$3"; then
		pass "bad_request_answered_${4:-$2}"
	else
		fail "bad_request_answered_${4:-$2}" "$(grep "\"id\":\"$1\"" "$W/sc.resp" || echo none)"
	fi
}
check_code "" malformed "not JSON"
check_code w1 wrong_length "17 tokens"
check_code w2 wrong_length "mask has 2" wrong_length_mask
check_code t1 bad_token "token 1 is 64, the vocabulary has 64"
check_code k1 bad_mask "mask 1 is 2"
check_code "" oversize "the limit is 65536"
want=$("$SKY" eval --weights "$W/q.safetensors" --precision int8 --tokens 5,9,33 |
	sed 's/.*"logits":\(\[[^]]*\]\).*/\1/')
got=$(grep '"id":"g1"' "$W/sc.resp" | sed 's/.*"logits":\(\[[^]]*\]\).*/\1/')
[ -n "$want" ] && [ "$want" = "$got" ] && pass fleet_answers_after_bad_requests ||
	fail fleet_answers_after_bad_requests "got '$got', want '$want'"
# a client outside the plan's list
echo '{"v":1,"id":"u1","tokens":[1,2]}' >"$W/u.reqs"
ask sc sky-client-u "$W/u.reqs"
grep '"id":"u1"' "$W/sc.resp" | grep -q '"code":"not_allowed"' && pass bad_request_answered_not_allowed ||
	fail bad_request_answered_not_allowed "$(cat "$W/sc.resp")"

# ---- busy: one board, a queue of one request that waits 3 s for a batch to
# fill: a second request meanwhile (from the other client) is answered busy ---
CLIENTS='"sky-client-t","sky-client-u"'
if plan sd 1 4 3000 1 b1:0:7; then
	echo '{"v":1,"id":"q1","tokens":[5,9,33]}' >"$W/q1.reqs"
	echo '{"v":1,"id":"q2","tokens":[1]}' >"$W/q2.reqs"
	ask sd sky-client-u "$W/q1.reqs" "$W/sd.q1" &
	ap=$!
	sleep 1
	ask sd sky-client-t "$W/q2.reqs"
	wait $ap
	grep '"id":"q2"' "$W/sd.resp" | grep -q '"code":"busy"' && pass bad_request_answered_busy ||
		fail bad_request_answered_busy "$(cat "$W/sd.resp")"
	got=$(grep '"id":"q1"' "$W/sd.q1" | sed 's/.*"logits":\(\[[^]]*\]\).*/\1/')
	[ -n "$want" ] && [ "$want" = "$got" ] && pass one_board_plan_same_bits ||
		fail one_board_plan_same_bits "got '$got', want '$want'"
fi
exit $((fails > 0))
