#!/bin/sh
# A federated job over a real broker (docs/federation.md): three owner
# boards, each with its own shard of a fortunes set (sky data split), each
# training alone on it; skyplan runs the rounds. Checked:
#   - the final global model equals `sky fed ref` (every owner's local steps
#     and the FedAvg mean computed in one process) byte for byte, while an
#     adversarial owner replays a chunk, sends another round's and one past
#     the model's end, and a board that is no owner sends one: each refused
#     with its reason (the watch lines count them) and the round goes on;
#   - one owner with E = all the steps equals `sky train` byte for byte;
#   - an owner stopped before it sends: with --deadline-s and --straggler
#     close every round closes with the other two, the watch names it out,
#     and the model equals the reference of the two;
#   - FedAdam at the server and FedProx on the owners equal the reference;
#   - refusals at submit: an unknown owner, an owner without that set, a
#     shard whose labels differ;
#   - a wire observer with a board's identity sees the rounds and the global
#     model but no owner's update and no row of token ids.
set -u
cd "$(dirname "$0")/../.."
. tests/integration/fleet.sh
. tests/integration/ft_lib.sh
T=fed_job
sky_fleet_begin $T
if [ ! -f /usr/share/games/fortunes/computers ]; then
	fail "${T}_fortunes" "no fortunes (tools/install-deps.sh installs them)"
	exit 0
fi
ft_setup "$W/ft" || { fail "${T}_setup" "$FT_ERR"; exit 1; }
"$SKY" data split "$W/ft/train.skyds" --owners 3 --seed 1 --out-prefix "$W/shard" >/dev/null 2>"$W/split.err" ||
	{ fail "${T}_split" "$(cat "$W/split.err")"; exit 1; }
# a set with two labels only, under the same name on b4
python3 - "$W/ft/train.tsv" "$W/two.tsv" <<'PY'
import sys
rows = open(sys.argv[1], encoding="utf-8").read().splitlines()
out = [rows[0]] + [r for r in rows[1:] if not r.endswith("\tliterature")]
open(sys.argv[2], "w", encoding="utf-8").write("\n".join(out) + "\n")
PY
"$SKY" data prepare --model-dir "$W/ft/m" --input "$W/two.tsv" --out "$W/two.skyds" --seq 24 \
	--quiet >/dev/null 2>"$W/two.err" || { fail "${T}_two_labels" "$(cat "$W/two.err")"; exit 1; }

sky_fleet_start
sky_fleet_enroll b1 --dataset "train=$W/shard-0.skyds"
sky_fleet_enroll b2 --dataset "train=$W/shard-1.skyds"
export SKY_FED_ADVERSARY=1 # b3 and b4 only (agent_fed.c): bad chunks to be refused
sky_fleet_enroll b3 --dataset "train=$W/shard-2.skyds"
sky_fleet_enroll b4 --dataset "train=$W/two.skyds"
unset SKY_FED_ADVERSARY
sky_fleet_enroll b5 # only for its identity: the wire observer's below
N=5
sky_wait 60 sky_fleet_reported || { fail "${T}_report" "$(sky_fleet_json | head -c 300)"; exit 1; }

COMMON="--task train --model-dir $W/ft/m --dataset train --batch 4 --micro 2 --lr 1e-3 --seed 1"
sub() { # NAME OPTION...: submit a federated job, output to $W/NAME.out, its exit code
	_n=$1
	shift
	# shellcheck disable=SC2086
	"$SKY" job submit --pki "$PKI" --broker "$BR" --job "$_n" --federated $COMMON \
		--ack-timeout 30 "$@" >"$W/$_n.out" 2>&1
}
run_fed() { # NAME OPTION...: watch, submit, wait for the end, collect to $W/NAME.hf
	_n=$1
	shift
	"$SKY" job watch "$_n" --federated --json --pki "$PKI" --broker "$BR" --timeout 240 \
		>"$W/$_n.watch" 2>"$W/$_n.watch.err" &
	_w=$!
	sleep 1 # metrics are not retained: the watch subscribes first
	sub "$_n" "$@" || { fail "${T}_${_n}_submitted" "$(cat "$W/$_n.out")"; kill $_w; return 1; }
	wait $_w
	_rc=$?
	"$SKY" job collect "$_n" --out-dir "$W/$_n.hf" --pki "$PKI" --broker "$BR" --timeout 30 \
		>"$W/$_n.collect" 2>&1 || { fail "${T}_${_n}_collect" "$(cat "$W/$_n.collect")"; return 1; }
	return $_rc
}
same() { # NAME A B: the two model files have the same bytes
	if cmp -s "$2/model.safetensors" "$3/model.safetensors"; then
		pass "${T}_$1"
	else
		fail "${T}_$1" "$(sha256sum "$2/model.safetensors" "$3/model.safetensors" 2>&1)"
	fi
}

