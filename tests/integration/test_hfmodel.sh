#!/bin/sh
# A Hugging Face directory on the command line (docs/models.md): sky train
# starts from the checkpoint (tests/data/golden/hf/model: F16 weights, odd
# shapes, 3 labels) and writes one back with --save-dir; sky eval reads the
# saved one and gets the accuracy training reported; the saved directory has
# Hugging Face's names, shapes and dtype; bad directories are refused with
# the field or tensor named and nothing written. Needs no broker.
set -u
cd "$(dirname "$0")/../.."
B="${SKY_BUILD:-build/host}"
SKY="$B/bin/sky"
G=tests/data/golden/hf/model
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export OPENBLAS_NUM_THREADS=1

pass() { echo "PASS $1"; }
fail() { echo "FAIL $1: $2"; }
field() { # FILE KEY: a top-level value of a one-line JSON object
	python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$1" "$2"
}

# train from the checkpoint, save a directory
"$SKY" train --model-dir "$G" --steps 4 --eval 4 --quiet --json --save-dir "$tmp/out" \
	>"$tmp/train.json" 2>"$tmp/err"
rc=$?
if [ $rc -eq 0 ] && [ "$(field "$tmp/train.json" start)" = checkpoint ] &&
	[ -s "$tmp/out/config.json" ] && [ -s "$tmp/out/model.safetensors" ]; then
	pass train_from_checkpoint_saves_dir
else fail train_from_checkpoint_saves_dir "rc $rc: $(head -c 400 "$tmp/err")"; fi

# the checkpoint, not the seed: --init-weights starts elsewhere
"$SKY" train --model-dir "$G" --steps 1 --eval 1 --quiet --json >"$tmp/ck.json" 2>"$tmp/err"
"$SKY" train --model-dir "$G" --steps 1 --eval 1 --quiet --json --init-weights \
	>"$tmp/seed.json" 2>>"$tmp/err"
l1=$(field "$tmp/ck.json" first_loss 2>/dev/null)
l2=$(field "$tmp/seed.json" first_loss 2>/dev/null)
if [ -n "$l1" ] && [ -n "$l2" ] && [ "$l1" != "$l2" ] &&
	[ "$(field "$tmp/seed.json" start)" = seed ]; then
	pass init_weights_starts_from_the_seed
else fail init_weights_starts_from_the_seed "losses '$l1' '$l2': $(head -c 300 "$tmp/err")"; fi

# eval of the saved directory: the accuracy training reported (same seed,
# batches and weights)
"$SKY" eval --model-dir "$tmp/out" --batches 4 --json >"$tmp/eval.json" 2>"$tmp/err"
rc=$?
a1=$(field "$tmp/train.json" heldout_accuracy 2>/dev/null)
a2=$(field "$tmp/eval.json" heldout_accuracy 2>/dev/null)
if [ $rc -eq 0 ] && [ -n "$a1" ] && [ "$a1" = "$a2" ]; then pass eval_saved_dir_equals_train
else fail eval_saved_dir_equals_train "rc $rc, train '$a1' eval '$a2': $(head -c 300 "$tmp/err")"; fi

# the saved directory trains again (every command takes it back)
"$SKY" train --model-dir "$tmp/out" --steps 1 --eval 1 --quiet >"$tmp/o" 2>"$tmp/err"
rc=$?
if [ $rc -eq 0 ]; then pass saved_dir_trains_again
else fail saved_dir_trains_again "rc $rc: $(head -c 300 "$tmp/err")"; fi

