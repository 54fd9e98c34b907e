#!/bin/sh
# sky bench secagg: its JSON keys (figures positive; speed is not asserted
# here) and its refusals with the reason. Needs no broker.
set -u
cd "$(dirname "$0")/../.."
B="${SKY_BUILD:-build/host}"
SKY="$B/bin/sky"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pass() { echo "PASS $1"; }
fail() { echo "FAIL $1: $2"; }

if "$SKY" bench secagg --mwords 1 --owners 3 --warmup 0 --runs 1 --json >"$tmp/o" 2>"$tmp/err" &&
	python3 - "$tmp/o" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
assert j["bench"] == "secagg" and j["elements"] == 1 << 20 and j["owners"] == 3, j
for k in ("encode_ms", "mask_ms", "mask_mbedtls_ms", "sum_ms", "sum_unmask_ms"):
    assert j[k]["count"] == 1 and j[k]["median"] > 0, k
for k in ("owner_plain_ns_per_element", "owner_secure_ns_per_element",
          "aggregator_plain_ns_per_element", "aggregator_secure_ns_per_element",
          "mask_speedup_vs_mbedtls"):
    assert j[k] > 0, k
assert j["cpu"] and j["commit"] and j["date"], j
PY
then pass bench_secagg_json
else fail bench_secagg_json "$(cat "$tmp/o" "$tmp/err" | head -c 600)"; fi

"$SKY" bench secagg --owners 1 >"$tmp/o" 2>"$tmp/err"
rc=$?
if [ $rc -eq 2 ] && grep -q "owners" "$tmp/err" && grep -q "1" "$tmp/err"; then pass bench_secagg_refuses_one_owner
else fail bench_secagg_refuses_one_owner "rc $rc: $(cat "$tmp/err")"; fi
"$SKY" bench secagg --mwords 0 >"$tmp/o" 2>"$tmp/err"
rc=$?
if [ $rc -eq 2 ] && grep -q "mwords" "$tmp/err"; then pass bench_secagg_refuses_zero_words
else fail bench_secagg_refuses_zero_words "rc $rc: $(cat "$tmp/err")"; fi
