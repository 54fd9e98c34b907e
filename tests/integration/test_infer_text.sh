#!/bin/sh
# Serving text: a Hugging Face directory (config.json with id2label,
# vocab.txt, the model's weights) served by a 2-board fleet over a real
# mosquitto, asked with `sky infer --model-dir D --text ...`:
#   - the answers are the logits `sky eval` gives on one board for the ids
#     `sky tokenize` gives (int8, bit for bit), with the label names and
#     softmax probabilities of those logits, in text and --json;
#   - --input-file takes plain lines and JSON Lines (text, pair), and a
#     text longer than the plan's sequence is truncated to it;
#   - a directory whose tokenizer is not the served model's (the hash the
#     job's signed plan carries, from sky job submit --tokenizer) is
#     refused with the reason, and so are a bad input file and a job that
#     names no tokenizer.
# PASS/FAIL lines; bounded (every wait has a deadline).
set -u
cd "$(dirname "$0")/../.."
. tests/integration/fleet.sh
sky_fleet_begin infer_text
sky_fleet_start
sky_fleet_boards 2
"$SKY" pki client --dir "$PKI" t >"$W/client.out" 2>&1 || fail infer_text_client "$(cat "$W/client.out")"
kill -HUP "$SKY_BROKER_PID" # mosquitto reads the ACL with the client's lines

# the directory: `tiny` shapes (what a serving fleet runs), 64 tokens, two labels
D="$W/D"
mkdir -p "$D"
python3 - "$D" <<'EOF'
import json, sys
d = sys.argv[1]
letters = "abcdefghijklmnopqrstuvwxyz"
toks = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + list(letters) + ["##" + c for c in letters]
toks += ["hello", "world", "cold", "warm", ".", ",", "!"]
assert len(toks) == 64
open(d + "/vocab.txt", "w").write("\n".join(toks) + "\n")
json.dump({"model_type": "bert", "hidden_size": 32, "num_attention_heads": 2,
           "intermediate_size": 64, "num_hidden_layers": 2, "vocab_size": 64,
           "max_position_embeddings": 64, "type_vocab_size": 2, "num_labels": 2,
           "id2label": {"0": "cold", "1": "warm"}, "label2id": {"cold": 0, "warm": 1}},
          open(d + "/config.json", "w"))
EOF
"$SKY" train --model tiny --layers 2 --steps 3 --seed 2 --save "$D/model.safetensors" >"$W/train.log" 2>&1 &&
	"$SKY" quantize --in "$D/model.safetensors" --out "$W/q.safetensors" >"$W/quant.log" 2>&1 ||
	fail infer_text_model_made "$(tail -2 "$W/train.log" "$W/quant.log")"
# another tokenizer: the same tokens with two swapped (other ids, another hash)
D2="$W/D2"
mkdir -p "$D2"
cp "$D/config.json" "$D/model.safetensors" "$D2/"
sed -e 's/^hello$/@@/' -e 's/^world$/hello/' -e 's/^@@$/world/' "$D/vocab.txt" >"$D2/vocab.txt"

if "$SKY" job submit --pki "$PKI" --broker "$BR" --job s1 --min-boards 2 --task infer \
	--weights "$W/q.safetensors" --tokenizer "$D" --algo even --wait 90 >"$W/s1.submit" 2>&1; then
	pass infer_text_job_with_tokenizer_acked
else
	fail infer_text_job_with_tokenizer_acked "$(tail -3 "$W/s1.submit")"
fi
ask() { # out-prefix, sky infer options...
	_o=$1
	shift
	"$SKY" infer --pki "$PKI/clients/t" --broker "$BR" --job s1 --timeout 60 "$@" \
		>"$W/$_o.out" 2>"$W/$_o.err"
}
# want OUT TEXT [SEQ]: the logits sky eval gives one board for sky tokenize's ids
want() {
	"$SKY" tokenize --model-dir "$D" --text "$2" --seq "${3:-16}" --json >"$W/$1.tok" 2>"$W/$1.tok.err" &&
		ids=$(python3 -c 'import json,sys; t=json.load(open(sys.argv[1])); print(",".join(str(i) for i, m in zip(t["input_ids"], t["attention_mask"]) if m))' "$W/$1.tok") &&
		"$SKY" eval --weights "$W/q.safetensors" --precision int8 --tokens "$ids" >"$W/$1.want" 2>"$W/$1.want.err"
}
# check OUT ROW WANT: row ROW of OUT's JSON answers has WANT's logits bit for
# bit (as float32), the probabilities are their softmax and the label the
# argmax's name
check() {
	python3 - "$W/$1.out" "$2" "$W/$3.want" <<'EOF'
import json, math, struct, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
r = rows[int(sys.argv[2])]
want = json.loads(open(sys.argv[3]).read())["logits"]
f32 = lambda v: struct.pack("<f", v)
assert r["ok"] and [f32(v) for v in r["logits"]] == [f32(v) for v in want], (r, want)
mx = max(r["logits"]); e = [math.exp(v - mx) for v in r["logits"]]; p = [v / sum(e) for v in e]
names = ["cold", "warm"]
assert all(abs(r["probs"][n] - q) < 1e-12 for n, q in zip(names, p)), r
assert r["label"] == names[max(range(2), key=lambda k: r["logits"][k])] and r["label_id"] in (0, 1), r
EOF
}

