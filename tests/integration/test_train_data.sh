#!/bin/sh
# Fine-tuning on a prepared set (docs/data.md): sky train --model-dir D
# --data train.skyds --eval-data dev.skyds on real text (fortunes from three
# collections, labelled by collection). Each epoch reports dev metrics; the
# same command gives the same bytes; the saved directory evaluates to the
# last epoch's dev figures, names the set's labels and carries the
# tokenizer; the config's dropout is applied; bad combinations are refused
# with the reason. Needs no broker.
set -u
cd "$(dirname "$0")/../.."
B="${SKY_BUILD:-build/host}"
SKY="$B/bin/sky"
F=/usr/share/games/fortunes
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

pass() { echo "PASS $1"; }
fail() { echo "FAIL $1: $2"; }

if [ ! -f "$F/computers" ]; then
	fail fortunes "no $F/computers (tools/install-deps.sh installs fortunes)"
	exit 0
fi

# 600 fortunes, 90 for dev; a model directory: the golden F16 BERT's shapes
# (hidden 80, 5 heads) without its label names, a vocabulary from the text
mkdir -p "$tmp/m"
python3 - "$F" "$tmp" <<'PY'
import json, random, sys
src, out = sys.argv[1], sys.argv[2]
rows = []
for name in ("computers", "literature", "science"):
    n = 0
    for e in open(f"{src}/{name}", encoding="utf-8").read().split("\n%\n"):
        e = " ".join(e.split())
        if not e or len(e) > 300:
            continue
        rows.append((e, name))
        n += 1
        if n == 200:
            break
random.Random(1).shuffle(rows)
for nm, rs in (("train", rows[90:]), ("dev", rows[:90])):
    with open(f"{out}/{nm}.tsv", "w", encoding="utf-8") as f:
        f.write("sentence\tlabel\n")
        for e, l in rs:
            f.write(e + "\t" + l + "\n")
open(f"{out}/corpus.txt", "w").write("\n".join(e for e, _ in rows[90:]) + "\n")
c = json.load(open("tests/data/golden/hf/model/config.json"))
for k in ("id2label", "label2id"):
    c.pop(k, None)
c["num_labels"] = 3
json.dump(c, open(f"{out}/m/config.json", "w"), indent=1)
c["hidden_dropout_prob"] = 0.0
c["attention_probs_dropout_prob"] = 0.0
import os
os.makedirs(f"{out}/m0", exist_ok=True)
json.dump(c, open(f"{out}/m0/config.json", "w"), indent=1)
PY
cp tests/data/golden/hf/model/model.safetensors "$tmp/m/"
"$SKY" vocab build --corpus "$tmp/corpus.txt" --size 900 --out "$tmp/m/vocab.txt" >/dev/null 2>&1
cp "$tmp/m/vocab.txt" "$tmp/m/model.safetensors" "$tmp/m0/"
"$SKY" data prepare --model-dir "$tmp/m" --input "$tmp/train.tsv" --out "$tmp/train.skyds" \
	--seq 48 --quiet >/dev/null 2>"$tmp/err"
"$SKY" data prepare --model-dir "$tmp/m" --input "$tmp/dev.tsv" --out "$tmp/dev.skyds" --seq 48 \
	--labels-from "$tmp/train.skyds" --quiet >/dev/null 2>>"$tmp/err"
[ -s "$tmp/train.skyds" ] && [ -s "$tmp/dev.skyds" ] || fail prepare "$(cat "$tmp/err")"

run() { # OUT [extra options]: train 2 epochs from the seed, JSON to OUT.json
	o=$1
	shift
	"$SKY" train --model-dir "$tmp/m" --data "$tmp/train.skyds" --eval-data "$tmp/dev.skyds" \
		--epochs 2 --lr 1e-3 --init-weights --quiet --json --save-dir "$tmp/$o" "$@" \
		>"$tmp/$o.json" 2>"$tmp/$o.err"
}

run out
rc=$?
if [ $rc -eq 0 ] && python3 - "$tmp/out.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
e = j["epochs"]
assert len(e) == 2 and [x["epoch"] for x in e] == [1, 2], e
assert j["rows"] == 510 and j["steps_per_epoch"] == 63 and j["steps"] == 126, j
for x in e:
    d = x["dev"]
    assert d["rows"] == 90 and 0 <= d["accuracy"] <= 1 and 0 <= d["macro_f1"] <= 1, d
    assert sum(map(sum, d["confusion"])) == 90, d["confusion"]
    assert sorted(d["labels"]) == ["computers", "literature", "science"], d["labels"]
assert j["hidden_dropout"] > 0.09 and j["attention_dropout"] > 0.09, j
PY
then pass epochs_report_dev_metrics
else fail epochs_report_dev_metrics "rc $rc: $(head -c 400 "$tmp/out.err")"; fi

