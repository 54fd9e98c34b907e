# A serving fleet under test (POSIX sh; source it after fleet.sh): the
# model and its expected logits, boards tracked by pid file, the newest
# plan's stages, and clients that keep asking and whose every answer is
# checked. Uses $W, $SKY, $PKI, $BR from fleet.sh and $JOB from the test.
#
#   sky_serve_model NAME LAYERS  a `tiny` model of LAYERS layers trained 3
#                       steps and quantised ($W/q.safetensors), four rows of
#                       input ($W/rows.safetensors) and their logits on one
#                       board (`sky eval --precision int8`, one line each in
#                       $W/want.logits); fails NAME_model_made or
#                       NAME_sky_eval and returns 1
#   sky_serve_fleet NAME ID...  the broker, a client identity `t` (the
#                       broker re-reads its ACL), skyplan, and boards ID...
#                       issued and started (sky_serve_board), waiting until
#                       skyplan has them all online; fails NAME_client,
#                       NAME_skyplan_starts, NAME_board_issued or
#                       NAME_boards_online and returns 1
#   sky_serve_board ID  skyd ID (no link probe), pid in $W/pid.ID only: a
#                       board the test kills leaves no stale pid behind
#   sky_serve_online    how many boards skyplan has online
#   sky_serve_stage_board K  the board of stage K in the newest epoch its
#                       boards accepted (from their logs)
#   sky_serve_ask       one `sky infer` of the four rows in the background,
#                       id c$N (N counts them), answers in $W/out/$N.json
#   sky_serve_flow SECONDS  a new sky_serve_ask every 0.15 s
#   sky_serve_check NAME FROM TO  every sky infer c(FROM+1)..cTO ended with
#                       four answers, each once, each with its row's
#                       logits: PASS/FAIL NAME_every_request_answered_once_
#                       with_sky_evals_logits; sets SERVE_TOTAL (requests)
#                       and SERVE_DUPS (duplicate answers the clients dropped)

sky_serve_model() {
	"$SKY" train --model tiny --layers "$2" --steps 3 --seed 2 --save "$W/m.safetensors" >"$W/train.log" 2>&1 &&
		"$SKY" quantize --in "$W/m.safetensors" --out "$W/q.safetensors" --calib 2 >"$W/quant.log" 2>&1 ||
		{ fail "$1_model_made" "$(tail -2 "$W/train.log" "$W/quant.log")"; return 1; }
	python3 - "$W/rows.safetensors" <<'EOF'
import json, struct, sys
ids = [[5, 9, 33, 2, 17, 40, 8, 1], [63, 1, 12, 7, 7, 7, 1, 30], [42, 3, 3, 3, 3, 3, 3, 3],
       [3, 1, 4, 1, 5, 9, 2, 6]]
mask = [[1] * 8, [1, 1, 1, 0, 1, 1, 1, 1], [1] * 8, [1, 1, 1, 1, 1, 1, 0, 0]]
data = b"".join(struct.pack("<8i", *r) for r in ids)
mdat = b"".join(struct.pack("<8i", *r) for r in mask)
hdr = json.dumps({"input_ids": {"dtype": "I32", "shape": [4, 8], "data_offsets": [0, len(data)]},
                  "attention_mask": {"dtype": "I32", "shape": [4, 8],
                                     "data_offsets": [len(data), len(data) + len(mdat)]}}).encode()
hdr += b" " * (-len(hdr) % 8)
open(sys.argv[1], "wb").write(struct.pack("<Q", len(hdr)) + hdr + data + mdat)
EOF
	"$SKY" eval --weights "$W/q.safetensors" --precision int8 --input "$W/rows.safetensors" \
		>"$W/want.jsonl" 2>"$W/want.err" && [ "$(grep -c logits "$W/want.jsonl")" = 4 ] ||
		{ fail "$1_sky_eval" "$(cat "$W/want.err")"; return 1; }
	sed 's/.*"logits":\(\[[^]]*\]\).*/\1/' "$W/want.jsonl" >"$W/want.logits"
}

