#!/bin/sh
# sky bench train (docs/benchmarks.md): the JSON of a whole fine-tuning
# step's benchmark on the tiny preset names its shapes, dropout, optimizer,
# Sky's figures, why PyTorch did not run (--no-torch, or a Python that is not
# there), and the machine; --layers and --dropout change what runs; bad
# options are refused with the reason. Speed is not checked (benchmarks say
# it); torch is not needed (if /usr/bin/python3 has it, its side is checked
# to report too).
set -u
cd "$(dirname "$0")/../.."
. tests/integration/lib.sh
B="${SKY_BUILD:-build/host}"
SKY="$B/bin/sky"
sky_test_workdir benchtrain
trap 'rm -rf "$W"' EXIT
QUICK="--model tiny --seq 16 --warmup 0 --runs 2"

# check NAME FILE PYTHON-CONDITION...: the JSON in FILE (as d) meets them all
check() {
	name=$1 file=$2
	shift 2
	if python3 - "$file" "$@" >"$W/$name.why" 2>&1 <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for cond in sys.argv[2:]:
    if not eval(cond, {"d": d}):
        print("not true:", cond, "in", json.dumps(d)[:600])
        sys.exit(1)
PY
	then pass "$name"; else fail "$name" "$(cat "$W/$name.why")"; fi
}

"$SKY" bench train $QUICK --no-torch --json >"$W/a.json" 2>"$W/a.err"
rc=$?
[ $rc -eq 0 ] && pass bench_train_no_torch_exits_0 ||
	fail bench_train_no_torch_exits_0 "rc $rc: $(head -c 300 "$W/a.err")"
check bench_train_json_names_shapes_and_work "$W/a.json" \
	'd["bench"] == "train" and d["model"] == "tiny"' \
	'(d["batch"], d["seq"], d["layers"], d["hidden"], d["heads"], d["ffn"]) == (8, 16, 2, 32, 2, 64)' \
	'd["vocab"] == 64 and d["classes"] == 2 and d["optim"] == "adamw" and d["clip"] == 1' \
	'abs(d["hidden_dropout"] - 0.1) < 1e-6 and abs(d["attention_dropout"] - 0.1) < 1e-6' \
	'd["params"] == (64 + 64 + 2) * 32 + 2 * 32 + 2 * (4 * 32 * 32 + 4 * 32 + 2 * 32 * 64 + 64 + 32 + 4 * 32) + 32 * 32 + 32 + 2 * 32 + 2'
check bench_train_json_has_sky_figures "$W/a.json" \
	'd["sky_sequences_per_s"] > 0 and d["sky_step_ms"] > 0' \
	'abs(d["sky_sequences_per_s"] - 8 / (d["sky_step_ms"] / 1e3)) < 1e-6 * d["sky_sequences_per_s"]' \
	'd["sky_step_stats_ms"]["count"] == 2'
check bench_train_json_says_why_no_torch "$W/a.json" \
	'd["torch_sequences_per_s"] is None and d["torch_not_run"] == "--no-torch"'
check bench_train_json_names_machine "$W/a.json" \
	'all(k in d for k in ("machine", "cpu", "threads", "blas_core", "openblas_coretype", "date", "commit"))' \
	'd["threads"] == 1 and d["blas_core"] != ""'

"$SKY" bench train $QUICK --no-torch --json --layers 1 --dropout 0 --threads 2 >"$W/b.json" 2>"$W/b.err"
check bench_train_layers_dropout_threads_taken "$W/b.json" \
	'd["layers"] == 1 and d["hidden_dropout"] == 0 and d["attention_dropout"] == 0' \
	'd["threads"] == 2 and d["params"] == (64 + 64 + 2) * 32 + 2 * 32 + (4 * 32 * 32 + 4 * 32 + 2 * 32 * 64 + 64 + 32 + 4 * 32) + 32 * 32 + 32 + 2 * 32 + 2'

# the torch path with a Python that is not there: Sky's figure and the reason
"$SKY" bench train $QUICK --python "$W/no-python" --json >"$W/c.json" 2>"$W/c.err"
rc=$?
[ $rc -eq 0 ] && check bench_train_missing_python_named "$W/c.json" \
	'd["torch_sequences_per_s"] is None and "no-python is not an executable" in d["torch_not_run"]' \
	'd["sky_sequences_per_s"] > 0' ||
	fail bench_train_missing_python_named "rc $rc: $(head -c 300 "$W/c.err")"

if /usr/bin/python3 -c "import torch" 2>/dev/null; then
	"$SKY" bench train $QUICK --json >"$W/t.json" 2>"$W/t.err"
	check bench_train_torch_side_reports "$W/t.json" \
		'd["torch_sequences_per_s"] > 0 and d["torch_step_ms"] > 0 and d["sky_over_torch"] > 0' \
		'd["torch_params"] == d["params"] and d["torch_threads"] == d["threads"]'
else
	echo "note: /usr/bin/python3 has no torch: the torch side is not checked"
fi

# refused NAME WANT ARGS...: exit 2 and WANT (fixed text) on stderr
refused() {
	name=$1 want=$2
	shift 2
	"$SKY" bench train "$@" >"$W/$name.out" 2>"$W/$name.err" </dev/null
	rc=$?
	[ $rc -eq 2 ] && grep -qF -- "$want" "$W/$name.err" && pass "bench_train_refuses_$name" ||
		fail "bench_train_refuses_$name" "rc $rc: $(head -c 300 "$W/$name.err")"
}
refused zero_layers "--layers expects an integer from 1 to 1000, got '0'" --layers 0
refused more_layers_than_model "--layers 3 is more than the 2 layers of tiny" --model tiny --layers 3
refused seq_over_positions "--seq 100 is more than the 64 positions of tiny" --model tiny --seq 100
refused zero_batch "--batch expects an integer from 1 to 4096, got '0'" --batch 0
refused dropout_one "--dropout expects a number from 0 to 0.99, got '1'" --dropout 1
refused model_and_dir "--model and --model-dir exclude each other" --model tiny --model-dir "$W"
refused unknown_model "unknown model 'nope' (tiny, mini, base, large)" --model nope
refused dir_without_config "$W/config.json: not found" --model-dir "$W"
refused unknown_option "unknown option '--bogus'" --bogus
refused stray_argument "unexpected argument 'extra'" --model tiny extra
exit $((fails > 0))
