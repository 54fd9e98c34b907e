#!/bin/sh
# make demo: what Sky does today, on one machine: one board checked against PyTorch, the
# planner on the paper's fleet, one board training alone, then the fleet (sky bench fleet:
# a loopback TLS broker, skyplan and six boards of unequal emulated speed) training a
# 24-layer mini BERT under the even, sky and optimal plans, with a table of measured vs
# predicted steps and SVGs of the plan and of each plan's measured step under build/demo/;
# last, the same fleet serving that model in int8 (sky bench infer): a few requests with
# their logits, then throughput and latency under the even split and optimal.
set -eu
B="${1:-build/host}"
echo "== Sky demo (board build: $B, $("$B/bin/sky" version))"

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
