#!/bin/sh
# make demo: what Sky does today, on one machine: one board checked against PyTorch, the
# planner on the paper's fleet, one board training alone, then the fleet (sky bench fleet:
# a loopback TLS broker, skyplan and six boards of unequal emulated speed) training a
# 24-layer mini BERT under the even, sky and optimal plans, with a table of measured vs
# predicted steps and SVGs of the plan and of each plan's measured step under build/demo/;
# then the same fleet serving that model in int8 (sky bench infer): a few requests with
# their logits, then throughput and latency under the even split and optimal.
# Last, real text: fortunes (Debian's fortunes package) labelled by collection, a BERT
# fine-tuned on them on one board (dev accuracy beside the majority-class baseline, fp32
# and int8), served by a fleet and asked with sentences typed as text (sky infer --text).
# SKY_DEMO_TEXT_ONLY=1 runs only that last part; SKY_DEMO_EPOCHS its epochs (default 2).
set -eu
B="${1:-build/host}"
echo "== Sky demo (board build: $B, $("$B/bin/sky" version))"
mkdir -p build/demo
if [ -z "${SKY_DEMO_TEXT_ONLY:-}" ]; then

echo "== One encoder layer from safetensors files, forward + backward, checked against PyTorch"
mkdir -p build/demo
"$B/bin/sky" layer --model tiny --prefix encoder.layer.0. \
	--weights tests/data/layer_tool/weights.safetensors --input tests/data/layer_tool/input.safetensors \
	--grad tests/data/layer_tool/grad.safetensors --out build/demo/layer_out.safetensors
"$B/bin/sky" layer --compare tests/data/layer_tool/torch_expected.safetensors \
	build/demo/layer_out.safetensors | tail -n 3

echo "== The planner on the Sky Computing paper's fleet: 160-layer BERT-large, 63 unequal workers"
"$B/bin/sky" sim --paper

echo "== Training a 4-layer tiny BERT on one board (synthetic task, one sealed arena)"
"$B/bin/sky" train --model tiny --layers 4 --steps 300 --seed 1 --quiet
echo "== The fleet trains: a loopback TLS broker, skyplan and six boards of emulated speed"
echo "   1/2, 1/4, 1/4, 1/8, 1/8, 1/16 enroll, probe,"
echo "   and train mini with 24 layers under the even split, the paper's (sky), and optimal"
"$B/bin/sky" bench fleet --out build/demo --steps "${SKY_DEMO_STEPS:-2}" \
	--collect build/demo/fleet-model.safetensors
echo "== Pictures: $(ls build/demo/*.svg | tr '\n' ' ')"
echo "== The fleet serves the model it just trained: the same six boards enroll again, skyplan"
echo "   cuts the int8 model into slices for the even split and for optimal, a client"
echo "   (sky pki client) sends requests and gets logits (sky infer), then eight clients with"
echo "   eight requests in flight each measure throughput and latency (sky bench infer)"
"$B/bin/sky" bench infer --weights build/demo/fleet-model.safetensors --samples 3 \
	--seconds "${SKY_DEMO_SERVE_S:-8}"
fi

T=build/demo/text
echo "== Real text: fortunes (Debian's fortunes package) labelled by the collections they came"
echo "   from: tech (computers, linux, perl, science) or life (food, love, men-women, kids, pets,"
echo "   sports); split train/dev by each text's SHA-256; a WordPiece vocabulary built from the"
echo "   training text (sky vocab build); config.json and a random checkpoint (tools/demo_text.sh)"
rm -rf "$T"
tools/demo_text.sh "$T" "$B/bin/sky"
"$B/bin/sky" data info "$T/train.skyds" | sed -n '1,4p' | sed 's/^/   /'
echo "== Fine-tuning on one board: a 2-layer BERT (mini's shapes) from that checkpoint,"
echo "   ${SKY_DEMO_EPOCHS:-2} epochs with dropout, dev metrics after each (sky train --model-dir --data)"
"$B/bin/sky" train --model-dir "$T/model" --data "$T/train.skyds" --eval-data "$T/dev.skyds" \
	--epochs "${SKY_DEMO_EPOCHS:-2}" --lr 5e-4 --save-dir "$T/tuned" 2>&1 |
	grep -E "^epoch [0-9]+:|sequences/s" | sed 's/^/   /'
"$B/bin/sky" eval --model-dir "$T/tuned" --data "$T/dev.skyds" --json >"$T/dev.fp32.json"
"$B/bin/sky" eval --model-dir "$T/tuned" --data "$T/dev.skyds" --precision int8 --json \
	>"$T/dev.int8.json" 2>/dev/null
"$B/bin/sky" data info "$T/dev.skyds" --json >"$T/dev.info.json"
python3 - "$T/dev.fp32.json" "$T/dev.int8.json" "$T/dev.info.json" <<'EOF'
import json, sys
f, q, info = (json.load(open(p)) for p in sys.argv[1:4])
top = max(info["labels"], key=lambda l: l["rows"])
print("   dev accuracy (%d fortunes): fp32 %.4f, int8 %.4f (macro-F1 %.4f / %.4f); majority-class"
      " baseline %.4f (always '%s')" % (info["rows"], f["accuracy"], q["accuracy"], f["macro_f1"],
                                      q["macro_f1"], top["rows"] / info["rows"], top["name"]))
EOF

echo "== Fine-tuning across the fleet with the data on one board: three boards, b1 holds the"
echo "   training set (skyd --dataset) and is the data owner, so the text never leaves it; a"
echo "   4-layer model of the same shapes, ${SKY_DEMO_FLEET_STEPS:-150} steps (tools/demo_fleet_text.sh)"
SKY_BUILD="$B" tools/demo_fleet_text.sh "$T" "$T/fleet-tuned" \
	"--steps ${SKY_DEMO_FLEET_STEPS:-150} --batch 8 --micro 2 --lr 5e-4 --seed 1"

echo "== The fleet serves it: three boards, the int8 model and its tokenizer's hash in the job;"
echo "   sentences typed as text, tokenized on the client (tools/demo_serve_text.sh)"
SKY_BUILD="$B" tools/demo_serve_text.sh "$T/tuned" \
	"My program dumps core every time I compile it with the new kernel." \
	"She said she loves him more than chocolate cake." \
	"Never trust a computer you cannot throw out of a window." \
	"The children fed the dog under the table while we argued about dinner."
