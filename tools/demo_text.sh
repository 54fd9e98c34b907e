#!/bin/sh
# The demo's real text: fortunes (Debian's `fortunes` package,
# /usr/share/games/fortunes) labelled by where they came from.
#
#   tools/demo_text.sh OUT [SKY]
#
# writes into OUT:
#   train.tsv, dev.tsv   sentence<TAB>label, a header line; every fortune of
#                        the collections below on one line (whitespace runs
#                        to one space), duplicates dropped; a fortune is in
#                        dev when the first byte of the SHA-256 of its text is
#                        below 38 (about 15 %), so the split is the same on
#                        every machine and does not depend on file order
#   corpus.txt           the training sentences alone (the vocabulary's text)
#   model/vocab.txt      a WordPiece vocabulary built from corpus.txt by `sky
#                        vocab build --size 8000`, then [unused0].. up to
#                        30522 tokens (the `mini` preset's vocabulary, which
#                        serving runs; the padding rows are never seen)
#   model/config.json    BertConfig: `mini`'s shapes with 2 layers, two labels
#   model/model.safetensors  a random BertForSequenceClassification checkpoint
#                        (tools/hf_random_init.py, seed 1)
#   train.skyds, dev.skyds  `sky data prepare` of the two files (seq 64)
#
# Two labels because a serving plan names a preset (docs/serving.md), and
# `mini` has a 2-label head; each label is a handful of collections:
#   tech: computers, linux, perl, science
#   life: food, love, men-women, kids, pets, sports
set -eu
OUT=$1
SKY=${2:-build/host/bin/sky}
FORTUNES=${SKY_FORTUNES:-/usr/share/games/fortunes}
SEQ=${SKY_DEMO_SEQ:-64}
for c in computers linux perl science food love men-women kids pets sports; do
	[ -f "$FORTUNES/$c" ] || {
		echo "demo_text: $FORTUNES/$c is missing: install the Debian package fortunes (tools/install-deps.sh)" >&2
		exit 1
	}
done
mkdir -p "$OUT/model"
python3 - "$FORTUNES" "$OUT" <<'EOF'
import hashlib, sys
src, out = sys.argv[1], sys.argv[2]
labels = {"tech": ["computers", "linux", "perl", "science"],
          "life": ["food", "love", "men-women", "kids", "pets", "sports"]}
seen, rows = set(), {"train": [], "dev": []}
for label in ("tech", "life"):
    for c in labels[label]:
        # the .u8 file is the UTF-8 form where the package has one
        try:
            text = open("%s/%s.u8" % (src, c), encoding="utf-8").read()
        except OSError:
            text = open("%s/%s" % (src, c), encoding="utf-8", errors="replace").read()
        for f in text.split("\n%\n"):
            s = " ".join(f.replace("%", " ").split())
            if len(s) < 8 or s in seen:
                continue
            seen.add(s)
            part = "dev" if hashlib.sha256(s.encode()).digest()[0] < 38 else "train"
            rows[part].append((s, label))
for part in rows:
    rows[part].sort(key=lambda r: hashlib.sha256(r[0].encode()).digest())
    with open("%s/%s.tsv" % (out, part), "w", encoding="utf-8") as f:
        f.write("sentence\tlabel\n")
        for s, l in rows[part]:
            f.write("%s\t%s\n" % (s, l))
with open(out + "/corpus.txt", "w", encoding="utf-8") as f:
    for s, _ in rows["train"]:
        f.write(s + "\n")
EOF
"$SKY" vocab build --corpus "$OUT/corpus.txt" --size 8000 --out "$OUT/model/vocab.txt" >/dev/null
n=$(wc -l <"$OUT/model/vocab.txt")
awk -v n="$n" 'BEGIN { for (i = 0; n + i < 30522; i++) print "[unused" i "]" }' >>"$OUT/model/vocab.txt"
cat >"$OUT/model/config.json" <<'EOF'
{
  "architectures": ["BertForSequenceClassification"],
  "model_type": "bert",
  "hidden_size": 256,
  "num_attention_heads": 4,
  "intermediate_size": 1024,
  "num_hidden_layers": 2,
  "vocab_size": 30522,
  "max_position_embeddings": 512,
  "type_vocab_size": 2,
  "hidden_act": "gelu",
  "layer_norm_eps": 1e-12,
  "hidden_dropout_prob": 0.1,
  "attention_probs_dropout_prob": 0.1,
  "num_labels": 2,
  "id2label": {"0": "tech", "1": "life"},
  "label2id": {"tech": 0, "life": 1}
}
EOF
printf '{"do_lower_case": true}\n' >"$OUT/model/tokenizer_config.json"
python3 tools/hf_random_init.py "$OUT/model" --seed 1
"$SKY" data prepare --model-dir "$OUT/model" --input "$OUT/train.tsv" --out "$OUT/train.skyds" --seq "$SEQ" --quiet
"$SKY" data prepare --model-dir "$OUT/model" --input "$OUT/dev.tsv" --out "$OUT/dev.skyds" --seq "$SEQ" --quiet
