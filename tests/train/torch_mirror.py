#!/usr/bin/python3
"""The backbone re-implemented in PyTorch from the checkpoint format alone (train/FORMATS.md, "Model conventions"):
loads a checkpoint's parameters and prints the mean cross-entropy of the given token windows in fp32 and under
PyTorch's BF16 autocast (torch.autocast("cpu", dtype=torch.bfloat16): the linear layers and matmuls in bf16, fp32
master weights), one JSON object on stdout. Used by tests/train/torch_mirror_test.cpp; or by hand:

  /usr/bin/python3 tests/train/torch_mirror.py CHECKPOINT.h5 WINDOWS.txt   # one window (T+1 token ids) per line

Only the backbone: a checkpoint with a memory table is refused (the tables are checked by the C++ tests).
"""
import json
import math
import sys

import h5py
import numpy as np
import torch
import torch.nn.functional as F
import yaml


def rms_norm(x, w, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def rope_tables(T, hd, base):
    inv = 1.0 / (base ** (torch.arange(0, hd, 2, dtype=torch.float64) / hd))
    f = torch.outer(torch.arange(T, dtype=torch.float64), inv)  # angles in double, as model/layers.cpp
    return torch.cat([f, f], -1).cos().float(), torch.cat([f, f], -1).sin().float()


def rope(x, cos, sin):  # x: (B, H, T, hd), rotate-half pairing (i, i + hd/2)
    h = x.shape[-1] // 2
    return x * cos + torch.cat([-x[..., h:], x[..., :h]], -1) * sin


def loss(P, cfg, windows):
    m = cfg["model"]
    L, C, NH, eps = m["layers"], m["d_model"], m["heads"], float(m["norm_eps"])
    idx, tgt = windows[:, :-1], windows[:, 1:]
    B, T = idx.shape
    hd = C // NH
    cos, sin = rope_tables(T, hd, float(m.get("rope_base", 10000.0)))
    mask = torch.triu(torch.ones(T, T, dtype=torch.bool), 1)
    x = P["tok_emb"][idx]
    for l in range(L):
        p = lambda n: P[f"blocks.{l}.{n}"]  # noqa: E731
        q, k, v = F.linear(rms_norm(x, p("attn_norm"), eps), p("w_qkv")).view(B, T, 3, NH, hd).permute(2, 0, 3, 1, 4)
        q, k = rope(q, cos, sin), rope(k, cos, sin)
        att = ((q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hd))).masked_fill(mask, float("-inf")).softmax(-1)
        x = x + F.linear((att @ v).transpose(1, 2).reshape(B, T, C), p("w_o"))
        x = x + F.linear(F.gelu(F.linear(rms_norm(x, p("mlp_norm"), eps), p("w_fc"))), p("w_proj"))
    logits = F.linear(rms_norm(x, P["final_norm"], eps), P["lm_head"])
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), tgt.reshape(-1)).item()


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: torch_mirror.py CHECKPOINT.h5 WINDOWS.txt")
    with h5py.File(sys.argv[1], "r") as f:
        cfg = yaml.safe_load(f.attrs["config"])
        if cfg.get("memory", {}).get("layout", "none") != "none":
            sys.exit(f"error: {sys.argv[1]}: a memory table (layout {cfg['memory']['layout']}); the mirror has the "
                     "backbone only")
        P = {n: torch.from_numpy(np.asarray(f["params"][n], dtype=np.float32)) for n in f["params"]}
    windows = torch.from_numpy(np.loadtxt(sys.argv[2], dtype=np.int64, ndmin=2))
    torch.manual_seed(0)
    with torch.no_grad():
        fp32 = loss(P, cfg, windows)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            autocast = loss(P, cfg, windows)
    print(json.dumps({"torch": torch.__version__, "fp32": fp32, "autocast_bf16": autocast}))


if __name__ == "__main__":
    main()
