#!/bin/sh
# How far the bounded probe's figures (timed on a smaller shape and scaled
# by FLOPs when the job's shape does not fit the bound) are from a probe
# that times the job's shape itself. Alternates the two, ROUNDS times, so
# load on a shared machine hits both alike; prints each round and the
# median ratio (bounded / full) of the fp32 layer (fwd + bwd) and int8
# forward times.
#
#   tools/probe-scale-check.sh [--sky CMD] [--model M] [--bound S] [--rounds N]
#
#   --sky CMD   how to run sky (default build/host/bin/sky); for the aarch64
#               build under qemu:
#               --sky "timeout -s KILL 900 qemu-aarch64 -L / -cpu max build/generic-aarch64/bin/sky"
#               (OPENBLAS_NUM_THREADS=1 is set here)
#   --bound S   the bounded probe's --max-seconds (default 3)
#   --full-bound S  the full probe's --max-seconds (default 900)
set -u
sky=build/host/bin/sky
model=mini
bound=3
full_bound=900
rounds=3
while [ $# -gt 0 ]; do
	case "$1" in
	--sky) sky="$2"; shift 2 ;;
	--model) model="$2"; shift 2 ;;
	--bound) bound="$2"; shift 2 ;;
	--full-bound) full_bound="$2"; shift 2 ;;
	--rounds) rounds="$2"; shift 2 ;;
	-h|--help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "probe-scale-check: unknown option $1" >&2; exit 2 ;;
	esac
done
export OPENBLAS_NUM_THREADS=1
field() { sed -n "s/.*\"$1\":\([0-9.e+-]*\).*/\1/p"; }
out=$(mktemp)
trap 'rm -f "$out"' EXIT
i=1
while [ "$i" -le "$rounds" ]; do
	# shellcheck disable=SC2086 # $sky is a command line
	b=$($sky bench probe --model "$model" --repeat 1 --max-seconds "$bound" --json) || exit 1
	# shellcheck disable=SC2086
	f=$($sky bench probe --model "$model" --repeat 1 --runs 3 --max-seconds "$full_bound" --json) || exit 1
	bl=$(echo "$b" | awk -v f="$(echo "$b" | field layer_fwd_ms)" -v g="$(echo "$b" | field layer_bwd_ms)" 'BEGIN {print f + g}')
	fl=$(echo "$f" | awk -v f="$(echo "$f" | field layer_fwd_ms)" -v g="$(echo "$f" | field layer_bwd_ms)" 'BEGIN {print f + g}')
	b8=$(echo "$b" | field int8_fwd_ms)
	f8=$(echo "$f" | field int8_fwd_ms)
	echo "round $i: bounded probe $(echo "$b" | field probe_s_max) s at batch $(echo "$b" | field timed_batch) x seq $(echo "$b" | field timed_seq): layer $bl ms, int8 $b8 ms (at batch $(echo "$b" | field int8_batch) x seq $(echo "$b" | field int8_seq)); full probe $(echo "$f" | field probe_s_max) s at batch $(echo "$f" | field timed_batch) x seq $(echo "$f" | field timed_seq): layer $fl ms, int8 $f8 ms"
	echo "$bl $fl $b8 $f8" >>"$out"
	i=$((i + 1))
done
awk '{r[NR] = $1 / $2; q[NR] = $3 / $4}
	function med(a, n,   i, j, t) {
		for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
		return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
	}
	END {printf "median ratio bounded/full over %d rounds: fp32 layer %.3f, int8 forward %.3f\n", NR, med(r, NR), med(q, NR)}' "$out"
