#!/usr/bin/python3
"""Golden data for Sky's fp32 BERT pieces, from PyTorch in float64.

HuggingFace BERT semantics written out with torch ops (transformers is not
needed): BertEmbeddings, one BertLayer (post-LN, exact erf GELU, LayerNorm
eps 1e-12, additive attention mask with the dtype's minimum for padding, no
dropout), BertPooler + classifier + mean cross-entropy. Weights and inputs
are drawn here, rounded to float32 (so C reads exactly what torch used),
then everything is computed in float64 with autograd.

Output (small, committed), read by tests/runtime/test_golden.c:
  tests/data/golden/golden.bin   float32 little-endian arrays, back to back
  tests/data/golden/index.txt    "cfg <H> <heads> <F> <S> <B> <vocab> <max_pos> <types> <classes>"
                                 then one "<name> <count>" line per array, in file order
Integer inputs (ids, labels) are stored as exact float32 values.
Flat parameter blocks use Sky's layouts (runtime/sky_layer.h, sky_embed.h,
sky_head.h): the torch tensors are concatenated in that order.

Run: /usr/bin/python3 tools/golden/gen_layer_golden.py [outdir]
"""
import math
import os
import sys

import numpy as np
import torch

H, HEADS, F, S, B = 16, 2, 40, 6, 3
VOCAB, MAX_POS, TYPES, CLASSES = 20, 8, 2, 3
EPS = 1e-12
# sequence b has LENGTHS[b] real tokens, the rest is padding
LENGTHS = [6, 4, 2]

torch.manual_seed(20261130)
D = torch.float64


def p32(*shape, scale=1.0, shift=0.0):
    """A float32-representable random tensor, held in float64."""
    t = (torch.randn(*shape, dtype=torch.float64) * scale + shift).float()
    return t.double().requires_grad_(True)


def layer_norm(x, g, b):
    return torch.nn.functional.layer_norm(x, (x.shape[-1],), g, b, eps=EPS)


def gelu(u):
    return 0.5 * u * (1.0 + torch.erf(u / math.sqrt(2.0)))


# ---- one encoder layer -------------------------------------------------------
layer = {
    "wq": p32(H, H, scale=0.3), "wk": p32(H, H, scale=0.3), "wv": p32(H, H, scale=0.3),
    "bq": p32(H, scale=0.1), "bk": p32(H, scale=0.1), "bv": p32(H, scale=0.1),
    "wo": p32(H, H, scale=0.3), "bo": p32(H, scale=0.1),
    "g1": p32(H, scale=0.2, shift=1.0), "b1n": p32(H, scale=0.1),
    "w1": p32(F, H, scale=0.3), "b1": p32(F, scale=0.1),
    "w2": p32(H, F, scale=0.3), "b2": p32(H, scale=0.1),
    "g2": p32(H, scale=0.2, shift=1.0), "b2n": p32(H, scale=0.1),
}
LAYER_ORDER = ["wq", "wk", "wv", "bq", "bk", "bv", "wo", "bo", "g1", "b1n",
               "w1", "b1", "w2", "b2", "g2", "b2n"]

attn01 = torch.zeros(B, S)
for b, n in enumerate(LENGTHS):
    attn01[b, :n] = 1
# HuggingFace's extended mask: (1 - mask) * finfo(float32).min
mask = ((1.0 - attn01) * torch.finfo(torch.float32).min).double()


def bert_layer(x, p):
    T = x.shape[0]
    d = H // HEADS

    def heads(t):
        return t.view(B, S, HEADS, d).transpose(1, 2)  # (B, heads, S, d)

    q = heads(x @ p["wq"].T + p["bq"])
    k = heads(x @ p["wk"].T + p["bk"])
    v = heads(x @ p["wv"].T + p["bv"])
    scores = q @ k.transpose(-1, -2) / math.sqrt(d) + mask[:, None, None, :]
    probs = torch.softmax(scores, dim=-1)
    ctx = (probs @ v).transpose(1, 2).reshape(T, H)
    h1 = layer_norm(ctx @ p["wo"].T + p["bo"] + x, p["g1"], p["b1n"])
    u = h1 @ p["w1"].T + p["b1"]
    return layer_norm(gelu(u) @ p["w2"].T + p["b2"] + h1, p["g2"], p["b2n"])


