#!/bin/sh
# sky data prepare and sky data info on real text (docs/data.md): fortunes
# from three collections (/usr/share/games/fortunes, the Debian package),
# labelled by collection, as TSV, as CSV (fortunes keep their line breaks
# inside quoted fields) and as JSON Lines; all three give the same token
# ids. Bad rows are reported with their line and reason and nothing is
# written; --skip-bad skips and counts them; a dev set takes the train
# set's label order; info prints the counts. Needs no broker.
set -u
cd "$(dirname "$0")/../.."
B="${SKY_BUILD:-build/host}"
SKY="$B/bin/sky"
F=/usr/share/games/fortunes
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

pass() { echo "PASS $1"; }
fail() { echo "FAIL $1: $2"; }
field() { # FILE KEY: a top-level value of a one-line JSON object
	python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$1" "$2"
}

if [ ! -f "$F/computers" ]; then
	fail fortunes "no $F/computers (tools/install-deps.sh installs fortunes)"
	exit 0
fi

# the text: up to 150 fortunes of each collection, as TSV, CSV and JSONL
python3 - "$F" "$tmp" <<'PY'
import csv, json, sys
src, out = sys.argv[1], sys.argv[2]
rows = []
for name in ("computers", "literature", "science"):
    text = open(f"{src}/{name}", encoding="utf-8", errors="strict").read()
    n = 0
    for e in text.split("\n%\n"):
        e = e.strip("\n")
        if not e.strip() or "\t" in e or "\b" in e:
            continue
        rows.append((e, name))
        n += 1
        if n == 150:
            break
with open(f"{out}/train.tsv", "w", encoding="utf-8") as f:
    f.write("sentence\tlabel\n")
    for e, l in rows:
        f.write(e.replace("\n", " ") + "\t" + l + "\n")
with open(f"{out}/train.csv", "w", encoding="utf-8", newline="") as f:
    w = csv.writer(f)
    w.writerow(["text", "label"])
    for e, l in rows:
        w.writerow([e, l])
with open(f"{out}/train.jsonl", "w", encoding="utf-8") as f:
    for e, l in rows:
        f.write(json.dumps({"text": e, "label": l}) + "\n")
with open(f"{out}/dev.tsv", "w", encoding="utf-8") as f:
    f.write("sentence\tlabel\n")
    for e, l in reversed(rows[:40] + rows[-40:]):
        f.write(e.replace("\n", " ") + "\t" + l + "\n")
open(f"{out}/corpus.txt", "w").write("\n".join(e for e, _ in rows) + "\n")

PY
nrows=$(($(wc -l <"$tmp/train.tsv") - 1))
mkdir -p "$tmp/m"
"$SKY" vocab build --corpus "$tmp/corpus.txt" --size 2000 --out "$tmp/m/vocab.txt" >/dev/null 2>&1

# the same ids from every format (python reads the safetensors tensors)
same_ids() {
	python3 - "$1" "$2" <<'PY'
import json, struct, sys
def tensors(p):
    b = open(p, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    h = json.loads(b[8:8 + n])
    return {k: b[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]]
            for k, v in h.items() if k != "__metadata__"}
a, b = tensors(sys.argv[1]), tensors(sys.argv[2])
sys.exit(0 if a == b and len(a) == 4 else 1)
PY
}
ok=1
for fmt in tsv csv jsonl; do
	"$SKY" data prepare --model-dir "$tmp/m" --input "$tmp/train.$fmt" --out "$tmp/$fmt.skyds" \
		--seq 64 --json >"$tmp/$fmt.json" 2>"$tmp/err" || { ok=0; echo "$fmt: $(cat "$tmp/err")"; }
done
if [ $ok -eq 1 ] && [ "$(field "$tmp/tsv.json" rows)" = "$nrows" ] &&
	[ "$(field "$tmp/csv.json" rows)" = "$nrows" ] && [ "$(field "$tmp/jsonl.json" rows)" = "$nrows" ] &&
	[ "$(field "$tmp/tsv.json" layout)" = sst2 ] &&
	same_ids "$tmp/tsv.skyds" "$tmp/csv.skyds" && same_ids "$tmp/tsv.skyds" "$tmp/jsonl.skyds"; then
	pass tsv_csv_jsonl_same_ids
else fail tsv_csv_jsonl_same_ids "rows $nrows: $(cat "$tmp"/*.json)"; fi

# info: rows, the three labels and their counts, in first-seen order
"$SKY" data info --json "$tmp/csv.skyds" >"$tmp/info.json" 2>"$tmp/err"
if python3 - "$tmp/info.json" "$tmp/train.tsv" <<'PY'
import json, sys
i = json.load(open(sys.argv[1]))
lines = open(sys.argv[2], encoding="utf-8").read().splitlines()[1:]
want = {}
for l in lines:
    want[l.rsplit("\t", 1)[1]] = want.get(l.rsplit("\t", 1)[1], 0) + 1
