# A small fine-tuning setup for the fleet's integration tests (POSIX sh,
# sourced after fleet.sh): ft_setup DIR writes DIR/m, a Hugging Face model
# directory with the golden F16 BERT's odd shapes (hidden 80, 5 heads, FFN
# 136, 2 layers) and a vocabulary built from fortunes, and the prepared sets
# DIR/train.skyds and DIR/dev.skyds (fortunes of three collections labelled
# by collection, seq 24). Returns 1 if anything fails (FT_ERR says what).
ft_setup() {
	_ft=$1
	mkdir -p "$_ft/m"
	python3 - /usr/share/games/fortunes "$_ft" <<'PY' || { FT_ERR="python setup failed"; return 1; }
import json, random, sys
src, out = sys.argv[1], sys.argv[2]
rows = []
for name in ("computers", "literature", "science"):
    n = 0
    for e in open(f"{src}/{name}", encoding="utf-8").read().split("\n%\n"):
        e = " ".join(e.split())
        if not e or len(e) > 200:
            continue
        rows.append((e, name))
        n += 1
        if n == 40:
            break
random.Random(1).shuffle(rows)
for nm, rs in (("train", rows[24:]), ("dev", rows[:24])):
    with open(f"{out}/{nm}.tsv", "w", encoding="utf-8") as f:
        f.write("sentence\tlabel\n")
        for e, l in rs:
            f.write(e + "\t" + l + "\n")
open(f"{out}/corpus.txt", "w").write("\n".join(e for e, _ in rows) + "\n")
c = json.load(open("tests/data/golden/hf/model/config.json"))
for k in ("id2label", "label2id"):
    c.pop(k, None)
c["num_labels"] = 3
json.dump(c, open(f"{out}/m/config.json", "w"), indent=1)
PY
	cp tests/data/golden/hf/model/model.safetensors "$_ft/m/"
	"$SKY" vocab build --corpus "$_ft/corpus.txt" --size 600 --out "$_ft/m/vocab.txt" \
		>/dev/null 2>"$_ft/err" || { FT_ERR="vocab: $(cat "$_ft/err")"; return 1; }
	"$SKY" data prepare --model-dir "$_ft/m" --input "$_ft/train.tsv" --out "$_ft/train.skyds" \
		--seq 24 --quiet >/dev/null 2>"$_ft/err" || { FT_ERR="prepare: $(cat "$_ft/err")"; return 1; }
	"$SKY" data prepare --model-dir "$_ft/m" --input "$_ft/dev.tsv" --out "$_ft/dev.skyds" \
		--seq 24 --labels-from "$_ft/train.skyds" --quiet >/dev/null 2>"$_ft/err" ||
		{ FT_ERR="prepare dev: $(cat "$_ft/err")"; return 1; }
	return 0
}
