#!/bin/sh
# A trained part over the broker's message limit reaches `sky job collect`
# in chunks (docs/data.md, "Fine-tuning across the fleet"): mosquitto,
# skyplan and 3 skyd fine-tune ft_lib.sh's model with its vocabulary padded
# to 110,000 entries, so the data owner's part (word embeddings and head)
# is 35 MB, over the 32 MiB a message may carry. The owner sends it as
# hashed chunks retained on part/b1/<i>, skyplan checks and relays each to
# the operator, and the collector rebuilds it:
#  - the owner logs the chunks and `sky job collect` gets every part;
#  - the collected weights equal `sky train` on one board, byte for byte;
#  - a board outside the plan sending a chunk under its own part topic is
#    refused by skyplan (part_not_stage), and the collect is unchanged.
set -u
cd "$(dirname "$0")/../.."
. tests/integration/fleet.sh
. tests/integration/ft_lib.sh
T=fleet_bigpart
sky_fleet_begin $T
trap 'sky_fleet_end' EXIT
if [ ! -f /usr/share/games/fortunes/computers ]; then
	fail "${T}_fortunes" "no fortunes (tools/install-deps.sh installs them)"
	exit 0
fi
ft_setup "$W/ft" || { fail "${T}_setup" "$FT_ERR"; exit 1; }
M="$W/ft/mb"
mkdir -p "$M"
# the same tokenizer's words, then [unused] entries up to 110000 (ids of
# real words unchanged), 4 layers for a data owner's U-shaped plan
python3 - "$W/ft/m" "$M" <<'PY' || { fail "${T}_model"; exit 1; }
import json, sys
src, dst = sys.argv[1], sys.argv[2]
words = open(f"{src}/vocab.txt", encoding="utf-8").read().split("\n")
words = [w for w in words if w]
words += [f"[unused{i}]" for i in range(110000 - len(words))]
open(f"{dst}/vocab.txt", "w", encoding="utf-8").write("\n".join(words) + "\n")
c = json.load(open(f"{src}/config.json"))
c["num_hidden_layers"] = 4
c["vocab_size"] = len(words)
json.dump(c, open(f"{dst}/config.json", "w"), indent=1)
PY
python3 tools/hf_random_init.py "$M" --seed 5 >/dev/null || { fail "${T}_init"; exit 1; }
"$SKY" data prepare --model-dir "$M" --input "$W/ft/train.tsv" --out "$W/train.skyds" --seq 24 \
	--quiet >/dev/null 2>"$W/prep.err" || { fail "${T}_prepare" "$(cat "$W/prep.err")"; exit 1; }
sky_fleet_start
sky_fleet_enroll b1 --dataset "train=$W/train.skyds"
sky_fleet_enroll b2
sky_fleet_enroll b3
N=3
sky_wait 60 sky_fleet_reported || fail "${T}_boards_report" "$(sky_fleet_json | head -c 300)"

TRAIN="--steps 3 --batch 4 --micro 2 --lr 0.001 --seed 3 --clip 1 --warmup 1"
# shellcheck disable=SC2086 # TRAIN is a word list
"$SKY" job submit --pki "$PKI" --broker "$BR" --job fb --min-boards 3 --task train --algo even \
	--sched 1f1b --optimizer adamw --model-dir "$M" --dataset train --data-owner b1 \
	--wait 120 $TRAIN >"$W/fb.submit" 2>&1 || fail "${T}_submitted" "$(cat "$W/fb.submit")"
"$SKY" job watch fb --pki "$PKI" --broker "$BR" --timeout 240 >"$W/fb.watch" 2>&1 ||
	fail "${T}_job_ends" "$(tail -3 "$W/fb.watch"); $(grep -h 'fb' "$W"/b*.log | tail -5)"
line=$(grep -h "job fb: part of [0-9]* bytes is over the [0-9]*-byte message limit: sent in [0-9]* chunks" \
	"$W"/b1.log | head -1)
bytes=$(echo "$line" | sed -n 's/.*part of \([0-9]*\) bytes.*/\1/p')
echo "MEASURE ${T}_owner_part ${bytes:-?} bytes: $line"
[ -n "$line" ] && [ "${bytes:-0}" -gt 33554432 ] && pass "${T}_owner_sends_its_part_in_chunks" ||
	fail "${T}_owner_sends_its_part_in_chunks" "$(grep -h 'part' "$W"/b1.log | tail -3)"

# an enrolled board outside the plan sends a chunk under its own part topic
"$SKY" pki issue --dir "$PKI" --id bx --state "$W/bx" >/dev/null 2>"$W/bx.err" ||
	fail "${T}_outsider_identity" "$(cat "$W/bx.err")"
head -c 200 /dev/urandom >"$W/junk"
mosquitto_pub $(sky_mq_tls "$W/bx/board.crt" "$W/bx/board.key") -q 1 -r \
	-t sky/v1/job/fb/part/bx/0 -f "$W/junk" 2>"$W/bx.pub.err" ||
	fail "${T}_outsider_publishes" "$(cat "$W/bx.pub.err")"
sky_wait 20 grep -q "job fb: part from bx refused (part_not_stage)" "$W/skyplan.log" &&
	pass "${T}_outsider_chunk_refused_by_skyplan" ||
	fail "${T}_outsider_chunk_refused_by_skyplan" "$(grep -h 'refused' "$W/skyplan.log" | tail -3)"

"$SKY" job collect fb --pki "$PKI" --broker "$BR" --out "$W/fb.safetensors" --timeout 60 \
	>"$W/fb.collect" 2>&1 && pass "${T}_collect_gets_every_part" ||
	fail "${T}_collect_gets_every_part" "$(cat "$W/fb.collect")"
# shellcheck disable=SC2086
"$SKY" train --model-dir "$M" --data "$W/train.skyds" --optim adamw $TRAIN \
	--save-dir "$W/ref" >"$W/ref.out" 2>&1 || fail "${T}_sky_train" "$(tail -3 "$W/ref.out")"
if [ -s "$W/fb.safetensors" ] && cmp -s "$W/fb.safetensors" "$W/ref/model.safetensors"; then
	pass "${T}_final_weights_byte_equal_sky_train"
else
	fail "${T}_final_weights_byte_equal_sky_train" \
		"$(cmp "$W/fb.safetensors" "$W/ref/model.safetensors" 2>&1 | head -1)"
fi
exit 0