got = {l["name"]: l["rows"] for l in i["labels"]}
assert [l["name"] for l in i["labels"]] == ["computers", "literature", "science"], i["labels"]
assert got == want, (got, want)
assert i["rows"] == len(lines) and i["seq"] == 64 and i["label_source"] == "data"
assert i["source"] == "train.csv" and len(i["source_sha256"]) == 64
assert 2 < i["length"]["min"] <= i["length"]["p50"] <= i["length"]["max"] <= 64
assert i["truncated"] == i["full_rows"] > 0, i   # long fortunes are cut to 64
PY
then pass info_counts
else fail info_counts "$(cat "$tmp/info.json" "$tmp/err")"; fi
"$SKY" data info "$tmp/csv.skyds" >"$tmp/info.txt" 2>&1
if grep -q "labels (data):" "$tmp/info.txt" && grep -q "computers" "$tmp/info.txt" &&
	grep -q "^truncated to 64: " "$tmp/info.txt"; then pass info_text
else fail info_text "$(cat "$tmp/info.txt")"; fi

# a dev set in the train set's label order (its first row is science)
"$SKY" data prepare --model-dir "$tmp/m" --input "$tmp/dev.tsv" --out "$tmp/dev.skyds" \
	--labels-from "$tmp/tsv.skyds" --json >"$tmp/dev.json" 2>"$tmp/err"
"$SKY" data prepare --model-dir "$tmp/m" --input "$tmp/dev.tsv" --out "$tmp/dev2.skyds" \
	--json >"$tmp/dev2.json" 2>>"$tmp/err"
if python3 -c 'import json,sys; a=json.load(open(sys.argv[1])); b=json.load(open(sys.argv[2]))
assert a["labels"]==["computers","literature","science"] and a["label_source"]=="given", a
assert b["labels"][0]=="science", b' "$tmp/dev.json" "$tmp/dev2.json" 2>>"$tmp/err"; then
	pass dev_labels_from_train
else fail dev_labels_from_train "$(cat "$tmp/err")"; fi

# bad rows: reported with line and reason, nothing written
{
	head -3 "$tmp/train.tsv"
	printf 'caf\351 au lait\tcomputers\n' # line 4: Latin-1, not UTF-8
	printf 'two\ttabs\tscience\n'         # line 5
	printf ' \tscience\n'                 # line 6
	sed -n '4,10p' "$tmp/train.tsv"
} >"$tmp/bad.tsv"
"$SKY" data prepare --model-dir "$tmp/m" --input "$tmp/bad.tsv" --out "$tmp/bad.skyds" \
	>"$tmp/out" 2>"$tmp/err"
rc=$?
if [ $rc -eq 1 ] && [ ! -e "$tmp/bad.skyds" ] &&
	grep -q "line 4: text: invalid UTF-8 at byte 3 (0xe9)" "$tmp/err" &&
	grep -q "line 5: 3 columns, expected 2 (as the header)" "$tmp/err" &&
	grep -q "line 6: empty text" "$tmp/err" &&
	grep -q "3 bad rows (--skip-bad skips them); nothing written" "$tmp/err" &&
	[ -z "$(ls "$tmp" | grep '\.tmp\.')" ]; then
	pass bad_rows_refused_nothing_written
else fail bad_rows_refused_nothing_written "rc $rc: $(cat "$tmp/err")"; fi
"$SKY" data prepare --model-dir "$tmp/m" --input "$tmp/bad.tsv" --out "$tmp/bad.skyds" \
	--skip-bad --json >"$tmp/skip.json" 2>"$tmp/err"
rc=$?
if [ $rc -eq 0 ] && [ "$(field "$tmp/skip.json" rows)" = 9 ] &&
	[ "$(field "$tmp/skip.json" bad_rows_skipped)" = 3 ]; then
	pass skip_bad_counts
else fail skip_bad_counts "rc $rc: $(cat "$tmp/err" "$tmp/skip.json")"; fi

# an unknown label against a given list; refusals of the command line
"$SKY" data prepare --model-dir "$tmp/m" --input "$tmp/dev.tsv" --out "$tmp/x.skyds" \
	--labels computers,literature >/dev/null 2>"$tmp/err"
rc=$?
if [ $rc -eq 1 ] && grep -q "unknown label 'science' (labels: computers, literature)" "$tmp/err" &&
	[ ! -e "$tmp/x.skyds" ]; then pass unknown_label
else fail unknown_label "rc $rc: $(head -c 400 "$tmp/err")"; fi
cp "$tmp/train.tsv" "$tmp/train.txt"
"$SKY" data prepare --model-dir "$tmp/m" --input "$tmp/train.txt" --out "$tmp/x.skyds" 2>"$tmp/err"
rc=$?
"$SKY" data info "$tmp/m/vocab.txt" 2>"$tmp/err2"
rc2=$?
if [ $rc -eq 2 ] && grep -q "give --format" "$tmp/err" && [ $rc2 -eq 1 ] &&
	grep -q "vocab.txt" "$tmp/err2"; then pass refusals