# ---- refusals at submit ----------------------------------------------------------
refused() { # NAME TEXT OPTION...
	_n=$1
	_t=$2
	shift 2
	sub "$_n" --rounds 1 --local-steps 1 "$@"
	_rc=$?
	if [ $_rc -ne 0 ] && grep -qF -- "$_t" "$W/$_n.out"; then
		pass "${T}_$_n"
	else
		fail "${T}_$_n" "rc $_rc: $(cat "$W/$_n.out")"
	fi
}
refused refused_unknown_owner "owner b9 is not a board of this fleet" --owners b1,b9
refused refused_no_such_set "owner b1 holds no data set named nosuch" --owners b1 --dataset nosuch
refused refused_labels_disagree "the shards must come from one set" --owners b1,b4
refused refused_secure_not_built "secure aggregation is not in the round loop yet" \
	--owners b1,b2 --secure-agg

# ---- three owners, against the reference ---------------------------------------------
# a wire observer with b5's identity (a board's rights; its skyd stopped, so
# that the broker does not trade one connection of that CN for the other) on
# everything of the job it may read
kill "$PID_b5"
# shellcheck disable=SC2046
timeout 200 mosquitto_sub $(sky_mq_tls "$W/b5/state/board.crt" "$W/b5/state/board.key") \
	-t 'sky/v1/job/f3/#' -F '%t %x' >"$W/observer.txt" 2>&1 &
OBS=$!
PIDS="$PIDS $OBS"
sleep 1
if run_fed f3 --owners b1,b2,b3 --rounds 3 --local-steps 2 &&
	[ "$(grep -c '"fed_round"' "$W/f3.watch")" -eq 3 ]; then
	pass "${T}_three_owners_three_rounds"
else
	fail "${T}_three_owners_three_rounds" "$(cat "$W/f3.watch" "$W/f3.watch.err" | head -c 800)"
fi
"$SKY" fed ref --model-dir "$W/ft/m" --shards "$W/shard-0.skyds,$W/shard-1.skyds,$W/shard-2.skyds" \
	--rounds 3 --local-steps 2 --batch 4 --micro 2 --lr 1e-3 --seed 1 --out-dir "$W/ref3" \
	>"$W/ref3.out" 2>&1 || fail "${T}_ref3" "$(cat "$W/ref3.out")"
same global_model_equals_reference_fedavg "$W/f3.hf" "$W/ref3"
# the refusals, counted by reason in the rounds' lines
if python3 - "$W/f3.watch" <<'PY'; then
import json, sys
tot = {}
for l in open(sys.argv[1]):
    d = json.loads(l)
    if "fed_round" not in d:
        continue
    assert d["owners_in"] == ["b1", "b2", "b3"], d
    for k, v in d["refused"].items():
        tot[k] = tot.get(k, 0) + v
for k in ("fed_replay", "fed_wrong_round", "fed_wrong_shape"):
    assert tot.get(k, 0) == 3, (k, tot)  # b3's, once a round
assert tot.get("fed_not_owner", 0) >= 3, tot  # b4's, at least once a round
PY
	pass "${T}_bad_chunks_refused_by_reason"
else
	fail "${T}_bad_chunks_refused_by_reason" "$(head -c 800 "$W/f3.watch")"
