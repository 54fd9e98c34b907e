#!/bin/sh
# sky layer end to end: run one encoder layer from safetensors files and
# check the numbers against PyTorch (golden data in tests/data/layer_tool,
# made by its make_golden.py) and against the in-process layer
# (sky layer --make-example); check that bad files give errors that name
# the tensor. Prints PASS/FAIL lines.
set -u
cd "$(dirname "$0")/../.."
B=${SKY_BUILD:-build/host}
SKY="$B/bin/sky"
G=tests/data/layer_tool
T=$(mktemp -d "${TMPDIR:-/tmp}/sky_layer_tool.XXXXXX")
trap 'rm -rf "$T"' EXIT INT TERM
fail=0

pass() { echo "PASS $1"; }
bad() { echo "FAIL $1: $2"; fail=1; }

# expect_err NAME WORDS CMD...: CMD must fail and say WORDS on stderr
expect_err() {
	name=$1 words=$2
	shift 2
	if "$@" >"$T/out.txt" 2>"$T/err.txt"; then
		bad "$name" "succeeded, expected an error"
	elif [ -z "$words" ] || grep -qF -- "$words" "$T/err.txt"; then
		pass "$name"
	else
		bad "$name" "stderr lacks '$words': $(head -c 400 "$T/err.txt")"
	fi
}

