#!/bin/sh
# make bench: every benchmark, one JSON object per line into build/bench/.
set -eu
B="${1:-build/host}"
mkdir -p build/bench
echo "bench: nothing to run yet"
# the planner: optimal on 1,024 boards x 1,000 layers and on the paper's 63 x 160
"$B/bin/sky" bench planner --json | tee build/bench/planner.json
# the fleet PKI: plan signing/verification, key generation, certificate issue
rm -rf build/bench/pki-scratch
"$B/bin/sky" pki bench --dir build/bench/pki-scratch --json | tee build/bench/pki.json
