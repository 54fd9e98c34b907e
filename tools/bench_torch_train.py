#!/usr/bin/python3
"""PyTorch eager CPU baseline for `sky bench train`: one training step of a
Hugging Face style BertForSequenceClassification (written with torch modules;
transformers is not needed), fp32, the same shapes, optimizer, clipping,
dropout and thread count as Sky's side; one JSON line on stdout.

  /usr/bin/python3 tools/bench_torch_train.py --hidden 768 --heads 12 --ffn 3072
      --layers 12 --vocab 30522 --max-pos 512 --type-vocab 2 --classes 2
      --batch 8 --seq 128 [--hidden-dropout 0.1] [--attn-dropout 0.1]
      [--ln-eps 1e-12] [--act gelu|gelu_tanh] [--lr 2e-5] [--clip 1.0]
      [--threads 1] [--runs 5] [--warmup 1] [--max-seconds 60]

A step is what `sky train` does per batch: zero the gradients, forward
(embeddings, L layers, pooler, dropout, classifier, mean cross-entropy),
backward, clip the global gradient norm, AdamW (betas 0.9/0.999, eps 1e-8,
no weight decay) over every parameter, the 30522-row word embedding table
included (its gradient is dense, as nn.Embedding's is by default). Every
token is real (attention mask all ones, no padding on either side).
Gradients are zeroed with set_to_none (torch's cheaper form) and AdamW runs
in its faster implementation on this machine (--foreach auto: both are timed
in warm-up and the faster kept); with more than one thread OpenMP's workers
sleep instead of spinning (OMP_WAIT_POLICY=PASSIVE unless set), which is
torch's faster setting beside OpenBLAS's own threads.

On failure it prints {"ok": false, "why": "..."} and exits 0, so the caller
can report the reason.
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
    the same library Sky uses) and OpenMP start with N threads too."""
    for i, a in enumerate(sys.argv):
        if a == "--threads" and i + 1 < len(sys.argv):
            return sys.argv[i + 1]
        if a.startswith("--threads="):
            return a.split("=", 1)[1]
    return "1"


os.environ["OPENBLAS_NUM_THREADS"] = _threads_from_argv()
os.environ["OMP_NUM_THREADS"] = _threads_from_argv()
# With more than one thread, torch's OpenMP workers spin while OpenBLAS's own
# threads run a GEMM, and on a small board they take each other's cores
# (1.5x slower on 2 vCPUs here); sleeping workers are torch's best here.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
try:
    import torch  # noqa: E402  (after the thread environment is set)
    import torch.nn.functional as F  # noqa: E402
except ImportError as e:  # pragma: no cover - the caller reports it
    print(json.dumps({"ok": False, "why": "torch is not installed for %s (%s)"
                      % (sys.executable, e)}))
    sys.exit(0)


class Embeddings(torch.nn.Module):
    def __init__(self, a):
        super().__init__()
        self.word = torch.nn.Embedding(a.vocab, a.hidden)
        self.pos = torch.nn.Embedding(a.max_pos, a.hidden)
        self.ttype = torch.nn.Embedding(a.type_vocab, a.hidden)
        self.ln = torch.nn.LayerNorm(a.hidden, eps=a.ln_eps)
        self.p = a.hidden_dropout

    def forward(self, ids, types, pos_ids):
        e = self.word(ids) + self.pos(pos_ids) + self.ttype(types)
        return F.dropout(self.ln(e), self.p, self.training)


class Layer(torch.nn.Module):
    """HF BertLayer: separate q, k, v Linear, scores / sqrt(d) + additive
    mask, softmax, dropout on the probabilities, output dense + dropout +
    residual + LayerNorm, intermediate dense + GELU, output dense + dropout
    + residual + LayerNorm."""

    def __init__(self, a):
        super().__init__()
        h, f = a.hidden, a.ffn
        self.heads = a.heads
        self.q, self.k, self.v = (torch.nn.Linear(h, h) for _ in range(3))
        self.o = torch.nn.Linear(h, h)
        self.ln1 = torch.nn.LayerNorm(h, eps=a.ln_eps)
        self.i = torch.nn.Linear(h, f)
        self.o2 = torch.nn.Linear(f, h)
        self.ln2 = torch.nn.LayerNorm(h, eps=a.ln_eps)
        self.ph, self.pa = a.hidden_dropout, a.attn_dropout
        self.approx = "tanh" if a.act == "gelu_tanh" else "none"

    def forward(self, x, mask):
        b, s, h = x.shape
        d = h // self.heads

        def split(t):
            return t.view(b, s, self.heads, d).transpose(1, 2)

        q, k, v = split(self.q(x)), split(self.k(x)), split(self.v(x))
        scores = q @ k.transpose(-1, -2) / math.sqrt(d) + mask
        probs = F.dropout(torch.softmax(scores, dim=-1), self.pa, self.training)
        ctx = (probs @ v).transpose(1, 2).reshape(b, s, h)
        h1 = self.ln1(F.dropout(self.o(ctx), self.ph, self.training) + x)
        u = F.gelu(self.i(h1), approximate=self.approx)
        return self.ln2(F.dropout(self.o2(u), self.ph, self.training) + h1)


