#!/bin/sh
# Fine-tuning a Hugging Face checkpoint across the fleet, with the data
# where it lives (docs/data.md, "Fine-tuning across the fleet"): mosquitto,
# skyplan and 3 skyd; b1 holds the prepared set (ft_lib.sh: fortunes of
# three collections, a random checkpoint of the golden BERT's odd shapes with 4 layers, dropout 0.1) and is
# the data owner. `sky job submit --task train --model-dir D --dataset
# train --data-owner b1`: the boards probe at the config's shapes, the
# checkpoint goes to skyplan once and reaches each stage as its slice, b1
# reads its rows in sky train's order.
#  - the collected weights equal `sky train --model-dir D --data
#    train.skyds` with the same seed, batch, micro-batches, lr and steps,
#    byte for byte;
#  - two subscribers to everything they may read, an enrolled board outside
#    the job (bx: every job's stage frames and plans, as any board) and the
#    job's operator (everything skyplan relays to it: metrics, parts, last
#    state), see none of the rows' token id runs or the steps' labels;
#  - a set no board holds and a wrong --dataset-sha256 are still refused
#    with the reason.
set -u
cd "$(dirname "$0")/../.."
. tests/integration/fleet.sh
. tests/integration/ft_lib.sh
T=fleet_finetune
sky_fleet_begin $T
SUBS=""
trap 'sky_fleet_end $SUBS' EXIT
if [ ! -f /usr/share/games/fortunes/computers ]; then
	fail "${T}_fortunes" "no fortunes (tools/install-deps.sh installs them)"
	exit 0
fi
ft_setup "$W/ft" || { fail "${T}_setup" "$FT_ERR"; exit 1; }
# four layers (a data owner's U-shaped plan over 3 boards needs them), a checkpoint drawn
# at random for them, the set's vocabulary (the same tokenizer)
mkdir -p "$W/ft/m4"
cp "$W/ft/m/vocab.txt" "$W/ft/m4/"
python3 -c 'import json, sys; c = json.load(open(sys.argv[1])); c["num_hidden_layers"] = 4
json.dump(c, open(sys.argv[2], "w"), indent=1)' "$W/ft/m/config.json" "$W/ft/m4/config.json" &&
	python3 tools/hf_random_init.py "$W/ft/m4" --seed 4 >/dev/null ||
	{ fail "${T}_model"; exit 1; }
M="$W/ft/m4"
sky_fleet_start
sky_fleet_enroll b1 --dataset "train=$W/ft/train.skyds" --dataset "dev=$W/ft/dev.skyds"
sky_fleet_enroll b2
sky_fleet_enroll b3
N=3
sky_wait 60 sky_fleet_reported || fail "${T}_boards_report" "$(sky_fleet_json | head -c 300)"
"$SKY" pki issue --dir "$PKI" --id bx --state "$W/bx" >/dev/null 2>"$W/bx.err" ||
	fail "${T}_outsider_identity" "$(cat "$W/bx.err")"

TRAIN="--steps 6 --batch 4 --micro 2 --lr 0.001 --seed 3 --clip 1 --warmup 1"
# everything a board may read, and everything skyplan relays to the operator
mosquitto_sub $(sky_mq_tls "$W/bx/board.crt" "$W/bx/board.key") -q 1 -v -F '%t %x' -t '#' \
	>"$W/bx.sub" 2>"$W/bx.sub.err" &
SUBS="$!"
TOOLS_BR="127.0.0.1:$((SKY_BROKER_PORT + 1))"
mosquitto_sub -h 127.0.0.1 -p $((SKY_BROKER_PORT + 1)) --cafile "$PKI/ca.crt" \
	--cert "$PKI/operator.crt" --key "$PKI/operator.key" -i "sky:obs$$" -q 1 -v -F '%t %x' \
	-t 'sky/v1/jobs/#' >"$W/op.sub" 2>"$W/op.sub.err" &
SUBS="$SUBS $!"
sleep 0.5

