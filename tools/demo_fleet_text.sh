#!/bin/sh
# make demo's fleet fine-tuning: a loopback fleet (tools/fleet_lib.sh: a
# TLS mosquitto, skyplan, three boards) fine-tunes the fortunes checkpoint
# on a data set only board b1 holds (skyd --dataset). b1 is the job's data
# owner: it runs the embeddings and first layers and the last layers, the
# head and the loss, so the text's token ids and labels never leave it; the
# others see sealed activations and gradients. The model is the demo's
# shapes with 4 layers (a U-shaped plan over three boards needs at least
# three) and the 8,000-entry vocabulary unpadded: the owner's part of a
# 30,522-entry one (38 MB) is over the 32 MiB message limit, so it could not
# be collected (docs/limits.md). The sets are prepared again with that
# vocabulary. The job's weights are compared with `sky train` on one board
# with the same settings (byte for byte), collected as a Hugging Face
# directory and evaluated on the dev set.
#
#   tools/demo_fleet_text.sh TEXT_DIR OUT_DIR "TRAIN OPTIONS"
#
# TEXT_DIR is tools/demo_text.sh's output (corpus.txt, train.tsv, dev.tsv,
# model/config.json).
#
# Run from the repository root (SKY_BUILD, default build/host). Everything
# it starts is stopped at the end.
set -u
TEXT=$1
OUT=$2
TRAIN=$3
SKY_BUILD=${SKY_BUILD:-build/host}
SKY_BIN=$SKY_BUILD/bin
export SKY_BUILD
FLEET_WHAT="demo fleet finetune"
. tools/fleet_lib.sh
MODEL=mini
SEQ_OPT=""
fleet_begin
DIR="$W/model4"
mkdir -p "$DIR"
"$SKY" vocab build --corpus "$TEXT/corpus.txt" --size 8000 --out "$DIR/vocab.txt" >/dev/null ||
	die "sky vocab build failed"
printf '{"do_lower_case": true}\n' >"$DIR/tokenizer_config.json"
python3 -c '
import json, sys
c = json.load(open(sys.argv[1]))
c["num_hidden_layers"] = 4
c["vocab_size"] = sum(1 for _ in open(sys.argv[3], encoding="utf-8"))
json.dump(c, open(sys.argv[2], "w"), indent=2)' "$TEXT/model/config.json" "$DIR/config.json" "$DIR/vocab.txt"
python3 tools/hf_random_init.py "$DIR" --seed 1 >/dev/null || die "tools/hf_random_init.py failed"
SET="$W/train.skyds"
DEV="$W/dev.skyds"
"$SKY" data prepare --model-dir "$DIR" --input "$TEXT/train.tsv" --out "$SET" --seq 64 --quiet \
	>/dev/null && "$SKY" data prepare --model-dir "$DIR" --input "$TEXT/dev.tsv" --out "$DEV" \
	--seq 64 --quiet >/dev/null || die "sky data prepare failed"
LAYERS=4
fleet_start
fleet_board b1 1 "$SKY_BIN/skyd" --dataset "train=$SET"
fleet_board b2 0.5
fleet_board b3 0.5
say "   $N boards online (emulated speeds 1, 1/2, 1/2 of a core); b1 holds the set 'train'"
# shellcheck disable=SC2086 # TRAIN is a word list
"$SKY" job submit --pki "$PKI" --broker "$BR" --job fortunes-ft --min-boards "$N" --task train \
	--algo even --sched 1f1b --optimizer adamw --model-dir "$DIR" --dataset train --data-owner b1 --wait 120 \
	$TRAIN >"$W/submit.log" 2>&1 || die "the fine-tuning job was not acked: $(tail -5 "$W/submit.log")"
grep -E "^  stage" "$W/submit.log" | sed 's/^/   /'
"$SKY" job watch fortunes-ft --pki "$PKI" --broker "$BR" --timeout 900 >"$W/watch.log" 2>&1 ||
	die "the job did not end: $(tail -3 "$W/watch.log")"
tail -1 "$W/watch.log" | sed 's/^/   /'
rm -rf "$OUT"
"$SKY" job collect fortunes-ft --pki "$PKI" --broker "$BR" --out-dir "$OUT" --model-dir "$DIR" \
	--timeout 60 >"$W/collect.log" 2>&1 || die "sky job collect: $(tail -3 "$W/collect.log")"
say "   collected into $OUT (a Hugging Face directory)"
# shellcheck disable=SC2086
"$SKY" train --model-dir "$DIR" --data "$SET" --optim adamw $TRAIN --quiet --save-dir "$W/one" \
	>"$W/one.log" 2>&1 || die "sky train: $(tail -3 "$W/one.log")"
if cmp -s "$OUT/model.safetensors" "$W/one/model.safetensors"; then
	say "   the fleet's weights equal sky train's on one board with the same settings, byte for byte"
else
	die "the fleet's weights differ from sky train's: $(cmp "$OUT/model.safetensors" "$W/one/model.safetensors" 2>&1)"
fi
"$SKY" eval --model-dir "$OUT" --data "$DEV" --json >"$W/dev.json" 2>"$W/dev.err" ||
	die "sky eval: $(tail -3 "$W/dev.err")"
python3 - "$W/dev.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
print("   the fleet-tuned 4-layer model on the dev set: accuracy %.4f, macro-F1 %.4f"
      % (j["accuracy"], j["macro_f1"]))
PY