else fail refusals "rc $rc $rc2: $(cat "$tmp/err" "$tmp/err2")"; fi
"$SKY" data prepare --model-dir "$tmp/m" --input "$tmp/train.tsv" --out "$tmp/x.skyds" \
	--text-col review 2>"$tmp/err"
rc=$?
if [ $rc -eq 1 ] && grep -q "text column 'review' is not in the header ('sentence', 'label')" "$tmp/err"
then pass missing_column
else fail missing_column "rc $rc: $(cat "$tmp/err")"; fi

# sky eval --data: the metrics of a set equal those computed from the
# logits sky eval --input gives for the same rows (a .skyds is a
# safetensors file with input_ids and attention_mask), at any batch size
# (the filler rows of the last micro-batch are not counted)
G=tests/data/golden/hf/model
mkdir -p "$tmp/hm"
cp "$G/config.json" "$G/model.safetensors" "$tmp/hm/"
"$SKY" vocab build --corpus "$tmp/corpus.txt" --size 900 --out "$tmp/hm/vocab.txt" >/dev/null 2>&1
python3 - "$tmp" <<'PY'
import sys
t = sys.argv[1]
rows = [l.split("\t") for l in open(f"{t}/train.tsv", encoding="utf-8").read().splitlines()[1:40]]
names = ["negative", "neutral", "positive"]
with open(f"{t}/ev.tsv", "w", encoding="utf-8") as f:
    f.write("sentence\tlabel\n")
    for i, (s, _) in enumerate(rows):
        f.write(f"{s}\t{names[i % 3] if i % 5 else i % 3}\n")  # names, and ids as integers
PY
"$SKY" data prepare --model-dir "$tmp/hm" --input "$tmp/ev.tsv" --out "$tmp/ev.skyds" --seq 48 \
	--quiet >/dev/null 2>"$tmp/err"