"$SKY" job watch fa --pki "$PKI" --broker "$BR" --timeout 120 --json >"$W/fa.watch" 2>"$W/fa.watch.err" &
wpid=$!
sleep 0.5
# shellcheck disable=SC2086 # TRAIN is a word list
"$SKY" job submit --pki "$PKI" --broker "$BR" --job fa --min-boards 3 --task train --algo even \
	--sched 1f1b --optimizer adamw --model-dir "$M" --dataset train --data-owner b1 \
	--wait 60 $TRAIN >"$W/fa.submit" 2>&1 || fail "${T}_submitted" "$(cat "$W/fa.submit")"
wait $wpid
wrc=$?
[ $wrc -eq 0 ] && pass "${T}_job_ends" ||
	fail "${T}_job_ends" "watch rc $wrc: $(tail -3 "$W/fa.watch.err"); $(grep -h 'fa' "$W"/b*.log | tail -5)"
"$SKY" job collect fa --pki "$PKI" --broker "$BR" --out "$W/fa.safetensors" --timeout 30 \
	>"$W/fa.collect" 2>&1 || fail "${T}_collect" "$(cat "$W/fa.collect")"
sed -n 's/^ *stage *[0-9]* *\([A-Za-z0-9_.-]*\) *half-layers.*/\1/p' "$W/fa.submit" >"$W/fa.boards"
if [ "$(wc -l <"$W/fa.boards")" -eq 4 ] && [ "$(sort -u "$W/fa.boards" | wc -l)" -eq 3 ] &&
	[ "$(head -1 "$W/fa.boards")" = b1 ] &&
	[ "$(tail -1 "$W/fa.boards")" = b1 ]; then
	pass "${T}_plan_u_shaped_around_the_holder"
else
	fail "${T}_plan_u_shaped_around_the_holder" "$(tr '\n' ' ' <"$W/fa.boards")"
fi
# every stage started from the checkpoint's slice, fetched through the cache
nsl=$(grep -l "job fa: stage [0-9]* starts from the checkpoint's slice" "$W"/b[123].log | wc -l)
nbd=$(sort -u "$W/fa.boards" | wc -l)
[ "$nsl" -eq "$nbd" ] && [ "$nsl" -ge 2 ] && pass "${T}_every_board_starts_from_its_slice" ||
	fail "${T}_every_board_starts_from_its_slice" "$nsl of $nbd boards"

# shellcheck disable=SC2086
"$SKY" train --model-dir "$M" --data "$W/ft/train.skyds" --optim adamw $TRAIN \
	--save-dir "$W/ref" >"$W/ref.out" 2>&1 || fail "${T}_sky_train" "$(tail -3 "$W/ref.out")"
if [ -s "$W/fa.safetensors" ] && cmp -s "$W/fa.safetensors" "$W/ref/model.safetensors"; then
	pass "${T}_final_weights_byte_equal_sky_train"
else
	fail "${T}_final_weights_byte_equal_sky_train" \
		"$(cmp "$W/fa.safetensors" "$W/ref/model.safetensors" 2>&1 | head -1)"
fi

# the Hugging Face directory of the job, as sky train --save-dir writes it
"$SKY" job collect fa --pki "$PKI" --broker "$BR" --out-dir "$W/fa.hf" --model-dir "$M" \
	--timeout 30 >"$W/fa.collect2" 2>&1 || fail "${T}_collect_out_dir" "$(cat "$W/fa.collect2")"
if cmp -s "$W/fa.hf/model.safetensors" "$W/ref/model.safetensors" &&
	cmp -s "$W/fa.hf/config.json" "$W/ref/config.json" && cmp -s "$W/fa.hf/vocab.txt" "$W/ft/m/vocab.txt" &&
	grep -q '"computers"' "$W/fa.hf/config.json"; then
	pass "${T}_collect_out_dir_equals_sky_train_save_dir"
