#!/bin/sh
# make bench: every benchmark, one JSON object per line into build/bench/.
set -eu
B="${1:-build/host}"
mkdir -p build/bench
echo "bench: nothing to run yet"