# ---- one text, --json and plain ----------------------------------------------------
T1="Hello world, cold!"
if ask one --model-dir "$D" --text "$T1" --json && want one "$T1" && check one 0 one 2>"$W/one.check"; then
	pass infer_text_answer_is_sky_evals_logits_with_labels_and_probabilities
else
	fail infer_text_answer_is_sky_evals_logits_with_labels_and_probabilities \
		"$(head -c 300 "$W/one.out" "$W/one.err" "$W/one.want" "$W/one.check")"
fi
if ask plain --model-dir "$D" --text "$T1" &&
	grep -Eq '^[^ ]+  (cold|warm) [0-9.]+  \(cold [0-9.]+, warm [0-9.]+\)  Hello world, cold!$' "$W/plain.out"; then
	pass infer_text_prints_label_and_probabilities
else
	fail infer_text_prints_label_and_probabilities "$(head -c 300 "$W/plain.out" "$W/plain.err")"
fi

# the same through the directory: sky eval --model-dir D --precision int8
# quantises D as the submit did
ids=$("$SKY" tokenize --model-dir "$D" --text "$T1" --json | python3 -c 'import json,sys; print(",".join(str(i) for i in json.load(sys.stdin)["input_ids"]))')
if "$SKY" eval --model-dir "$D" --precision int8 --tokens "$ids" >"$W/dir.want" 2>"$W/dir.err" &&
	check one 0 dir 2>"$W/dir.check"; then
	pass infer_text_answer_is_sky_eval_model_dir_int8
else
	fail infer_text_answer_is_sky_eval_model_dir_int8 "$(head -c 300 "$W/dir.want" "$W/dir.err" "$W/dir.check")"
fi
# sky eval --model-dir D --data --precision int8: the metrics of the int8
# logits of the same rows (sky eval --input), at two batch sizes
printf 'sentence\tlabel\nhello world\tcold\nwarm warm\twarm\ncold day\tcold\nwarm hello\twarm\nworld cold\tcold\nhello\twarm\nwarm cold world\twarm\nday\tcold\ncold cold\tcold\n' >"$W/dev.tsv"
"$SKY" data prepare --model-dir "$D" --input "$W/dev.tsv" --out "$W/dev.skyds" --seq 16 --labels cold,warm \
	>"$W/prep.log" 2>&1
ok=1
for b in 8 3; do
	"$SKY" eval --model-dir "$D" --data "$W/dev.skyds" --precision int8 --batch $b --json \
		>"$W/int8.$b.json" 2>"$W/int8.$b.err" || ok=0
done
"$SKY" eval --model-dir "$D" --precision int8 --input "$W/dev.skyds" --seq 16 >"$W/int8.rows" 2>&1 || ok=0
if [ $ok = 1 ] && python3 - "$W/int8.8.json" "$W/int8.3.json" "$W/int8.rows" <<'EOF' 2>"$W/int8.check"; then
import json, math, sys
labels = [0, 1, 0, 1, 0, 1, 1, 0, 0]
rows = [json.loads(l)["logits"] for l in open(sys.argv[3]) if l.startswith("{")]
assert len(rows) == len(labels), rows
loss = sum(math.log(sum(math.exp(v - max(r)) for v in r)) + max(r) - r[y] for r, y in zip(rows, labels)) / len(rows)
acc = sum(max(range(2), key=lambda k: r[k]) == y for r, y in zip(rows, labels)) / len(rows)
for f in sys.argv[1:3]:
    j = json.load(open(f))
    assert j["precision"] == "int8" and j["rows"] == 9, j
    assert abs(j["accuracy"] - acc) < 1e-12 and abs(j["loss"] - loss) < 1e-9, (j, acc, loss)