# the same command: the same bytes
run again
if cmp -s "$tmp/out/model.safetensors" "$tmp/again/model.safetensors"
then pass same_command_same_bytes
else fail same_command_same_bytes "two runs saved different weights"; fi

# the saved directory: the set's label names, the tokenizer, and sky eval
# --data gives the last epoch's dev figures
"$SKY" eval --model-dir "$tmp/out" --data "$tmp/dev.skyds" --json >"$tmp/ev.json" 2>"$tmp/ev.err"
rc=$?
if [ $rc -eq 0 ] && cmp -s "$tmp/m/vocab.txt" "$tmp/out/vocab.txt" &&
	python3 - "$tmp/out.json" "$tmp/ev.json" "$tmp/out/config.json" <<'PY'
import json, sys
t, v, c = (json.load(open(p)) for p in sys.argv[1:4])
last = t["epochs"][-1]["dev"]
assert v["accuracy"] == last["accuracy"] and v["confusion"] == last["confusion"], (v, last)
# the loss is a float32 sum over rows whose gemm shapes differ between the
# training run's evaluation and sky eval's (their batch); OpenBLAS blocks
# them differently on some CPUs (AMD EPYC, 2026-12-03: 3.5e-9 relative), so
# the loss agrees to float32's precision, the classes exactly
assert abs(v["loss"] - last["loss"]) <= 1e-6 * abs(last["loss"]), (v["loss"], last["loss"])
names = [c["id2label"][str(i)] for i in range(3)]
assert names == last["labels"], (names, last["labels"])
PY
then pass saved_dir_evaluates_to_last_epoch
else fail saved_dir_evaluates_to_last_epoch "rc $rc: $(head -c 400 "$tmp/ev.err")"; fi

# the config's dropout is applied: without it the weights differ
"$SKY" train --model-dir "$tmp/m0" --data "$tmp/train.skyds" --epochs 2 --lr 1e-3 \
	--init-weights --quiet --json --save-dir "$tmp/nodrop" >"$tmp/nd.json" 2>"$tmp/nd.err"
rc=$?
if [ $rc -eq 0 ] && ! cmp -s "$tmp/out/model.safetensors" "$tmp/nodrop/model.safetensors" &&
	grep -q '"hidden_dropout":0' "$tmp/nd.json"
then pass config_dropout_is_applied
else fail config_dropout_is_applied "rc $rc: $(head -c 300 "$tmp/nd.err")"; fi

# refusals, each with its reason and nothing written
refused() { # NAME RC PATTERN: the last command's exit code and stderr
	if [ "$rc" -eq "$2" ] && grep -q "$3" "$tmp/err" && [ ! -e "$tmp/nothing" ]
	then pass "$1"
	else fail "$1" "rc $rc: $(head -c 300 "$tmp/err")"; fi
}
"$SKY" train --data "$tmp/train.skyds" >/dev/null 2>"$tmp/err"
rc=$?; refused data_needs_model_dir 2 "goes with --model-dir"
"$SKY" train --model-dir "$tmp/m" --data "$tmp/train.skyds" --epochs 2 --steps 5 \
	--save-dir "$tmp/nothing" >/dev/null 2>"$tmp/err"
rc=$?; refused steps_or_epochs 2 "exclude each other"
"$SKY" train --model-dir "$tmp/m" --data "$tmp/train.skyds" --batch 600 \
	--save-dir "$tmp/nothing" >/dev/null 2>"$tmp/err"
rc=$?; refused fewer_rows_than_a_step 2 "has 510 rows, fewer than one step's 600 x 1"
"$SKY" data prepare --model-dir "$tmp/m" --input "$tmp/dev.tsv" --out "$tmp/dev2.skyds" \
	--seq 48 --labels literature,science,computers --quiet >/dev/null 2>&1
"$SKY" train --model-dir "$tmp/m" --data "$tmp/train.skyds" --eval-data "$tmp/dev2.skyds" \
	--save-dir "$tmp/nothing" >/dev/null 2>"$tmp/err"
rc=$?; refused dev_labels_differ 2 "name their labels differently"
"$SKY" data prepare --model-dir "$tmp/m" --input "$tmp/dev.tsv" --out "$tmp/dev3.skyds" \
	--seq 32 --labels-from "$tmp/train.skyds" --quiet >/dev/null 2>&1
"$SKY" train --model-dir "$tmp/m" --data "$tmp/train.skyds" --eval-data "$tmp/dev3.skyds" \
	--save-dir "$tmp/nothing" >/dev/null 2>"$tmp/err"
rc=$?; refused dev_length_differs 2 "has rows of 48 tokens, .*dev3.skyds of 32"
