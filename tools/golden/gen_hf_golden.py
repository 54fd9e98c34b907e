#!/usr/bin/python3
"""Golden data for Sky's Hugging Face directory loader and the whole BERT.

A random BertForSequenceClassification with odd shapes (hidden 80, 5 heads,
FFN 136, vocab 1000, 3 labels, 64 positions, 2 token types, layer_norm_eps
1e-7, 2 layers) is written as a Hugging Face directory the way
save_pretrained writes one: config.json and model.safetensors, here with F16
weights ("bert."-prefixed names, classifier at the top level). The reference
forward and backward of the whole model (embeddings, layers, pooler,
classifier, mean cross-entropy) is written out in plain torch ops with
Hugging Face's semantics, because transformers is not installed here
(python3-torch is): word + position + token type embeddings and LayerNorm;
per layer self-attention with the additive mask (1 - mask) *
finfo(float32).min, output dense, add & LayerNorm, FFN with the erf GELU,
add & LayerNorm; pooler dense + tanh on [CLS]; classifier; no dropout
(eval mode). It runs in float64 from the F16-rounded weights, so the only
difference left to Sky is its fp32 arithmetic.

Output (committed, about 0.8 MB), read by tests/runtime/test_hfmodel.c:
  tests/data/golden/hf/model/config.json
  tests/data/golden/hf/model/model.safetensors   F16 weights
  tests/data/golden/hf/ref.safetensors           F32/I32: input_ids,
      token_type_ids, attention_mask, labels (B, S) / (B); logits (B, 3);
      loss (1); "grad.<name>" for every parameter, except the word
      embeddings, whose gradient is only non-zero on the rows of the ids
      used: "gradrows.<name>" (I32 row ids) and "grad.<name>" (those rows).

Run: /usr/bin/python3 tools/golden/gen_hf_golden.py [outdir]
"""
import json
import math
import os
import struct
import sys

import torch

H, HEADS, F, LAYERS = 80, 5, 136, 2
VOCAB, MAX_POS, TYPES, LABELS = 1000, 64, 2, 3
EPS = 1e-7
B, S = 4, 12
LENGTHS = [12, 9, 5, 3]  # real tokens per sequence; the rest is padding
ID2LABEL = {0: "negative", 1: "neutral", 2: "positive"}

torch.manual_seed(20261202)
D = torch.float64


def param(*shape, scale=1.0, shift=0.0):
    """A random tensor rounded to float16 (what the file holds), as float64."""
    t = (torch.randn(*shape, dtype=D) * scale + shift).half()
    return t


# name -> float16 tensor, in the order save_pretrained writes them
P = {}
P["bert.embeddings.word_embeddings.weight"] = param(VOCAB, H, scale=0.5)
P["bert.embeddings.position_embeddings.weight"] = param(MAX_POS, H, scale=0.5)
P["bert.embeddings.token_type_embeddings.weight"] = param(TYPES, H, scale=0.5)
P["bert.embeddings.LayerNorm.weight"] = param(H, scale=0.2, shift=1.0)
P["bert.embeddings.LayerNorm.bias"] = param(H, scale=0.1)
for l in range(LAYERS):
    p = "bert.encoder.layer.%d." % l
    for part in ("query", "key", "value"):
        P[p + "attention.self.%s.weight" % part] = param(H, H, scale=0.2)
        P[p + "attention.self.%s.bias" % part] = param(H, scale=0.1)
    P[p + "attention.output.dense.weight"] = param(H, H, scale=0.2)
    P[p + "attention.output.dense.bias"] = param(H, scale=0.1)
    P[p + "attention.output.LayerNorm.weight"] = param(H, scale=0.2, shift=1.0)
    P[p + "attention.output.LayerNorm.bias"] = param(H, scale=0.1)
    P[p + "intermediate.dense.weight"] = param(F, H, scale=0.2)
    P[p + "intermediate.dense.bias"] = param(F, scale=0.1)
    P[p + "output.dense.weight"] = param(H, F, scale=0.2)
    P[p + "output.dense.bias"] = param(H, scale=0.1)
    P[p + "output.LayerNorm.weight"] = param(H, scale=0.2, shift=1.0)
    P[p + "output.LayerNorm.bias"] = param(H, scale=0.1)
P["bert.pooler.dense.weight"] = param(H, H, scale=0.2)
P["bert.pooler.dense.bias"] = param(H, scale=0.1)
P["classifier.weight"] = param(LABELS, H, scale=0.5)
P["classifier.bias"] = param(LABELS, scale=0.1)

# the reference computes in float64 from exactly the F16 values
W = {k: v.double().requires_grad_(True) for k, v in P.items()}

