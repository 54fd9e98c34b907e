#!/bin/sh
# make demo: shows what Sky can do today on one machine.
set -eu
B="${1:-build/host}"
echo "== Sky demo (board build: $B)"
"$B/bin/sky" --help