class BertForSequenceClassification(torch.nn.Module):
    def __init__(self, a):
        super().__init__()
        self.emb = Embeddings(a)
        self.layers = torch.nn.ModuleList(Layer(a) for _ in range(a.layers))
        self.pool = torch.nn.Linear(a.hidden, a.hidden)
        self.cls = torch.nn.Linear(a.hidden, a.classes)
        self.p = a.hidden_dropout

    def forward(self, ids, types, pos_ids, mask, labels):
        x = self.emb(ids, types, pos_ids)
        for layer in self.layers:
            x = layer(x, mask)
        pooled = torch.tanh(self.pool(x[:, 0]))
        logits = self.cls(F.dropout(pooled, self.p, self.training))
        return F.cross_entropy(logits, labels)


def openblas_core():
    """The kernels torch's OpenBLAS runs (openblas_get_corename), '' if
    torch's BLAS is not OpenBLAS."""
    import ctypes
    for name in ("libblas.so.3", "libopenblas.so.0"):
        try:
            f = ctypes.CDLL(name).openblas_get_corename
            f.restype = ctypes.c_char_p
            return f().decode()
        except (OSError, AttributeError):
            continue
    return ""


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for k, v in (("hidden", 768), ("heads", 12), ("ffn", 3072), ("layers", 12),
                 ("vocab", 30522), ("max-pos", 512), ("type-vocab", 2), ("classes", 2),
                 ("batch", 8), ("seq", 128), ("threads", 1), ("runs", 5), ("warmup", 1)):
        ap.add_argument("--" + k, type=int, default=v)
    for k, v in (("hidden-dropout", 0.1), ("attn-dropout", 0.1), ("ln-eps", 1e-12),
                 ("lr", 2e-5), ("clip", 1.0), ("max-seconds", 60.0)):
        ap.add_argument("--" + k, type=float, default=v)
    ap.add_argument("--act", default="gelu", choices=("gelu", "gelu_tanh"))
    ap.add_argument("--foreach", default="auto", choices=("auto", "on", "off"))
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(1)
    model = BertForSequenceClassification(a)
    model.train()
    params = list(model.parameters())
    g = torch.Generator().manual_seed(2)
    ids = torch.randint(0, a.vocab, (a.batch, a.seq), generator=g)
    types = torch.zeros(a.batch, a.seq, dtype=torch.long)
    pos_ids = torch.arange(a.seq).unsqueeze(0).expand(a.batch, a.seq)
    labels = torch.randint(0, a.classes, (a.batch,), generator=g)
    # all tokens real: HF's extended mask is then all zeros, still added
    mask = torch.zeros(a.batch, 1, 1, a.seq)

    def make_opt(foreach):
        return torch.optim.AdamW(params, lr=a.lr, betas=(0.9, 0.999), eps=1e-8,
                                 weight_decay=0.0, foreach=foreach)

    def step(opt):
        opt.zero_grad(set_to_none=True)
        loss = model(ids, types, pos_ids, mask, labels)
        loss.backward()
        if a.clip > 0:
            torch.nn.utils.clip_grad_norm_(params, a.clip)
        opt.step()
        return loss.item()

    def timed(opt):
        t0 = time.perf_counter()
        step(opt)
        return time.perf_counter() - t0

    if a.foreach == "auto":
        # one warm-up step of each, then the faster kept
        cand = {f: make_opt(f) for f in (False, True)}
        for o in cand.values():
            step(o)
        tf = {f: timed(o) for f, o in cand.items()}
        foreach = min(tf, key=tf.get)
        opt = cand[foreach]
        del cand
    else:
        foreach = a.foreach == "on"
        opt = make_opt(foreach)
    for _ in range(a.warmup):
        step(opt)
    t, start = [], time.perf_counter()
    while len(t) < max(a.runs, 1) and (not t or time.perf_counter() - start < a.max_seconds):
        t.append(timed(opt))
    med = statistics.median(t)
    print(json.dumps({
        "ok": True, "bench": "torch_train", "batch": a.batch, "seq": a.seq,
        "layers": a.layers, "threads": torch.get_num_threads(),
        "step_ms": med * 1e3, "step_min_ms": min(t) * 1e3, "runs": len(t),
        "sequences_per_s": a.batch / med,
        "params": sum(p.numel() for p in params),
        "adamw_foreach": foreach, "zero_grad": "set_to_none",
        "torch": torch.__version__, "openblas_core": openblas_core(),
        "openblas_coretype": os.environ.get("OPENBLAS_CORETYPE", ""),
        "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY", ""),
    }))


if __name__ == "__main__":
    main()