sky_serve_fleet() {
	_name=$1
	shift
	sky_fleet_broker
	"$SKY" pki client --dir "$PKI" t >"$W/client.out" 2>&1 || { fail "${_name}_client" "$(cat "$W/client.out")"; return 1; }
	kill -HUP "$SKY_BROKER_PID" # mosquitto reads the ACL with the client's lines
	sky_fleet_planner || { fail "${_name}_skyplan_starts" "$(tail -3 "$W/skyplan.log")"; return 1; }
	for _b in "$@"; do
		"$SKY" pki issue --dir "$PKI" --id "$_b" --state "$W/$_b/state" >/dev/null 2>"$W/$_b.issue" ||
			{ fail "${_name}_board_issued" "$(cat "$W/$_b.issue")"; return 1; }
		sky_serve_board "$_b"
	done
	_sky_serve_all_online() { [ "$(sky_serve_online)" -ge "$#" ]; }
	sky_wait 120 _sky_serve_all_online "$@" ||
		{ fail "${_name}_boards_online" "$(sky_serve_online) of $# online"; return 1; }
}

sky_serve_board() {
	sky_fleet_skyd "$1" --no-link-probe
	echo $! >"$W/pid.$1"
	PIDS="" # tracked by its pid file alone
}

sky_serve_online() {
	"$SKY" fleet status --state "$W/skyplan" --json 2>/dev/null | grep -o '"state":"online"' | wc -l
}

sky_serve_stage_board() {
	_e=$(grep -h "plan $JOB epoch [0-9]* accepted: stage $1 of" "$W"/b*.log 2>/dev/null |
		sed -n "s/.*plan $JOB epoch \([0-9]*\) accepted:.*/\1/p" | sort -n | tail -1)
	[ -n "$_e" ] || return 1
	grep -l "plan $JOB epoch $_e accepted: stage $1 of" "$W"/b*.log | head -1 | sed 's|.*/\(b[0-9]*\)\.log|\1|'
}

N=0
sky_serve_ask() {
	N=$((N + 1))
	mkdir -p "$W/out"
	"$SKY" infer --pki "$PKI/clients/t" --broker "$BR" --job "$JOB" --input "$W/rows.safetensors" \
		--id "c$N" --timeout "${SERVE_TIMEOUT:-120}" --json >"$W/out/$N.json" 2>"$W/out/$N.err" &
	echo $! >"$W/pid.c$N"
}

sky_serve_flow() {
	_end=$(($(date +%s) + $1))
	while [ "$(date +%s)" -lt "$_end" ]; do
		sky_serve_ask
		sleep 0.15
	done
}

sky_serve_check() {
	_name=$1 _to=$3
	_bad=0 SERVE_DUPS=0 _ci=$2
	while [ $_ci -lt "$_to" ]; do
		_ci=$((_ci + 1))
		_pid=$(cat "$W/pid.c$_ci" 2>/dev/null)
		# every wait is bounded: sky infer's own --timeout
		[ -n "$_pid" ] && { wait "$_pid"; _rc=$?; rm -f "$W/pid.c$_ci"; } || _rc=0
		_f="$W/out/$_ci.json"
		_r=0
		while [ $_r -lt 4 ]; do
			_n=$(grep -c "\"id\":\"c$_ci-$_r\"" "$_f")
			_got=$(grep "\"id\":\"c$_ci-$_r\"" "$_f" | grep '"ok":true' | sed 's/.*"logits":\(\[[^]]*\]\).*/\1/')
			_want=$(sed -n "$((_r + 1))p" "$W/want.logits")
			if [ "$_rc" != 0 ] || [ "$_n" != 1 ] || [ "$_got" != "$_want" ]; then
				_bad=$((_bad + 1))
				[ $_bad -le 3 ] && echo "  $_name: c$_ci-$_r rc $_rc, $_n answer(s): $(grep "\"id\":\"c$_ci-$_r\"" "$_f" | head -c 200) $(head -c 200 "$W/out/$_ci.err")"
			fi
			_r=$((_r + 1))
		done
		_d=$(sed -n 's/.*: \([0-9]*\) duplicate response.*/\1/p' "$W/out/$_ci.err")
		SERVE_DUPS=$((SERVE_DUPS + ${_d:-0}))
	done
	SERVE_TOTAL=$(((_to - $2) * 4))
	[ $_bad -eq 0 ] && [ "$SERVE_TOTAL" -gt 0 ] && pass "${_name}_every_request_answered_once_with_sky_evals_logits" ||
		fail "${_name}_every_request_answered_once_with_sky_evals_logits" "$_bad of $SERVE_TOTAL requests wrong"
}
