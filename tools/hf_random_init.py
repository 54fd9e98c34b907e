#!/usr/bin/env python3
"""Writes DIR/model.safetensors: a BertForSequenceClassification checkpoint
drawn at random for DIR/config.json (what from_pretrained would build from
the config before training): Linear and embedding weights normal(0, 0.02)
as BertPreTrainedModel._init_weights draws them, biases 0, LayerNorm
weight 1 and bias 0, the padding row of the word embeddings 0. F32, names
with the "bert." prefix. Deterministic for a seed (Python's random, a
Mersenne twister), so the demo starts from the same model on every machine.

usage: tools/hf_random_init.py DIR [--seed N]
No third-party modules: the standard library only."""
import array
import json
import random
import struct
import sys


def main():
    args = sys.argv[1:]
    if not args or args[0].startswith("-"):
        sys.exit(__doc__)
    d = args[0]
    seed = 1
    if len(args) == 3 and args[1] == "--seed":
        seed = int(args[2])
    elif len(args) != 1:
        sys.exit(__doc__)
    c = json.load(open(d + "/config.json"))
    H, F, L = c["hidden_size"], c["intermediate_size"], c["num_hidden_layers"]
    V, P, T = c["vocab_size"], c["max_position_embeddings"], c["type_vocab_size"]
    C = c.get("num_labels", len(c.get("id2label", {})) or 2)
    rng = random.Random(seed)
    tensors = []  # (name, shape, kind)

    def lin(name, out, inp):
        tensors.append((name + ".weight", [out, inp], "normal"))
        tensors.append((name + ".bias", [out], "zeros"))

    def ln(name):
        tensors.append((name + ".weight", [H], "ones"))
        tensors.append((name + ".bias", [H], "zeros"))

    e = "bert.embeddings."
    tensors.append((e + "word_embeddings.weight", [V, H], "normal_pad0"))
    tensors.append((e + "position_embeddings.weight", [P, H], "normal"))
    tensors.append((e + "token_type_embeddings.weight", [T, H], "normal"))
    ln(e + "LayerNorm")
    for i in range(L):
        p = "bert.encoder.layer.%d." % i
        for q in ("query", "key", "value"):
            lin(p + "attention.self." + q, H, H)
        lin(p + "attention.output.dense", H, H)
        ln(p + "attention.output.LayerNorm")
        lin(p + "intermediate.dense", F, H)
        lin(p + "output.dense", H, F)
        ln(p + "output.LayerNorm")
    lin("bert.pooler.dense", H, H)
    lin("classifier", C, H)

    header, blobs, off = {}, [], 0
    for name, shape, kind in tensors:
        n = 1
        for s in shape:
            n *= s
        if kind == "zeros":
            a = array.array("f", bytes(4 * n))
        elif kind == "ones":
            a = array.array("f", [1.0]) * n
        else:
            g = rng.gauss
            a = array.array("f", [g(0.0, 0.02) for _ in range(n)])
            if kind == "normal_pad0":
                for k in range(shape[1]):
                    a[k] = 0.0  # padding_idx 0
        if sys.byteorder != "little":
            a.byteswap()
        b = a.tobytes()
        header[name] = {"dtype": "F32", "shape": shape, "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    header["__metadata__"] = {"format": "pt", "init": "random normal(0, 0.02), seed %d" % seed}
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(d + "/model.safetensors", "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


if __name__ == "__main__":
    main()
