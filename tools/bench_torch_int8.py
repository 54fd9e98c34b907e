#!/usr/bin/python3
"""PyTorch reference for `sky bench layer --precision int8`: one BERT-base
encoder layer (HuggingFace BertLayer semantics written with torch ops:
post-LN, erf GELU, eps 1e-12, additive padding mask) in fp32 and with
torch.ao.quantization.quantize_dynamic on its Linear layers (int8 weights,
activations quantised per batch at run time, non-linearities in float),
on one thread. Prints one JSON object.

  /usr/bin/python3 tools/bench_torch_int8.py [--engine onednn|fbgemm|x86]
      [--batch 8] [--seq 128] [--runs 10] [--warmup 2]
"""
import argparse
import json
import math
import platform
import statistics
import time

import torch
import torch.nn as nn


class Layer(nn.Module):
    def __init__(self, h=768, heads=12, f=3072):
        super().__init__()
        self.h, self.heads = h, heads
        self.q, self.k, self.v = nn.Linear(h, h), nn.Linear(h, h), nn.Linear(h, h)
        self.o = nn.Linear(h, h)
        self.ln1 = nn.LayerNorm(h, eps=1e-12)
        self.f1 = nn.Linear(h, f)
        self.f2 = nn.Linear(f, h)
        self.ln2 = nn.LayerNorm(h, eps=1e-12)

    def forward(self, x, mask):
        b, s, h = x.shape
        d = h // self.heads

        def split(t):
            return t.view(b, s, self.heads, d).transpose(1, 2)

        q, k, v = split(self.q(x)), split(self.k(x)), split(self.v(x))
        scores = q @ k.transpose(-1, -2) / math.sqrt(d) + mask[:, None, None, :]
        ctx = (scores.softmax(-1) @ v).transpose(1, 2).reshape(b, s, h)
        h1 = self.ln1(self.o(ctx) + x)
        u = torch.nn.functional.gelu(self.f1(h1))  # exact erf GELU
        return self.ln2(self.f2(u) + h1)


def timed(fn, warmup, runs):
    for _ in range(warmup):
        fn()
    ts = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return ts


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--engine", default="onednn")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    a = ap.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(1)
    if a.engine not in torch.backends.quantized.supported_engines:
        raise SystemExit(f"engine {a.engine} not in {torch.backends.quantized.supported_engines}")
    torch.backends.quantized.engine = a.engine

    layer = Layer().eval()
    with torch.no_grad():  # BERT's initialisation
        for m in layer.modules():
            if isinstance(m, nn.Linear):
                m.weight.normal_(0, 0.02)
                m.bias.zero_()
    x = torch.randn(a.batch, a.seq, 768)
    mask = torch.zeros(a.batch, a.seq)
    mask[1::2, a.seq - a.seq // 4:] = torch.finfo(torch.float32).min  # as sky's bench

    qlayer = torch.ao.quantization.quantize_dynamic(layer, {nn.Linear}, dtype=torch.qint8)
    with torch.inference_mode():
        y = layer(x, mask)
        yq = qlayer(x, mask)
        t_f = timed(lambda: layer(x, mask), a.warmup, a.runs)
        t_q = timed(lambda: qlayer(x, mask), a.warmup, a.runs)
    cos = torch.nn.functional.cosine_similarity(y.flatten().double(), yq.flatten().double(), dim=0)
    print(json.dumps({
        "bench": "torch_layer",
        "model": "base",
        "batch": a.batch,
        "seq": a.seq,
        "threads": torch.get_num_threads(),
        "engine": a.engine,
        "torch": torch.__version__,
        "fp32_fwd_ms": statistics.median(t_f) * 1e3,
        "int8_dynamic_fwd_ms": statistics.median(t_q) * 1e3,
        "int8_dynamic_fwd_min_ms": min(t_q) * 1e3,
        "cosine_int8_vs_fp32": float(cos),
        "machine": platform.node(),
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }))


if __name__ == "__main__":
    main()