fi
kill $OBS 2>/dev/null
if python3 - "$W/observer.txt" "$W/shard-0.skyds" "$W/shard-1.skyds" "$W/shard-2.skyds" <<'PY'; then
import json, struct, sys
lines = [l.split(" ", 1) for l in open(sys.argv[1]).read().splitlines() if " " in l]
topics = {t for t, _ in lines}
assert any(t.endswith("/fedround") for t in topics), topics
assert any(t.endswith("/fedmodel") for t in topics), topics
assert not any("/fedupd/" in t for t in topics), topics  # an owner's update: only the planner reads it
wire = " ".join(h for _, h in lines)
for path in sys.argv[2:]:
    b = open(path, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    hdr = json.loads(b[8:8 + n])
    t = hdr["input_ids"]
    seq = t["shape"][1]
    base = 8 + n + t["data_offsets"][0]
    for r in range(t["shape"][0]):
        row = b[base + 4 * seq * r: base + 4 * seq * (r + 1)]
        assert row.hex() not in wire, (path, r)
PY
	pass "${T}_observer_sees_no_update_and_no_rows"
else
	fail "${T}_observer_sees_no_update_and_no_rows" "$(cut -c1-120 "$W/observer.txt" | head -5)"
fi

# ---- one owner, E = all the steps: sky train ----------------------------------------
run_fed f1 --owners b1 --rounds 1 --local-steps 6 ||
	fail "${T}_one_owner_ran" "$(cat "$W/f1.watch" "$W/f1.watch.err" | head -c 600)"
# shellcheck disable=SC2086
"$SKY" train --model-dir "$W/ft/m" --data "$W/shard-0.skyds" --steps 6 --batch 4 --micro 2 \
	--lr 1e-3 --seed 1 --quiet --save-dir "$W/train1" >"$W/train1.out" 2>&1 ||
	fail "${T}_sky_train" "$(cat "$W/train1.out")"
same one_owner_equals_sky_train "$W/f1.hf" "$W/train1"

# ---- a straggler closed out by the deadline ------------------------------------------------
kill -STOP "$PID_b3"
if run_fed f2 --owners b1,b2,b3 --rounds 2 --local-steps 2 --deadline-s 4 --straggler close \
	--min-owners 2 && python3 - "$W/f2.watch" <<'PY'; then
import json, sys
r = [json.loads(l) for l in open(sys.argv[1]) if '"fed_round"' in l]
assert len(r) == 2, r
for d in r:
    assert d["owners_in"] == ["b1", "b2"] and d["owners_out"] == ["b3"], d
PY
	pass "${T}_straggler_closed_out"
else
	fail "${T}_straggler_closed_out" "$(cat "$W/f2.watch" "$W/f2.watch.err" | head -c 800)"
fi
kill -CONT "$PID_b3"
"$SKY" fed ref --model-dir "$W/ft/m" --shards "$W/shard-0.skyds,$W/shard-1.skyds" \
	--rounds 2 --local-steps 2 --batch 4 --micro 2 --lr 1e-3 --seed 1 --out-dir "$W/ref2" \
	>"$W/ref2.out" 2>&1 || fail "${T}_ref2" "$(cat "$W/ref2.out")"
same straggler_round_equals_reference_of_the_rest "$W/f2.hf" "$W/ref2"

# ---- the server's FedAdam and FedProx on the owners, against the reference -----------------
run_fed f4 --owners b1,b2 --rounds 2 --local-steps 2 --server-opt fedadam --prox-mu 0.1 ||
	fail "${T}_fedadam_ran" "$(cat "$W/f4.watch" "$W/f4.watch.err" | head -c 600)"
"$SKY" fed ref --model-dir "$W/ft/m" --shards "$W/shard-0.skyds,$W/shard-1.skyds" \
	--rounds 2 --local-steps 2 --batch 4 --micro 2 --lr 1e-3 --seed 1 --server-opt fedadam \
	--prox-mu 0.1 --out-dir "$W/ref4" >"$W/ref4.out" 2>&1 || fail "${T}_ref4" "$(cat "$W/ref4.out")"
same fedadam_and_fedprox_equal_reference "$W/f4.hf" "$W/ref4"