# A safetensors file by hand: header JSON, then N zero bytes, then the
# optional raw bytes given as printf escapes (header shorter than 256 bytes).
mkst() { # path header nzero [tail]
	len=$(printf '%s' "$2" | wc -c)
	{
		printf "$(printf '\\%03o' "$len")"'\0\0\0\0\0\0\0'
		printf '%s' "$2"
		head -c "$3" /dev/zero
		[ $# -ge 4 ] && printf "$4"
	} >"$1"
}

if [ ! -x "$SKY" ]; then
	bad layer_tool_built "$SKY is missing (run make)"
	exit 1
fi

# 1. against PyTorch (float64 autograd), forward and backward, with a prefix
#    and a padded attention mask
if "$SKY" layer --model tiny --prefix encoder.layer.0. --weights "$G/weights.safetensors" \
	--input "$G/input.safetensors" --grad "$G/grad.safetensors" \
	--out "$T/golden_out.safetensors" >"$T/run.txt" 2>&1 &&
	"$SKY" layer --compare "$G/torch_expected.safetensors" "$T/golden_out.safetensors" \
		--tol 1e-5 >"$T/cmp.txt" 2>&1; then
	pass layer_tool_matches_pytorch
else
	bad layer_tool_matches_pytorch "$(cat "$T/run.txt" "$T/cmp.txt" | tail -5)"
fi

# 1b. the same check for an aarch64 board under qemu, when make check has
#     cross-built it (a board checked against the reference, as in the field;
#     -L / and the KILL bound: see QEMU_KILL_S in the Makefile)
A=build/generic-aarch64/bin/sky
if [ -x "$A" ] && command -v qemu-aarch64 >/dev/null 2>&1; then
	if OPENBLAS_NUM_THREADS=1 timeout -s KILL 300 qemu-aarch64 -L / -cpu cortex-a72 \
		"$A" layer --model tiny --prefix encoder.layer.0. --weights "$G/weights.safetensors" \
		--input "$G/input.safetensors" --grad "$G/grad.safetensors" \
		--out "$T/arm_out.safetensors" >"$T/run.txt" 2>&1 &&
		"$SKY" layer --compare "$G/torch_expected.safetensors" "$T/arm_out.safetensors" \
			--tol 1e-5 >"$T/cmp.txt" 2>&1; then
		pass layer_tool_aarch64_matches_pytorch
	else
		bad layer_tool_aarch64_matches_pytorch "$(cat "$T/run.txt" "$T/cmp.txt" | tail -5)"
	fi
else
	echo "SKIP layer_tool_aarch64_matches_pytorch: no $A or qemu-aarch64"
fi

# 2. against the layer in process, other shapes, no prefix
"$SKY" layer --make-example "$T/ex" --batch 3 --seq 5 --seed 7 >/dev/null 2>&1 ||
	bad layer_tool_make_example "sky layer --make-example failed"
if "$SKY" layer --model tiny --weights "$T/ex/weights.safetensors" --input "$T/ex/input.safetensors" \
	--out "$T/fwd.safetensors" >/dev/null 2>&1 &&
	"$SKY" layer --compare "$T/ex/expected_fwd.safetensors" "$T/fwd.safetensors" >"$T/cmp.txt" 2>&1; then
	pass layer_tool_forward_only
else
	bad layer_tool_forward_only "$(tail -3 "$T/cmp.txt")"
fi
if "$SKY" layer --model tiny --weights "$T/ex/weights.safetensors" --input "$T/ex/input.safetensors" \
	--grad "$T/ex/grad.safetensors" --out "$T/bwd.safetensors" --json >"$T/run.json" 2>&1 &&
	grep -q '"backward":true' "$T/run.json" && grep -q '"batch":3,"seq":5' "$T/run.json" &&
	"$SKY" layer --compare "$T/ex/expected.safetensors" "$T/bwd.safetensors" --json >"$T/cmp.json" 2>&1 &&
	grep -q '"failed":0' "$T/cmp.json"; then
	pass layer_tool_forward_backward_in_process
else
	bad layer_tool_forward_backward_in_process "$(cat "$T/run.json" "$T/cmp.json" | tail -3)"
fi

# 3. --compare can fail: other weights give other numbers; and a forward-only
#    file lacks the gradients
"$SKY" layer --make-example "$T/ex2" --batch 3 --seq 5 --seed 8 >/dev/null 2>&1
expect_err layer_tool_compare_detects_differences "" \
	"$SKY" layer --compare "$T/ex/expected.safetensors" "$T/ex2/expected.safetensors"
if grep -q "FAIL: error above tolerance" "$T/out.txt"; then pass layer_tool_compare_says_why
else bad layer_tool_compare_says_why "$(tail -2 "$T/out.txt")"; fi
expect_err layer_tool_compare_missing_tensors "" \
	"$SKY" layer --compare "$T/ex/expected.safetensors" "$T/fwd.safetensors"
if grep -q "grad.hidden_states .*missing from the result" "$T/out.txt"; then
	pass layer_tool_compare_names_missing
else bad layer_tool_compare_names_missing "$(head -2 "$T/out.txt")"; fi

# 4. errors name the file, the tensor and what was expected
W="$G/weights.safetensors" X="$G/input.safetensors"
expect_err layer_tool_missing_file "/nonexistent/w.safetensors" \
	"$SKY" layer --model tiny --weights /nonexistent/w.safetensors --input "$X" --out "$T/o"
expect_err layer_tool_missing_tensor \
	"tensor attention.self.query.weight: missing (expected F32 (32, 32))" \
	"$SKY" layer --model tiny --weights "$W" --input "$X" --out "$T/o"
expect_err layer_tool_wrong_model_shape \
	"tensor hidden_states: expected F32 (*, *, 256), found F32 (2, 8, 32)" \
	"$SKY" layer --model mini --prefix encoder.layer.0. --weights "$W" --input "$X" --out "$T/o"
mkst "$T/i32.safetensors" '{"hidden_states":{"dtype":"I32","shape":[1,1,32],"data_offsets":[0,128]}}' 128
expect_err layer_tool_wrong_dtype "tensor hidden_states: expected F32 (*, *, 32), found I32 (1, 1, 32)" \
	"$SKY" layer --model tiny --prefix encoder.layer.0. --weights "$W" --input "$T/i32.safetensors" --out "$T/o"
mkst "$T/mask2.safetensors" '{"hidden_states":{"dtype":"F32","shape":[1,1,32],"data_offsets":[0,128]},"attention_mask":{"dtype":"F32","shape":[1,1],"data_offsets":[128,132]}}' 128 '\0\0\0\100'
expect_err layer_tool_mask_not_0_or_1 "tensor attention_mask: element 0 is 2, expected 0 or 1" \
	"$SKY" layer --model tiny --prefix encoder.layer.0. --weights "$W" --input "$T/mask2.safetensors" --out "$T/o"
mkst "$T/mask3.safetensors" '{"hidden_states":{"dtype":"F32","shape":[1,1,32],"data_offsets":[0,128]},"attention_mask":{"dtype":"F32","shape":[1,2],"data_offsets":[128,136]}}' 136
expect_err layer_tool_mask_shape "tensor attention_mask: expected F32/I64/I32/I8/U8/BOOL (1, 1)" \
	"$SKY" layer --model tiny --prefix encoder.layer.0. --weights "$W" --input "$T/mask3.safetensors" --out "$T/o"
mkst "$T/one.safetensors" '{"hidden_states":{"dtype":"F32","shape":[1,1,32],"data_offsets":[0,128]}}' 128
expect_err layer_tool_grad_shape "tensor grad.output: expected F32 (1, 1, 32), found F32 (2, 8, 32)" \
	"$SKY" layer --model tiny --prefix encoder.layer.0. --weights "$W" --input "$T/one.safetensors" \
	--grad "$G/grad.safetensors" --out "$T/o"
head -c 20000 "$W" >"$T/trunc.safetensors"
expect_err layer_tool_truncated_weights "past the" \
	"$SKY" layer --model tiny --prefix encoder.layer.0. --weights "$T/trunc.safetensors" --input "$X" --out "$T/o"
mkst "$T/lying.safetensors" '{"hidden_states":{"dtype":"F32","shape":[2,8,32],"data_offsets":[0,128]}}' 128
expect_err layer_tool_lying_header "tensor hidden_states: F32 with 512 elements needs 2048 bytes, data_offsets span 128" \
	"$SKY" layer --model tiny --prefix encoder.layer.0. --weights "$W" --input "$T/lying.safetensors" --out "$T/o"
expect_err layer_tool_unknown_precision "unknown --precision 'fp16'" \
	"$SKY" layer --model tiny --weights "$W" --input "$X" --out "$T/o" --precision fp16
expect_err layer_tool_needs_model "--model is required" \
	"$SKY" layer --weights "$W" --input "$X" --out "$T/o"
expect_err layer_tool_bad_profile "/nonexistent/p.conf" \
	"$SKY" layer --model tiny --prefix encoder.layer.0. --weights "$W" --input "$X" --out "$T/o" \
	--profile /nonexistent/p.conf
[ -e "$T/o" ] && bad layer_tool_no_output_on_error "an output file was written" ||
	pass layer_tool_no_output_on_error

exit $fail
