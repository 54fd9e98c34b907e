#!/bin/sh
# A board runs OpenBLAS's best kernels for its CPU (runtime/sky_blas_core.h):
# sky version names the core OpenBLAS runs and the one this CPU takes; when
# OpenBLAS picked a weaker one (here pretended with SKY_BLAS_PICK_AS, as
# 0.3.21 does on a family 6 model 207 Xeon), sky runs itself again with
# OPENBLAS_CORETYPE set to the better core; an OPENBLAS_CORETYPE the user
# set is kept and named. The inherited environment is left as it is for
# the sky commands of every other test.
set -u
cd "$(dirname "$0")/../.."
. tests/integration/lib.sh
SKY=${SKY_BUILD:-build/host}/bin/sky

out=$(env -u OPENBLAS_CORETYPE "$SKY" version 2>&1)
best=$(echo "$out" | sed -n 's/^cpu takes: \([A-Za-z0-9]*\);.*/\1/p')
run=$(echo "$out" | sed -n 's/^openblas core: \([A-Za-z0-9]*\) .*/\1/p')
if [ -n "$best" ] && [ "$(echo "$run" | tr a-z A-Z)" = "$(echo "$best" | tr a-z A-Z)" ]; then
	pass "unset_coretype_runs_the_cpus_best_core ($run)"
else
	fail unset_coretype_runs_the_cpus_best_core "runs '$run', CPU takes '$best': $out"
fi

if [ "$best" = Prescott ]; then
	fail weaker_pick_is_replaced "this CPU takes only Prescott: no weaker pick to replace"
else
	out=$(env -u OPENBLAS_CORETYPE SKY_BLAS_PICK_AS=Prescott SKY_LOG=info "$SKY" version 2>&1)
	if echo "$out" | grep -q "^openblas core: $best (set by Sky: OpenBLAS picked Prescott)" &&
		echo "$out" | grep -q "OpenBLAS picked the Prescott kernels for this CPU; running $best instead"; then
		pass weaker_pick_is_replaced
	else
		fail weaker_pick_is_replaced "$out"
	fi
	out=$(OPENBLAS_CORETYPE=Prescott "$SKY" version 2>&1)
	if echo "$out" | grep -q "^openblas core: Prescott (OPENBLAS_CORETYPE; this CPU takes $best)"; then
		pass users_coretype_is_kept_and_named
	else
		fail users_coretype_is_kept_and_named "$out"
	fi
fi

# bench layer reports sgemm against the CPU's peak and the core it ran
json=$(env -u OPENBLAS_CORETYPE "$SKY" bench layer --model tiny --warmup 0 --json 2>/dev/null)
if echo "$json" | python3 -c '
import json, sys
d = json.load(sys.stdin)
assert d["blas_core"].upper() == d["blas_core_best"].upper(), d
assert d["cpu_peak_gflops"] >= 0 and 0 <= d["sgemm_of_peak"], d
assert d["cpu_peak_gflops"] == 0 or d["sgemm_of_peak"] > 0, d
'; then
	pass bench_layer_reports_core_and_peak
else
	fail bench_layer_reports_core_and_peak "$json"
fi
[ "$fails" -eq 0 ]
