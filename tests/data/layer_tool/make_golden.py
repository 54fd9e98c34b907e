#!/usr/bin/python3
"""Golden results for tests/integration/test_layer_tool.sh, from PyTorch.

Run once by hand (tests never need python):
    build/host/bin/sky layer --make-example tests/data/layer_tool --prefix encoder.layer.0.
    /usr/bin/python3 tests/data/layer_tool/make_golden.py tests/data/layer_tool
(then delete the expected*.safetensors the first command wrote: they come
from Sky itself; torch_expected.safetensors is the independent reference).

It reads weights/input/grad.safetensors, runs HuggingFace's BertLayer
equations (post-LN, erf GELU, eps 1e-12, extended mask (1 - m) * finfo(float32).min)
in float64 with autograd, and writes torch_expected.safetensors with the
names `sky layer` writes: output, grad.hidden_states, grad.<weight name>.
The safetensors reader/writer below is a few lines of json + numpy, since
the safetensors package is not installed here."""
import json
import struct
import sys

import numpy as np
import torch

DT = {"F32": np.float32, "F64": np.float64, "I64": np.int64, "I32": np.int32}


def load(path):
    b = open(path, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    hdr = json.loads(b[8:8 + n])
    buf = b[8 + n:]
    out = {}
    for k, v in hdr.items():
        if k == "__metadata__":
            continue
        s, e = v["data_offsets"]
        out[k] = np.frombuffer(buf[s:e], dtype=DT[v["dtype"]]).reshape(v["shape"]).copy()
    return out


def save(path, tensors):
    hdr, off, blobs = {}, 0, []
    for k, a in tensors.items():
        a = np.ascontiguousarray(a, dtype=np.float32)
        hdr[k] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [off, off + a.nbytes]}
        off += a.nbytes
        blobs.append(a.tobytes())
    h = json.dumps(hdr, separators=(",", ":")).encode()
    h += b" " * ((8 - (8 + len(h)) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def main(d, prefix="encoder.layer.0.", heads=2):
    w = {k[len(prefix):]: torch.tensor(v, dtype=torch.float64, requires_grad=True)
         for k, v in load(d + "/weights.safetensors").items()}
    inp = load(d + "/input.safetensors")
    x = torch.tensor(inp["hidden_states"], dtype=torch.float64, requires_grad=True)
    m = torch.tensor(inp["attention_mask"], dtype=torch.float64)
    dy = torch.tensor(load(d + "/grad.safetensors")["grad.output"], dtype=torch.float64)
    B, S, H = x.shape
    hd = H // heads
    ext = (1.0 - m)[:, None, None, :] * float(np.finfo(np.float32).min)

    def lin(t, name):
        return t @ w[name + ".weight"].T + w[name + ".bias"]

    def split(t):
        return t.view(B, S, heads, hd).permute(0, 2, 1, 3)

    q = split(lin(x, "attention.self.query"))
    k = split(lin(x, "attention.self.key"))
    v = split(lin(x, "attention.self.value"))
    p = torch.softmax(q @ k.transpose(-1, -2) / hd ** 0.5 + ext, dim=-1)
    ctx = (p @ v).permute(0, 2, 1, 3).reshape(B, S, H)
    ln = torch.nn.functional.layer_norm
    h1 = ln(lin(ctx, "attention.output.dense") + x, (H,),
            w["attention.output.LayerNorm.weight"], w["attention.output.LayerNorm.bias"], 1e-12)
    g = torch.nn.functional.gelu(lin(h1, "intermediate.dense"))
    y = ln(lin(g, "output.dense") + h1, (H,),
           w["output.LayerNorm.weight"], w["output.LayerNorm.bias"], 1e-12)
    y.backward(dy)
    out = {"output": y.detach().numpy(), "grad.hidden_states": x.grad.numpy()}
    for name, t in w.items():
        out["grad." + prefix + name] = t.grad.numpy()
    save(d + "/torch_expected.safetensors", out)


if __name__ == "__main__":
    main(sys.argv[1])