"$SKY" eval --model-dir "$tmp/hm" --data "$tmp/ev.skyds" --json >"$tmp/ev8.json" 2>>"$tmp/err"
"$SKY" eval --model-dir "$tmp/hm" --data "$tmp/ev.skyds" --batch 5 --json >"$tmp/ev5.json" 2>>"$tmp/err"
"$SKY" eval --model-dir "$tmp/hm" --input "$tmp/ev.skyds" --json >"$tmp/logits.json" 2>>"$tmp/err"
if python3 - "$tmp" <<'PY' 2>>"$tmp/err"
import json, math, struct, sys
t = sys.argv[1]
a, b = json.load(open(f"{t}/ev8.json")), json.load(open(f"{t}/ev5.json"))
lg = [json.loads(l)["logits"] for l in open(f"{t}/logits.json")]
raw = open(f"{t}/ev.skyds", "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
h = json.loads(raw[8:8 + n])
o = h["labels"]["data_offsets"]
labels = struct.unpack(f"<{(o[1] - o[0]) // 4}i", raw[8 + n + o[0]:8 + n + o[1]])
assert len(lg) == len(labels) == a["rows"] == 39, (len(lg), len(labels), a["rows"])
cm = [[0] * 3 for _ in range(3)]
loss = 0
for x, y in zip(lg, labels):
    m = max(x)
    loss += math.log(sum(math.exp(v - m) for v in x)) - (x[y] - m)
    cm[y][max(range(3), key=lambda k: (x[k], -k))] += 1
loss /= len(lg)
acc = sum(cm[k][k] for k in range(3)) / len(lg)
f1s = []
for k in range(3):
    sup, pred = sum(cm[k]), sum(cm[i][k] for i in range(3))
    p = cm[k][k] / pred if pred else 0
    r = cm[k][k] / sup if sup else 0
    if sup or pred:
        f1s.append(2 * p * r / (p + r) if p + r else 0)
    assert abs(a["per_class"][k]["precision"] - p) < 1e-12 and abs(a["per_class"][k]["recall"] - r) < 1e-12
assert a["confusion"] == cm, (a["confusion"], cm)
assert abs(a["loss"] - loss) < 1e-6 and a["accuracy"] == acc, (a["loss"], loss, a["accuracy"], acc)
assert abs(a["macro_f1"] - sum(f1s) / len(f1s)) < 1e-12
assert a["labels"] == ["negative", "neutral", "positive"]
# the GEMM's blocking moves logits by an ulp or so with the batch size
assert abs(a["loss"] - b["loss"]) < 1e-6, (a["loss"], b["loss"])
for k in ("accuracy", "macro_f1", "confusion", "per_class"):
    assert a[k] == b[k], (k, a[k], b[k])
PY
then pass eval_data_metrics
else fail eval_data_metrics "$(cat "$tmp/err" | head -c 600)"; fi
# a set whose labels are not the model's is refused, naming both
"$SKY" eval --model-dir "$tmp/hm" --data "$tmp/tsv.skyds" >/dev/null 2>"$tmp/err"
rc=$?
if [ $rc -eq 2 ] && grep -q "label 0 is 'computers' in .* but 'negative' in the model's config.json" "$tmp/err"
then pass eval_data_refuses_other_labels
else fail eval_data_refuses_other_labels "rc $rc: $(cat "$tmp/err")"; fi

# sky data split: every row in exactly one shard (the shards' rows, put
# together, are the set's rows as a multiset), IID shards within one row of
# each other, label skew at alpha 0.1 well above IID's (total variation from
# the set's label distribution), the same seed the
# same shards; bad arguments refused with the reason, nothing written
"$SKY" data split "$tmp/tsv.skyds" --owners 3 --out-prefix "$tmp/iid" --json >"$tmp/iid.json" 2>"$tmp/err"
"$SKY" data split "$tmp/tsv.skyds" --owners 3 --alpha 0.1 --seed 7 --out-prefix "$tmp/sk" --json \
	>"$tmp/sk.json" 2>>"$tmp/err"
"$SKY" data split "$tmp/tsv.skyds" --owners 3 --alpha 0.1 --seed 7 --out-prefix "$tmp/sk2" \
	>/dev/null 2>>"$tmp/err"
if python3 - "$tmp" <<'PY'
import json, struct, sys
from collections import Counter
t = sys.argv[1]
def rows(p):
    b = open(p, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    h = json.loads(b[8:8 + n]); d = b[8 + n:]
    seq = h["input_ids"]["shape"][1]
    ids = d[h["input_ids"]["data_offsets"][0]:h["input_ids"]["data_offsets"][1]]
    lab = d[h["labels"]["data_offsets"][0]:h["labels"]["data_offsets"][1]]
    return [(ids[i * seq * 4:(i + 1) * seq * 4], lab[i * 4:(i + 1) * 4]) for i in range(len(lab) // 4)], h["__metadata__"]
whole, meta = rows(f"{t}/tsv.skyds")
for name in ("iid", "sk"):
    parts = [rows(f"{t}/{name}-{k}.skyds") for k in range(3)]
    got = Counter(r for p, _ in parts for r in p)
    assert got == Counter(whole), name
    for _, m in parts:
        assert "shard" in m["source"] and m["tokenizer_hash"] == meta["tokenizer_hash"], m
    sizes = [len(p) for p, _ in parts]
    if name == "iid":
        assert max(sizes) - min(sizes) <= 1, sizes
    j = json.load(open(f"{t}/{name}.json"))
    assert [s["rows"] for s in j["shards"]] == sizes, (j, sizes)
    # skew: the mean over shards of the total variation distance between
    # a shard's label distribution and the whole set's
    tot = [sum(s["label_rows"][l] for s in j["shards"]) for l in range(3)]
    tv = sum(0.5 * sum(abs(s["label_rows"][l] / s["rows"] - tot[l] / sum(tot)) for l in range(3))
             for s in j["shards"]) / 3
    if name == "iid": iid_tv = tv
    else: assert tv > iid_tv + 0.15, (tv, iid_tv)
for k in range(3):
    assert open(f"{t}/sk-{k}.skyds", "rb").read() == open(f"{t}/sk2-{k}.skyds", "rb").read()
PY
then pass split_shards_partition_the_set
else fail split_shards_partition_the_set "$(cat "$tmp/err" "$tmp/sk.json" | head -c 600)"; fi
"$SKY" data split "$tmp/tsv.skyds" --owners 1000 --out-prefix "$tmp/many" >/dev/null 2>"$tmp/err"
rc=$?
if [ $rc -ne 0 ] && grep -q "rows cannot give 1000 owners one each" "$tmp/err" && ! ls "$tmp"/many-* >/dev/null 2>&1
then pass split_refuses_more_owners_than_rows
else fail split_refuses_more_owners_than_rows "rc $rc: $(cat "$tmp/err")"; fi
"$SKY" data split "$tmp/tsv.skyds" --owners 3 --alpha 0.01 --min-rows 100 --out-prefix "$tmp/few" >/dev/null 2>"$tmp/err"
rc=$?
if [ $rc -ne 0 ] && grep -q "no Dirichlet(0.01) draw in 100 gave each of 3 owners 100 rows" "$tmp/err" &&
	! ls "$tmp"/few-* >/dev/null 2>&1
then pass split_refuses_an_impossible_minimum
else fail split_refuses_an_impossible_minimum "rc $rc: $(cat "$tmp/err")"; fi
