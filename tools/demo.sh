#!/bin/sh
# make demo: shows what Sky can do today on one machine.
set -eu
B="${1:-build/host}"
echo "== Sky demo (board build: $B)"
"$B/bin/sky" --help

echo "== The planner on the Sky Computing paper's fleet: 160-layer BERT-large, 63 unequal workers"
"$B/bin/sky" sim --paper