ids = torch.zeros(B, S, dtype=torch.long)
types = torch.zeros(B, S, dtype=torch.long)
attn = torch.zeros(B, S, dtype=torch.long)
for b, n in enumerate(LENGTHS):
    ids[b, 0] = 101 % VOCAB  # a [CLS]-like first token
    ids[b, 1:n] = torch.randint(1, VOCAB, (n - 1,))
    types[b, n // 2:n] = 1  # a sentence pair: the second half is segment B
    attn[b, :n] = 1
labels = torch.tensor([0, 2, 1, 2], dtype=torch.long)


def layer_norm(x, g, b):
    return torch.nn.functional.layer_norm(x, (x.shape[-1],), g, b, eps=EPS)


def linear(x, name):
    return x @ W[name + ".weight"].T + W[name + ".bias"]


def gelu(u):  # hidden_act "gelu": the erf form
    return 0.5 * u * (1.0 + torch.erf(u / math.sqrt(2.0)))


def forward():
    e = "bert.embeddings."
    pos = torch.arange(S)
    x = (W[e + "word_embeddings.weight"][ids] + W[e + "position_embeddings.weight"][pos][None]
         + W[e + "token_type_embeddings.weight"][types])
    x = layer_norm(x, W[e + "LayerNorm.weight"], W[e + "LayerNorm.bias"])
    # BertModel's extended attention mask, broadcast over heads and queries
    mask = ((1.0 - attn.to(D)) * torch.finfo(torch.float32).min)[:, None, None, :]
    d = H // HEADS
    for l in range(LAYERS):
        p = "bert.encoder.layer.%d." % l

        def heads(t):
            return t.view(B, S, HEADS, d).transpose(1, 2)

        q = heads(linear(x, p + "attention.self.query"))
        k = heads(linear(x, p + "attention.self.key"))
        v = heads(linear(x, p + "attention.self.value"))
        scores = q @ k.transpose(-1, -2) / math.sqrt(d) + mask
        ctx = (torch.softmax(scores, dim=-1) @ v).transpose(1, 2).reshape(B, S, H)
        h1 = layer_norm(linear(ctx, p + "attention.output.dense") + x,
                        W[p + "attention.output.LayerNorm.weight"],
                        W[p + "attention.output.LayerNorm.bias"])
        u = gelu(linear(h1, p + "intermediate.dense"))
        x = layer_norm(linear(u, p + "output.dense") + h1, W[p + "output.LayerNorm.weight"],
                       W[p + "output.LayerNorm.bias"])
    pooled = torch.tanh(linear(x[:, 0], "bert.pooler.dense"))
    logits = linear(pooled, "classifier")
    return logits, torch.nn.functional.cross_entropy(logits, labels)


logits, loss = forward()
loss.backward()

ST = {"F16": (torch.float16, 2), "F32": (torch.float32, 4), "I32": (torch.int32, 4)}


def write_safetensors(path, tensors, metadata=None):
    """tensors: list of (name, dtype name, tensor). The format: 8-byte
    little-endian header length, the JSON header padded with spaces to a
    multiple of 8, then the data back to back (huggingface/safetensors)."""
    header = {}
    blobs = []
    off = 0
    for name, dt, t in tensors:
        tt = t.detach().to(ST[dt][0]).contiguous()
        raw = tt.numpy().tobytes()
        header[name] = {"dtype": dt, "shape": list(tt.shape), "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    if metadata:
        header["__metadata__"] = metadata
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for raw in blobs:
            f.write(raw)


out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "data", "golden", "hf")
mdir = os.path.join(out, "model")
os.makedirs(mdir, exist_ok=True)

config = {
    "architectures": ["BertForSequenceClassification"],
    "model_type": "bert",
    "hidden_size": H,
    "num_attention_heads": HEADS,
    "intermediate_size": F,
    "num_hidden_layers": LAYERS,
    "vocab_size": VOCAB,
    "max_position_embeddings": MAX_POS,
    "type_vocab_size": TYPES,
    "layer_norm_eps": EPS,
    "hidden_act": "gelu",
    "hidden_dropout_prob": 0.1,
    "attention_probs_dropout_prob": 0.1,
    "initializer_range": 0.02,
    "pad_token_id": 0,
    "position_embedding_type": "absolute",
    "torch_dtype": "float16",
    "id2label": {str(k): v for k, v in ID2LABEL.items()},
    "label2id": {v: k for k, v in ID2LABEL.items()},
}
with open(os.path.join(mdir, "config.json"), "w") as f:
    json.dump(config, f, indent=2)
    f.write("\n")
write_safetensors(os.path.join(mdir, "model.safetensors"),
                  [(k, "F16", v) for k, v in P.items()], {"format": "pt"})

ref = [("input_ids", "I32", ids), ("token_type_ids", "I32", types),
       ("attention_mask", "I32", attn), ("labels", "I32", labels),
       ("logits", "F32", logits), ("loss", "F32", loss.reshape(1))]
for k, w in W.items():
    g = w.grad
    if k.endswith("word_embeddings.weight"):
        rows = torch.unique(ids)
        ref.append(("gradrows." + k, "I32", rows))
        ref.append(("grad." + k, "F32", g[rows]))
        # the rows not listed must be exactly zero for torch too
        rest = torch.ones(VOCAB, dtype=torch.bool)
        rest[rows] = False
        assert float(g[rest].abs().max()) == 0.0
    else:
        ref.append(("grad." + k, "F32", g))
write_safetensors(os.path.join(out, "ref.safetensors"), ref)
print("loss %.9f logits %s" % (float(loss), logits.detach().numpy().round(6).tolist()))