else
	fail "${T}_collect_out_dir_equals_sky_train_save_dir" \
		"$(ls "$W/fa.hf" 2>&1 | tr '\n' ' '); $(diff "$W/fa.hf/config.json" "$W/ref/config.json" 2>&1 | head -4)"
fi
# a watch of the job once it has ended: its last state, at once
"$SKY" job watch fa --pki "$PKI" --broker "$BR" --timeout 20 >"$W/fa.watch2" 2>&1
wrc=$?
if [ $wrc -eq 0 ] && grep -q "^job fa ended: done at step 6" "$W/fa.watch2"; then
	pass "${T}_watch_of_an_ended_job_prints_its_last_state"
else
	fail "${T}_watch_of_an_ended_job_prints_its_last_state" "rc $wrc: $(cat "$W/fa.watch2")"
fi

sleep 1 # the last messages reach the subscribers
# the rows' token id runs (each row's first 8 ids as int32, little-endian)
# and each step's labels (batch x micro of them), as the set holds them
python3 - "$W/ft/train.skyds" >"$W/rows.hex" <<'PY'
import json, struct, sys
b = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n])
base = 8 + n
def t(name):
    o = h[name]["data_offsets"]
    return b[base + o[0]:base + o[1]]
ids, labels = t("input_ids"), t("labels")
seq = h["input_ids"]["shape"][1]
for r in range(h["input_ids"]["shape"][0]):
    print(ids[r * seq * 4:(r * seq + 8) * 4].hex())
# every run of 8 consecutive labels (a step of 4 x 2 reads 8 rows; their
# order is the shuffle's, so every window of the set in any order is not
# checkable: these are the set's own runs, a leak of the file's bytes)
for r in range(0, h["labels"]["shape"][0] - 8):
    run = labels[r * 4:(r + 8) * 4]
    if len(set(run)) > 1:
        print(run.hex())
PY
echo "MEASURE ${T}_patterns $(wc -l <"$W/rows.hex") messages bx $(wc -l <"$W/bx.sub") operator $(wc -l <"$W/op.sub")"
nfa=$(grep -c '^sky/v1/job/fa/' "$W/bx.sub")
nop=$(grep -c '/job/fa/' "$W/op.sub")
printf 'x 00%s00\n' "$(sed -n 5p "$W/rows.hex")" | cut -d' ' -f2 | grep -q -F -f "$W/rows.hex" ||
	fail "${T}_search_works" "a planted token run was not found"
hits=$(cut -d' ' -f2- "$W/bx.sub" "$W/op.sub" | grep -c -F -f "$W/rows.hex")
if [ "$nfa" -gt 50 ] && [ "$nop" -gt 0 ] && [ "$hits" -eq 0 ]; then
	pass "${T}_no_token_ids_or_labels_on_the_wire"
else
	fail "${T}_no_token_ids_or_labels_on_the_wire" "$hits hits; job messages seen: bx $nfa, operator $nop"
fi

# refusals stay
sub() {
	_n=$1
	shift
	"$SKY" job submit --pki "$PKI" --broker "$BR" --job "$_n" --task train --steps 2 \
		--model-dir "$M" --ack-timeout 20 --wait 10 "$@" >"$W/$_n.out" 2>&1
}
sub fn --dataset nosuch
rc=$?
[ $rc -ne 0 ] && grep -qF "job fn refused: no online board holds data set 'nosuch'" "$W/fn.out" &&
	pass "${T}_refused_no_board_holds" || fail "${T}_refused_no_board_holds" "rc $rc: $(cat "$W/fn.out")"
devsha=$(sha256sum "$W/ft/dev.skyds" | cut -d' ' -f1)
sub fs --dataset train --dataset-sha256 "$devsha"
rc=$?
[ $rc -ne 0 ] && grep -qF "data set 'train' (on b1) is not the file the job names" "$W/fs.out" &&
	pass "${T}_refused_wrong_sha256" || fail "${T}_refused_wrong_sha256" "rc $rc: $(cat "$W/fs.out")"
exit 0