# the saved directory as from_pretrained reads it: the same names and
# shapes as the Hugging Face checkpoint, F32, and a config with the labels
python3 - "$G" "$tmp/out" >"$tmp/py" 2>&1 <<'EOF'
import json, struct, sys
def header(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        h = json.loads(f.read(n))
    h.pop("__metadata__", None)
    return h
a = header(sys.argv[1] + "/model.safetensors")
b = header(sys.argv[2] + "/model.safetensors")
assert sorted(a) == sorted(b), set(a) ^ set(b)
for k in a:
    assert a[k]["shape"] == b[k]["shape"], k
    assert b[k]["dtype"] == "F32", k
ca = json.load(open(sys.argv[1] + "/config.json"))
cb = json.load(open(sys.argv[2] + "/config.json"))
for k in ("hidden_size", "num_attention_heads", "intermediate_size", "num_hidden_layers",
          "vocab_size", "max_position_embeddings", "type_vocab_size", "layer_norm_eps",
          "hidden_act", "id2label", "label2id"):
    assert ca[k] == cb[k], (k, ca[k], cb[k])
assert cb["architectures"] == ["BertForSequenceClassification"] and cb["model_type"] == "bert"
print("ok", len(b))
EOF
if grep -q "^ok 41$" "$tmp/py"; then pass saved_dir_has_hf_names_shapes_and_config
else fail saved_dir_has_hf_names_shapes_and_config "$(head -c 400 "$tmp/py")"; fi

# bad directories: refused with exit 2, the field or tensor named, nothing written
mkdir -p "$tmp/bad"
sed 's/"vocab_size": 1000/"vocab_size": 1099511627776/' "$G/config.json" >"$tmp/bad/config.json"
cp "$G/model.safetensors" "$tmp/bad/"
"$SKY" train --model-dir "$tmp/bad" --steps 1 --save-dir "$tmp/nothing" >"$tmp/o" 2>"$tmp/err"
rc=$?
if [ $rc -eq 2 ] && grep -q "vocab_size is 1099511627776, outside" "$tmp/err" &&
	[ ! -e "$tmp/nothing" ]; then pass absurd_vocab_refused_nothing_written
else fail absurd_vocab_refused_nothing_written "rc $rc: $(head -c 300 "$tmp/err")"; fi
sed 's/"hidden_act": "gelu"/"hidden_act": "relu"/' "$G/config.json" >"$tmp/bad/config.json"
"$SKY" eval --model-dir "$tmp/bad" >"$tmp/o" 2>"$tmp/err"
rc=$?
if [ $rc -eq 2 ] && grep -q "hidden_act 'relu' is not supported" "$tmp/err"; then
	pass unsupported_activation_refused
else fail unsupported_activation_refused "rc $rc: $(head -c 300 "$tmp/err")"; fi
sed 's/"num_attention_heads": 5/"num_attention_heads": 6/' "$G/config.json" >"$tmp/bad/config.json"
"$SKY" bench layer --model-dir "$tmp/bad" >"$tmp/o" 2>"$tmp/err"
rc=$?
if [ $rc -eq 2 ] && grep -q "num_attention_heads 6 does not divide hidden_size 80" "$tmp/err"; then
	pass heads_not_dividing_refused
else fail heads_not_dividing_refused "rc $rc: $(head -c 300 "$tmp/err")"; fi
# a checkpoint of other shapes: the tensor and both shapes named
sed 's/"intermediate_size": 136/"intermediate_size": 128/' "$G/config.json" >"$tmp/bad/config.json"
"$SKY" train --model-dir "$tmp/bad" --steps 1 --save-dir "$tmp/nothing" >"$tmp/o" 2>"$tmp/err"
rc=$?
if [ $rc -eq 2 ] &&
	grep -q "bert.encoder.layer.0.intermediate.dense.weight: expected shape (128, 80), found (136, 80)" "$tmp/err" &&
	[ ! -e "$tmp/nothing" ]; then pass wrong_shape_names_tensor_and_shapes
else fail wrong_shape_names_tensor_and_shapes "rc $rc: $(head -c 300 "$tmp/err")"; fi
cp "$G/config.json" "$tmp/bad/config.json"
rm "$tmp/bad/model.safetensors"
"$SKY" eval --model-dir "$tmp/bad" >"$tmp/o" 2>"$tmp/err"
rc=$?
if [ $rc -eq 2 ] && grep -q "no model.safetensors or model.safetensors.index.json" "$tmp/err"; then
	pass missing_checkpoint_refused
else fail missing_checkpoint_refused "rc $rc: $(head -c 300 "$tmp/err")"; fi

# what --model-dir does not take, said plainly
"$SKY" eval --model-dir "$G" --precision int8 >"$tmp/o" 2>"$tmp/err"
rc=$?
if [ $rc -eq 2 ] && grep -q "has none of the shapes of tiny" "$tmp/err"; then
	pass eval_int8_dir_refused
else fail eval_int8_dir_refused "rc $rc: $(head -c 300 "$tmp/err")"; fi
"$SKY" train --model-dir "$G" --model tiny >"$tmp/o" 2>"$tmp/err"
rc=$?
if [ $rc -eq 2 ] && grep -q "exclude each other" "$tmp/err"; then pass model_and_model_dir_exclusive
else fail model_and_model_dir_exclusive "rc $rc: $(head -c 300 "$tmp/err")"; fi