EOF
	pass infer_text_eval_int8_data_metrics_are_its_logits
else
	fail infer_text_eval_int8_data_metrics_are_its_logits "$(head -c 400 "$W/int8.8.json" "$W/int8.8.err" "$W/int8.check")"
fi
# a directory int8 cannot run (not a preset's shapes) is refused with the reason
mkdir -p "$W/odd"
cp "$D/vocab.txt" "$D/model.safetensors" "$W/odd/"
sed 's/"hidden_size": 32/"hidden_size": 40/' "$D/config.json" >"$W/odd/config.json"
"$SKY" eval --model-dir "$W/odd" --precision int8 --data "$W/dev.skyds" >"$W/odd.out" 2>&1
rc=$?
if [ $rc = 2 ] && grep -q "has none of the shapes of tiny" "$W/odd.out"; then
	pass infer_text_eval_int8_odd_shapes_refused
else
	fail infer_text_eval_int8_odd_shapes_refused "rc $rc: $(head -c 300 "$W/odd.out")"
fi

# ---- a file: a plain line, a JSON Lines pair, a text over the plan's 16 tokens -----
T3="warm warm cold hello world warm cold, cold! hello world warm cold warm world hello"
printf '%s\n{"text":"cold world","pair":"warm hello"}\n%s\n' "$T1" "$T3" >"$W/in.txt"
if ask file --model-dir "$D" --input-file "$W/in.txt" --json && [ "$(grep -c '"ok":true' "$W/file.out")" = 3 ] &&
	check file 0 one && want long "$T3" && check file 2 long &&
	grep -q '"pair":"warm hello"' "$W/file.out" && grep -q "truncated to 16 tokens" "$W/file.err" &&
	grep -q "type 0" "$W/file.err"; then
	pass infer_text_input_file_plain_jsonl_and_truncated
else
	fail infer_text_input_file_plain_jsonl_and_truncated "$(head -c 400 "$W/file.out" "$W/file.err")"
fi

# ---- refusals, each with its reason -------------------------------------------------
ask other --model-dir "$D2" --text "$T1"
rc=$?
if [ $rc != 0 ] && grep -q "tokenizer (hash [0-9a-f]\{8\}) is not the tokenizer of the model job s1 serves (hash [0-9a-f]\{8\})" "$W/other.err" &&
	[ ! -s "$W/other.out" ]; then
	pass infer_text_other_tokenizer_refused
else
	fail infer_text_other_tokenizer_refused "rc $rc: $(head -c 300 "$W/other.err")"
fi
printf 'cold\n{"pair":"warm"}\n' >"$W/bad.txt"
ask bad --model-dir "$D" --input-file "$W/bad.txt"
rc=$?
if [ $rc = 2 ] && grep -q 'bad.txt line 2: no "text" string' "$W/bad.err"; then
	pass infer_text_bad_input_file_refused
else
	fail infer_text_bad_input_file_refused "rc $rc: $(head -c 300 "$W/bad.err")"
fi
ask nodir --text "$T1"
rc=$?
if [ $rc = 2 ] && grep -q "need --model-dir" "$W/nodir.err"; then
	pass infer_text_needs_model_dir
else
	fail infer_text_needs_model_dir "rc $rc: $(head -c 300 "$W/nodir.err")"
fi
# a job submitted without --tokenizer: nothing to check the directory against
if "$SKY" job submit --pki "$PKI" --broker "$BR" --job s2 --min-boards 2 --task infer \
	--weights "$W/q.safetensors" --algo even --wait 90 >"$W/s2.submit" 2>&1; then
	"$SKY" infer --pki "$PKI/clients/t" --broker "$BR" --job s2 --timeout 60 --model-dir "$D" \
		--text "$T1" >"$W/s2.out" 2>"$W/s2.err"
	rc=$?
	if [ $rc != 0 ] && grep -q "job s2 names no tokenizer" "$W/s2.err"; then
		pass infer_text_job_without_tokenizer_refused
	else
		fail infer_text_job_without_tokenizer_refused "rc $rc: $(head -c 300 "$W/s2.err")"
	fi
else
	fail infer_text_job_without_tokenizer_refused "s2 not acked: $(tail -3 "$W/s2.submit")"
fi
sky_fleet_end
