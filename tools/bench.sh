#!/bin/sh
# make bench: every benchmark, one JSON object per line into build/bench/.
set -eu
B="${1:-build/host}"
mkdir -p build/bench
# the planner: optimal on 1,024 boards x 1,000 layers and on the paper's 63 x 160
"$B/bin/sky" bench planner --json | tee build/bench/planner.json
# the fleet PKI: plan signing/verification, key generation, certificate issue
rm -rf build/bench/pki-scratch
"$B/bin/sky" pki bench --dir build/bench/pki-scratch --json | tee build/bench/pki.json
# one encoder layer in fp32 (base, batch 8 x seq 128, 1 thread): fwd, fwd+bwd, and
# OpenBLAS sgemm alone on the same GEMMs; then PyTorch eager at the same shapes, if present
"$B/bin/sky" bench layer --model base --json | tee build/bench/layer_fp32.json
if /usr/bin/python3 -c "import torch" 2>/dev/null; then
	/usr/bin/python3 tools/bench_torch_layer.py --model base | tee build/bench/layer_torch.json
fi
# the int8 layer (base, batch 8 x seq 128, 1 thread): fwd with the kernel variant the CPU
# picks, the int8 GEMMs alone, cosine and speed-up against fp32; then PyTorch's dynamically
# quantised layer (oneDNN) at the same shapes, if present
"$B/bin/sky" bench layer --model base --precision int8 --json | tee build/bench/layer_int8.json
# the same on two threads (the worker pool; the bits do not change with the thread count)
"$B/bin/sky" bench layer --model base --precision int8 --threads 2 --json |
	tee build/bench/layer_int8_2threads.json
if /usr/bin/python3 -c "import torch" 2>/dev/null; then
	/usr/bin/python3 tools/bench_torch_int8.py | tee build/bench/layer_torch_int8.json
fi
# a whole BERT-base fine-tuning step (vocabulary 30522, 12 layers, head, AdamW, dropout 0.1),
# batch 8 x seq 128, 1 thread: Sky's sequences/s and PyTorch eager's in one run (PyTorch's
# side is reported as not run when /usr/bin/python3 has no torch)
"$B/bin/sky" bench train --json --runs 3 | tee build/bench/train.json
# sky data prepare end to end on 100k rows of fortunes: TSV, CSV and JSON Lines rows/s
"$B/bin/sky" bench data --json | tee build/bench/data.json
# tensor frames: CRC32C (instruction and plain C), pack + unpack plaintext and sealed (AES-GCM)
"$B/bin/sky" bench frame --json | tee build/bench/frame.json
# the board probe skyd runs at start (mini, 1 thread): per-block layer times, and the
# spread of the reported layer time over 5 whole probes (coefficient of variation)
"$B/bin/sky" bench probe --model mini --repeat 5 --json | tee build/bench/probe.json
# the fleet control plane against a loopback TLS mosquitto: 16 boards from start to a
# verified plan, the broker echo round trip, and the offline deadlines (MEASURE lines)
SKY_BUILD="$B" tests/integration/test_fleet.sh | sed -n 's/^MEASURE //p' | tee build/bench/fleet.txt