x = p32(B * S, H)
dy = torch.randn(B * S, H, dtype=D).float().double()
y = bert_layer(x, layer)
(y * dy).sum().backward()

# ---- embeddings --------------------------------------------------------------
emb = {
    "word": p32(VOCAB, H, scale=0.5), "pos": p32(MAX_POS, H, scale=0.5),
    "type": p32(TYPES, H, scale=0.5),
    "g": p32(H, scale=0.2, shift=1.0), "b": p32(H, scale=0.1),
}
EMB_ORDER = ["word", "pos", "type", "g", "b"]
ids = torch.randint(0, VOCAB, (B * S,))
ids[3] = ids[1]  # a repeated token: its row's gradient accumulates
types = torch.randint(0, TYPES, (B * S,))
pos = torch.arange(S).repeat(B)
ey = layer_norm(emb["word"][ids] + emb["pos"][pos] + emb["type"][types], emb["g"], emb["b"])
edy = torch.randn(B * S, H, dtype=D).float().double()
(ey * edy).sum().backward()

# ---- head --------------------------------------------------------------------
head = {
    "wp": p32(H, H, scale=0.3), "bp": p32(H, scale=0.1),
    "wc": p32(CLASSES, H, scale=0.3), "bc": p32(CLASSES, scale=0.1),
}
HEAD_ORDER = ["wp", "bp", "wc", "bc"]
hx = p32(B * S, H)
labels = torch.tensor([2, 0, 1])
pooled = torch.tanh(hx.view(B, S, H)[:, 0] @ head["wp"].T + head["bp"])
logits = pooled @ head["wc"].T + head["bc"]
loss = torch.nn.functional.cross_entropy(logits, labels)  # mean over the batch
loss.backward()


def flat(params, order, grad=False):
    return torch.cat([(params[k].grad if grad else params[k]).detach().reshape(-1)
                      for k in order])


arrays = [
    ("layer.w", flat(layer, LAYER_ORDER)),
    ("layer.x", x.detach()),
    ("layer.mask", mask.reshape(-1)),
    ("layer.dy", dy),
    ("layer.y", y.detach()),
    ("layer.dx", x.grad),
    ("layer.dw", flat(layer, LAYER_ORDER, grad=True)),
    ("embed.w", flat(emb, EMB_ORDER)),
    ("embed.ids", ids.double()),
    ("embed.types", types.double()),
    ("embed.dy", edy),
    ("embed.y", ey.detach()),
    ("embed.dw", flat(emb, EMB_ORDER, grad=True)),
    ("head.w", flat(head, HEAD_ORDER)),
    ("head.x", hx.detach()),
    ("head.labels", labels.double()),
    ("head.logits", logits.detach()),
    ("head.loss", loss.detach().reshape(1)),
    ("head.dx", hx.grad),
    ("head.dw", flat(head, HEAD_ORDER, grad=True)),
]

out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "data", "golden")
os.makedirs(out, exist_ok=True)
with open(os.path.join(out, "golden.bin"), "wb") as fb, \
        open(os.path.join(out, "index.txt"), "w") as fi:
    fi.write(f"cfg {H} {HEADS} {F} {S} {B} {VOCAB} {MAX_POS} {TYPES} {CLASSES}\n")
    for name, t in arrays:
        a = t.reshape(-1).numpy().astype("<f4")
        fb.write(a.tobytes())
        fi.write(f"{name} {a.size}\n")
print(f"wrote {len(arrays)} arrays to {out}")
