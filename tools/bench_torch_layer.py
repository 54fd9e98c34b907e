#!/usr/bin/python3
"""PyTorch eager CPU baseline for `sky bench layer`: one HuggingFace-style
BertLayer (written with torch modules; transformers is not needed), fp32,
forward and forward+backward, same shapes and thread count, one JSON line.

  /usr/bin/python3 tools/bench_torch_layer.py [--model base] [--batch 8] [--seq 128]
                                             [--threads 1] [--runs 10] [--warmup 2]

The forward is timed with autograd on (a training forward, as Sky's fwd_ms
is); fwd+bwd includes the input gradient, as Sky's does. Medians in ms.
"""
import argparse
import json
import math
import os
import statistics
import sys
import time


def _threads_from_argv():
    """--threads N, read before torch loads so OpenBLAS (torch's BLAS here,
    the same library Sky uses) starts with N threads too."""
    for i, a in enumerate(sys.argv):
        if a == "--threads" and i + 1 < len(sys.argv):
            return sys.argv[i + 1]
        if a.startswith("--threads="):
            return a.split("=", 1)[1]
    return "1"


os.environ["OPENBLAS_NUM_THREADS"] = _threads_from_argv()
os.environ["OMP_NUM_THREADS"] = _threads_from_argv()
import torch  # noqa: E402  (after the thread environment is set)

PRESETS = {"tiny": (32, 2, 64), "mini": (256, 4, 1024), "base": (768, 12, 3072),
           "large": (1024, 16, 4096)}


class BertLayer(torch.nn.Module):
    """HF BertLayer: self-attention (separate q, k, v Linear), output dense +
    residual + LayerNorm, intermediate dense + exact GELU, output dense +
    residual + LayerNorm; eps 1e-12, no dropout."""

    def __init__(self, h, heads, f):
        super().__init__()
        self.h, self.heads = h, heads
        self.q, self.k, self.v = (torch.nn.Linear(h, h) for _ in range(3))
        self.o = torch.nn.Linear(h, h)
        self.ln1 = torch.nn.LayerNorm(h, eps=1e-12)
        self.i = torch.nn.Linear(h, f)
        self.o2 = torch.nn.Linear(f, h)
        self.ln2 = torch.nn.LayerNorm(h, eps=1e-12)

    def forward(self, x, mask):
        b, s, h = x.shape
        d = h // self.heads

        def split(t):
            return t.view(b, s, self.heads, d).transpose(1, 2)

        q, k, v = split(self.q(x)), split(self.k(x)), split(self.v(x))
        scores = q @ k.transpose(-1, -2) / math.sqrt(d) + mask
        ctx = (torch.softmax(scores, dim=-1) @ v).transpose(1, 2).reshape(b, s, h)
        h1 = self.ln1(self.o(ctx) + x)
        return self.ln2(self.o2(torch.nn.functional.gelu(self.i(h1))) + h1)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="base", choices=sorted(PRESETS))
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=None,
                    help="default 128 (16 for tiny, as sky bench layer)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    a = ap.parse_args()
    if a.seq is None:
        a.seq = 16 if a.model == "tiny" else 128
    torch.set_num_threads(a.threads)
    torch.manual_seed(1)
    h, heads, f = PRESETS[a.model]
    layer = BertLayer(h, heads, f)
    x = torch.randn(a.batch, a.seq, h, requires_grad=True)
    dy = torch.randn(a.batch, a.seq, h)
    # the last quarter of every other sequence padded, as in sky bench layer
    mask = torch.zeros(a.batch, 1, 1, a.seq)
    mask[1::2, :, :, a.seq - a.seq // 4:] = torch.finfo(torch.float32).min

    def fwd():
        return layer(x, mask)

    def fwdbwd():
        layer(x, mask).backward(dy)

    def timeit(fn):
        for _ in range(a.warmup):
            fn()
        t = []
        for _ in range(a.runs):
            t0 = time.perf_counter()
            fn()
            t.append((time.perf_counter() - t0) * 1e3)
        return statistics.median(t), min(t)

    # interleaved like sky bench layer would be fairer under load; keep it
    # simple: fwd runs, then fwd+bwd runs
    fwd_ms, fwd_min = timeit(fwd)
    fb_ms, fb_min = timeit(fwdbwd)
    tokens = a.batch * a.seq
    flops_fwd = tokens * (8.0 * h * h + 4.0 * h * f) + 4.0 * tokens * a.seq * h
    print(json.dumps({
        "bench": "torch_layer", "model": a.model, "precision": "fp32",
        "batch": a.batch, "seq": a.seq, "threads": a.threads,
        "fwd_ms": fwd_ms, "fwdbwd_ms": fb_ms, "fwd_min_ms": fwd_min, "fwdbwd_min_ms": fb_min,
        "gflops_fwdbwd": 3.0 * flops_fwd / (fb_ms * 1e-3) * 1e-9,
        "torch": torch.__version__,
        "openblas_coretype": os.environ.get("OPENBLAS_CORETYPE", ""),
    }))


if __name__ == "__main__":
    main()
