#!/usr/bin/python3
"""Issue 13 item 7: why does NF4 cost more here than the report's +0.0004 nats?

Reproduces every number of experiments/nf4_cause/README.md from one checkpoint (read only; it is copied):

  nice -n 5 /usr/bin/python3 experiments/nf4_cause/nf4_cause.py   # (pagegram inherits the nice value) \
      --checkpoint runs/regime_stage1/pagegram_s4-s0-5d6fbc6a/checkpoint.h5 --work /work/nf4/s0 \
      [--pagegram build/pagegram] [--windows 2048] [--blocks 4] [--threads 2] [--variants all|core]

What it does:
 1. copies the checkpoint to WORK/base.h5 and reads the memory table /memory/table/table [rows, width] f32;
 2. runs `pagegram export --eval-windows W` on the copy (the C++ NF4 file and its fp32 / NF4 / MXFP8 held-out
    loss), decodes the written .pgt file and checks that the numpy NF4 below reproduces it bit for bit;
 3. for every variant (a quantize-dequantize of the table, Gaussian noise, or a zeroed table) writes the
    variant's fp32 values into WORK/var.h5 (a copy of the checkpoint; h5py rewrites the chunks and HDF5's
    Fletcher-32 filter recomputes each chunk's checksum, which is the checksum `pagegram eval` verifies) and runs
    `pagegram eval --windows N` for N = W/B, 2W/B, ..., W (B cumulative prefixes of the fixed validation
    windows), which gives the loss on B disjoint blocks of W/B windows; the paired difference to the fp32 table
    is reported as the mean over the W windows, with a standard error from the B block differences;
 4. writes WORK/results.json and WORK/results.md (the table of the README) and prints them.
Table statistics (zero rows, row norms, kurtosis, absmax / rms, NF4 error on a Gaussian surrogate) go to the
same files. Evaluations are cached in WORK/evals.json by (variant, N): a rerun reuses them (delete to redo).
"""
import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time

import h5py
import numpy as np

# The NF4 code book exactly as storage/nf4.h (float32).
CODE = np.array([-1.0, -0.6961928009986877, -0.5250730514526367, -0.39491748809814453, -0.28444138169288635,
                 -0.18477343022823334, -0.09105003625154495, 0.0, 0.07958029955625534, 0.16093020141124725,
                 0.24611230194568634, 0.33791524171829224, 0.44070982933044434, 0.5626170039176941,
                 0.7229568362236023, 1.0], dtype=np.float32)
MID = ((CODE[:-1] + CODE[1:]) * np.float32(0.5)).astype(np.float32)  # (a + b) * 0.5f as nf4.cpp


# ---------------------------------------------------------------- scales
def half_round_up(a):
    """storage/nf4.cpp half_round_up: the smallest binary16 value >= a (a >= 0 float32)."""
    h = a.astype(np.float16)  # IEEE round to nearest even, subnormals included
    bits = h.view(np.uint16).copy()
    low = h.astype(np.float32) < a
    bits[low] += 1
    return bits.view(np.float16).astype(np.float32)


def bf16_round_up(a):
    bits = a.astype(np.float32).view(np.uint32)
    t = (bits & np.uint32(0xFFFF0000)).view(np.float32)
    up = t < a
    t = np.where(up, ((bits & np.uint32(0xFFFF0000)) + np.uint32(0x10000)).view(np.float32), t)
    return t.astype(np.float32)


def dynamic_map():
    """bitsandbytes create_dynamic_map(signed=True, max_exponent_bits=7, total_bits=8): 256 sorted values."""
    data = []
    non_sign_bits, max_exp = 7, 7
    for i in range(max_exp):
        items = int(2 ** (i + non_sign_bits - max_exp) + 1)
        b = np.linspace(0.1, 1, items, dtype=np.float32)
        means = (b[:-1] + b[1:]) / 2.0
        data += list(10 ** (-(max_exp - 1) + i) * means)
        data += list(-(10 ** (-(max_exp - 1) + i)) * means)
    data += [0.0, 1.0]
    data += [0.0] * (256 - len(data))
    return np.sort(np.array(data, dtype=np.float32))


def double_quant(amax, block=256):
    """bitsandbytes compress_statistics: offset = mean(absmax); (absmax - offset) blockwise-quantized (256 per
    block, fp32 block absmax, nearest value of the signed dynamic 8-bit map); scale = code * absmax2 + offset."""
    m = dynamic_map().astype(np.float64)
    off = np.float32(amax.mean())
    v = (amax - off).astype(np.float32)
    n = v.size
    pad = (-n) % block
    vp = np.concatenate([v, np.zeros(pad, np.float32)]).reshape(-1, block)
    a2 = np.abs(vp).max(axis=1, keepdims=True)
    a2[a2 == 0] = 1
    r = (vp / a2).astype(np.float64)
    idx = np.clip(np.searchsorted(m, r), 1, 255)
    lo, hi = m[idx - 1], m[idx]
    q = np.where(np.abs(r - lo) <= np.abs(hi - r), lo, hi)
    s = (q * a2 + off).reshape(-1)[:n].astype(np.float32)
    s[amax == 0] = 0  # a zero group has no codes but 0 anyway (x = 0 -> code 0.0)
    return np.maximum(s, 0).astype(np.float32)


def scale_of(amax, fmt):
    if fmt == "fp16up":
        return half_round_up(amax)
    if fmt == "fp32":
        return amax.astype(np.float32)
    if fmt == "fp16rn":
        return amax.astype(np.float16).astype(np.float32)
    if fmt == "bf16up":
        return bf16_round_up(amax)
    if fmt == "e8m0up":
        s = np.zeros_like(amax)
        nz = amax > 0
        s[nz] = np.exp2(np.ceil(np.log2(amax[nz].astype(np.float64)))).astype(np.float32)
        return s
    if fmt == "dq8":
        return double_quant(amax)
    raise ValueError(fmt)


# ---------------------------------------------------------------- NF4 round trip
def nf4_codes(v):
    """Code index = number of midpoints strictly below v (nf4.cpp nearest_code), v float32."""
    q = np.zeros(v.shape, np.uint8)
    for m in MID:
        q += (v > m)
    return q


def nf4_groups(x, group, fmt="fp16up", alpha=None):
    """Quantize-dequantize a flat float32 array in consecutive groups of `group` values (NF4, absmax scale in
    format fmt; alpha: per-group multipliers of the scale, for the MSE-optimal search)."""
    g = x.reshape(-1, group)
    amax = np.abs(g).max(axis=1)
    s = scale_of(amax, fmt)
    if alpha is not None:
        s = (s * alpha).astype(np.float32)
    out = np.zeros_like(g)
    nz = s > 0
    v = (g[nz] / s[nz, None]).astype(np.float32)
    out[nz] = CODE[nf4_codes(v)] * s[nz, None]
    return out.reshape(x.shape), s


def nf4_mse_opt(x, group, grid):
    """Per group, the scale alpha * fp16up(absmax) (alpha in grid) with the least squared error."""
    g = x.reshape(-1, group)
    best = np.full(g.shape[0], np.inf)
    best_a = np.ones(g.shape[0], np.float32)
    for a in grid:
        y, _ = nf4_groups(x, group, "fp16up", np.full(g.shape[0], a, np.float32))
        e = ((y.reshape(-1, group) - g).astype(np.float64) ** 2).sum(axis=1)
        better = e < best
        best[better] = e[better]
        best_a[better] = a
    y, _ = nf4_groups(x, group, "fp16up", best_a)
    return y, best_a


# ---------------------------------------------------------------- .pgt decode (storage/FORMATS.md)
def decode_pgt(path, rows, width, layout, slots, heads):
    raw = np.fromfile(path, np.uint8)
    hdr = raw[:128]
    H = int(hdr[16:24].view(np.uint64)[0])
    assert bytes(hdr[:8]) == b"PGNF4TBL" and int(hdr[8:12].view(np.uint32)[0]) == 1
    rb = 34 * ((width + 63) // 64)
    assert int(hdr[48:56].view(np.uint64)[0]) == rb
    r = np.arange(rows, dtype=np.int64)
    if layout == "pagegram":
        pr = heads * slots
        pb = pr * rb
        ppb = 4096 // pb
        assert ppb >= 1
        page = r // pr
        blk = page // ppb
        off = (page % ppb) * pb + (r % pr) * rb
    else:  # flat, engram: dense
        per = 4096 // rb
        blk, off = r // per, (r % per) * rb
    start = 4096 * (H + blk) + off
    rowbytes = raw[start[:, None] + np.arange(rb)[None, :]]  # [rows, rb]
    out = np.zeros((rows, width), np.float32)
    for gi in range((width + 63) // 64):
        gb = rowbytes[:, gi * 34:(gi + 1) * 34]
        s = gb[:, 0:2].copy().view(np.float16).reshape(-1).astype(np.float32)
        codes = np.empty((rows, 64), np.uint8)
        codes[:, 0::2] = gb[:, 2:] >> 4
        codes[:, 1::2] = gb[:, 2:] & 0xF
        n = min(64, width - gi * 64)
        out[:, gi * 64:gi * 64 + n] = CODE[codes[:, :n]] * s[:, None]
    return out


# ---------------------------------------------------------------- evaluation
class Evaluator:
    def __init__(self, args, base):
        self.args, self.base = args, base
        self.var = os.path.join(args.work, "var.h5")
        self.cache_path = os.path.join(args.work, "evals.json")
        self.cache = json.load(open(self.cache_path)) if os.path.exists(self.cache_path) else {}
        self.ns = [args.windows * (i + 1) // args.blocks for i in range(args.blocks)]

    def _eval(self, path, n):
        cmd = [self.args.pagegram, "eval", "--checkpoint", path, "--windows", str(n),
               "--threads", str(self.args.threads)]
        p = subprocess.run(cmd, capture_output=True, text=True)
        m = re.search(r"held-out\s+([0-9.]+) nats over (\d+) windows", p.stdout + p.stderr)
        if p.returncode != 0 or not m or int(m.group(2)) != n:
            sys.exit(f"eval failed: {' '.join(cmd)}\n{p.stdout}\n{p.stderr}")
        return float(m.group(1))

    def blocks(self, key, table):
        """Block means of the loss for a table (None = the unmodified copy)."""
        if all(f"{key}@{n}" in self.cache for n in self.ns):
            return self._to_blocks([self.cache[f"{key}@{n}"] for n in self.ns])
        path = self.base
        if table is not None:
            shutil.copyfile(self.base, self.var)
            with h5py.File(self.var, "r+") as f:
                ds = f["memory/table/table"]
                assert ds.fletcher32 and ds.shape == table.shape and ds.dtype == np.float32
                ds[...] = table
            path = self.var
        t0 = time.time()
        cum = []
        for n in self.ns:
            cum.append(self._eval(path, n))
            self.cache[f"{key}@{n}"] = cum[-1]
        json.dump(self.cache, open(self.cache_path + ".tmp", "w"), indent=1)
        os.replace(self.cache_path + ".tmp", self.cache_path)
        print(f"  [{key}] cumulative losses {cum} ({time.time() - t0:.0f} s)", flush=True)
        return self._to_blocks(cum)

    def _to_blocks(self, cum):
        out, prev_n, prev_sum = [], 0, 0.0
        for n, l in zip(self.ns, cum):
            out.append((l * n - prev_sum) / (n - prev_n))
            prev_n, prev_sum = n, l * n
        return np.array(out)


# ---------------------------------------------------------------- statistics
def excess_kurtosis(v, axis=None):
    m = v.mean(axis=axis, keepdims=True)
    c = v - m
    m2 = (c ** 2).mean(axis=axis)
    m4 = (c ** 4).mean(axis=axis)
    return m4 / np.maximum(m2, 1e-300) ** 2 - 3.0


def table_stats(T, group):
    T64 = T.astype(np.float64)
    rows, width = T.shape
    zero = ~(T != 0).any(axis=1)
    nzT = T64[~zero]
    rms = np.sqrt((nzT ** 2).mean(axis=1))
    g = T64.reshape(-1, group)
    gnz = g[np.abs(g).max(axis=1) > 0]
    crest = np.abs(gnz).max(axis=1) / np.sqrt((gnz ** 2).mean(axis=1))
    rng = np.random.default_rng(12345)
    gauss = rng.standard_normal(gnz.shape)
    gcrest = np.abs(gauss).max(axis=1) / np.sqrt((gauss ** 2).mean(axis=1))
    # NF4 of a Gaussian surrogate: every nonzero group replaced by iid N(0, its own mean square).
    sur = (gauss * np.sqrt((gnz ** 2).mean(axis=1, keepdims=True))).astype(np.float32).reshape(-1)
    sq, _ = nf4_groups(sur, group)
    sur_rel = float(((sq.astype(np.float64) - sur) ** 2).sum() / (sur.astype(np.float64) ** 2).sum())
    q = [0.01, 0.1, 0.5, 0.9, 0.99, 0.999]
    return {
        "rows": rows, "width": width, "zero_rows": int(zero.sum()), "zero_row_fraction": float(zero.mean()),
        "zero_value_fraction_in_nonzero_rows": float((nzT == 0).mean()),
        "row_rms_quantiles": dict(zip([str(x) for x in q], [float(v) for v in np.quantile(rms, q)])),
        "row_rms_max_over_median": float(rms.max() / np.median(rms)),
        "table_rms_nonzero_rows": float(np.sqrt((nzT ** 2).mean())),
        "pooled_excess_kurtosis_nonzero_rows": float(excess_kurtosis(nzT.reshape(-1))),
        "pooled_excess_kurtosis_of_row_normalized_values": float(excess_kurtosis((nzT / rms[:, None]).reshape(-1))),
        "mean_within_group_excess_kurtosis": float(excess_kurtosis(gnz, axis=1).mean()),
        "mean_within_group_excess_kurtosis_gaussian": float(excess_kurtosis(gauss, axis=1).mean()),
        "mean_absmax_over_rms": float(crest.mean()), "mean_absmax_over_rms_gaussian": float(gcrest.mean()),
        "absmax_over_rms_quantiles": dict(zip([str(x) for x in q], [float(v) for v in np.quantile(crest, q)])),
        "nf4_rel_mse_gaussian_surrogate": sur_rel,
    }


# ---------------------------------------------------------------- main
def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--checkpoint", required=True)
    ap.add_argument("--work", required=True, help="scratch directory (copies of the checkpoint, caches, results)")
    ap.add_argument("--pagegram", default=os.path.join(os.path.dirname(__file__), "../../build/pagegram"))
    ap.add_argument("--windows", type=int, default=2048)
    ap.add_argument("--blocks", type=int, default=4)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--variants", default="all", choices=["all", "core", "minimal"],
                    help="all: every variant of the README; core: a subset; minimal: NF4 64, its mirror, noise seed 1 and its mirror, table x 0.99, zero table")
    args = ap.parse_args()
    args.pagegram = os.path.abspath(args.pagegram)
    os.makedirs(args.work, exist_ok=True)
    base = os.path.join(args.work, "base.h5")
    if not os.path.exists(base):
        shutil.copyfile(args.checkpoint, base + ".tmp")
        os.replace(base + ".tmp", base)
    with h5py.File(base, "r") as f:
        T = f["memory/table/table"][...]
        cfg = f.attrs["config"]
        cfg = cfg.decode() if isinstance(cfg, bytes) else cfg
    layout = re.search(r"^memory:.*?^\s+layout:\s*(\w+)", cfg, re.S | re.M).group(1)
    slots = int(re.search(r"^\s+slots:\s*(\d+)", cfg, re.M).group(1))
    heads = int(re.search(r"^memory:.*?^\s+heads:\s*(\d+)", cfg, re.S | re.M).group(1))
    rows, width = T.shape
    print(f"checkpoint {args.checkpoint}: layout {layout}, table {rows} x {width}, sha256(table) "
          f"{hashlib.sha256(T.tobytes()).hexdigest()[:16]}", flush=True)
    flat = T.reshape(-1)
    ev = Evaluator(args, base)
    res = {"checkpoint": os.path.abspath(args.checkpoint), "layout": layout, "windows": args.windows,
           "blocks": args.blocks, "pagegram": args.pagegram}

    # ---- 1. The C++ NF4 file and its held-out comparison; numpy NF4 must reproduce it bit for bit.
    pgt = os.path.join(args.work, "cpp_nf4.pgt")
    exp_key = f"export@{args.windows}"
    if exp_key not in ev.cache or not os.path.exists(pgt):
        cmd = [args.pagegram, "export", "--checkpoint", base, "--out", pgt, "--eval-windows",
               str(args.windows), "--threads", str(args.threads)]
        p = subprocess.run(cmd, capture_output=True, text=True)
        line = [l for l in (p.stdout + p.stderr).splitlines() if "held-out over" in l]
        if p.returncode != 0 or not line:
            sys.exit(f"export failed: {' '.join(cmd)}\n{p.stdout}\n{p.stderr}")
        ev.cache[exp_key] = line[0]
        json.dump(ev.cache, open(ev.cache_path, "w"), indent=1)
    res["cpp_export_line"] = ev.cache[exp_key]
    print("C++ export:", res["cpp_export_line"], flush=True)
    m = re.search(r"fp32 table ([0-9.]+) nats, NF4 table ([0-9.]+) nats.*MXFP8 table ([0-9.]+) nats", res["cpp_export_line"])
    cpp_fp32, cpp_nf4, cpp_mx = map(float, m.groups())
    q64, _ = nf4_groups(flat, 64)
    q64 = q64.reshape(rows, width)
    dec = decode_pgt(pgt, rows, width, layout, slots, heads)
    mism = int((dec.view(np.uint32) != q64.view(np.uint32)).sum())
    res["numpy_vs_cpp_file_mismatched_values"] = mism
    print(f"numpy NF4 vs the C++ .pgt file: {mism} of {rows * width} values differ (bitwise)", flush=True)

    # ---- 2. Statistics of the trained table.
    res["stats"] = table_stats(T, 64)
    print(json.dumps(res["stats"], indent=1), flush=True)

    # ---- 3. Variants.
    fp32_blocks = ev.blocks("fp32", None)
    res["fp32_loss"] = float(fp32_blocks.mean())
    denom = float((flat.astype(np.float64) ** 2).sum())
    nzrow = np.repeat((T != 0).any(axis=1), width)
    rng = np.random.default_rng(2026)

    def rel(y):
        return float(((y.reshape(-1).astype(np.float64) - flat) ** 2).sum() / denom)

    variants = []  # (key, description, group, scale, table or callable)
    variants.append(("nf4_g64_fp16up", "NF4, 64 (C++: storage/nf4.h)", "64 (one head row)", "fp16, rounded up",
                     lambda: q64))
    for g in ([16, 32, 128, 256, 512] if args.variants == "all" else [32, 256]):
        variants.append((f"nf4_g{g}_fp16up", f"NF4, group {g}", str(g) + (" (2 rows)" if g == 128 else
                         " (4 rows)" if g == 256 else " (8 rows)" if g == 512 else ""), "fp16, rounded up",
                         lambda g=g: nf4_groups(flat, g)[0]))
    scale_list = ["fp32", "fp16rn", "bf16up", "e8m0up", "dq8"] if args.variants == "all" else ["fp32", "dq8"]
    names = {"fp32": "fp32 absmax (bitsandbytes, no double quant)", "fp16rn": "fp16, round to nearest (may clip)",
             "bf16up": "bf16, rounded up", "e8m0up": "power of two, rounded up (E8M0)",
             "dq8": "double-quantized: 8-bit dynamic, 256 scales/block, mean offset (bitsandbytes)"}
    for s in scale_list:
        variants.append((f"nf4_g64_{s}", f"NF4, scale {s}", "64", names[s], lambda s=s: nf4_groups(flat, 64, s)[0]))
    if args.variants == "all":
        variants.append(("nf4_g64_mseopt", "NF4, per-group MSE-optimal scale", "64",
                         "fp16 x alpha, alpha in {0.70..1.00} minimizing the group's squared error",
                         lambda: nf4_mse_opt(flat, 64, np.round(np.arange(0.70, 1.0001, 0.02), 2).astype(np.float32))[0]))
        variants.append(("int4_g64_fp16up", "uniform int4 (15 levels, symmetric), absmax", "64", "fp16, rounded up",
                         lambda: int4_groups(flat, 64)))
    # Gaussian noise of the NF4 error's MSE: per row (each row's own NF4 error variance) and uniform over the
    # nonzero rows (same total MSE); zero rows stay zero, as they do under NF4.
    e64 = (q64.reshape(-1).astype(np.float64) - flat).reshape(rows, width)
    row_var = (e64 ** 2).mean(axis=1)

    def noise_row(mult, seed):
        r = np.random.default_rng(seed)
        return (T + np.sqrt(mult * row_var)[:, None] * r.standard_normal(T.shape)).astype(np.float32)

    def noise_uniform(mult, seed):
        r = np.random.default_rng(seed)
        sig = np.sqrt(mult * (e64 ** 2).sum() / nzrow.sum())
        y = T + sig * r.standard_normal(T.shape) * nzrow.reshape(rows, width)
        return y.astype(np.float32)

    seeds = {1: [1, 2, 3, 4, 5, 6], 4: [1, 2, 3], 16: [1]} if args.variants == "all" else {1: [1, 2], 4: [1]}
    for mult, ss in seeds.items():
        for sd in ss:
            variants.append((f"noise_row_x{mult}_s{sd}", f"Gaussian noise, {mult}x per-row NF4 MSE, seed {sd}", "-",
                             "-", lambda mult=mult, sd=sd: noise_row(mult, sd)))
    variants.append(("noise_uni_x1_s1", "Gaussian noise, NF4 total MSE spread uniformly over rows, seed 1", "-", "-",
                     lambda: noise_uniform(1, 1)))
    # Antithetic (mirrored) errors: T - e instead of T + e. For a loss L(T + e) = L + g.e + e'He/2 + O(e^3),
    # (dL(+e) + dL(-e)) / 2 = e'He/2 is the systematic (second-order) cost of that error and (dL(+e) - dL(-e)) / 2
    # = g.e the first-order term of this realization, which averages to zero over realizations.
    def mirror(y):
        return (2 * T.astype(np.float64) - y.reshape(T.shape).astype(np.float64)).astype(np.float32)
    variants.append(("mirror_nf4_g64_fp16up", "mirrored NF4 error (T - e), group 64", "64", "fp16, rounded up",
                     lambda: mirror(q64)))
    if args.variants == "all":
        for g in [32, 256]:
            variants.append((f"mirror_nf4_g{g}_fp16up", f"mirrored NF4 error (T - e), group {g}", str(g),
                             "fp16, rounded up", lambda g=g: mirror(nf4_groups(flat, g)[0])))
    for sd in [1]:
        variants.append((f"mirror_noise_row_x1_s{sd}", f"mirrored Gaussian noise, 1x per-row NF4 MSE, seed {sd}",
                         "-", "-", lambda sd=sd: mirror(noise_row(1, sd))))
    # The table scaled as a whole: the held-out loss's slope along T itself (NF4 shrinks the table slightly).
    for a in [0.99, 1.01]:
        variants.append((f"scale_{a}", f"table x {a} (no quantization)", "-", "-", lambda a=a: (T * np.float32(a))))
    variants.append(("zero_table", "table zeroed (its whole contribution)", "-", "-", lambda: np.zeros_like(T)))

    if args.variants == "minimal":
        variants = [v for v in variants if v[0] in ("nf4_g64_fp16up", "mirror_nf4_g64_fp16up", "zero_table",
                                                    "noise_row_x1_s1", "mirror_noise_row_x1_s1", "scale_0.99")]
    rows_out = []
    for key, desc, group, scale, make in variants:
        y = make().reshape(rows, width).astype(np.float32)
        r = rel(y)
        b = ev.blocks(key, y)
        d = b - fp32_blocks
        se = float(d.std(ddof=1) / np.sqrt(len(d))) if len(d) > 1 else float("nan")
        rows_out.append({"key": key, "desc": desc, "group": group, "scale": scale, "rel_mse": r,
                         "dloss": float(d.mean()), "dloss_se": se, "dloss_blocks": [float(x) for x in d],
                         "proj_on_T": float((y.reshape(-1).astype(np.float64) - flat) @ flat / denom),
                         "loss": float(b.mean()), "dloss_per_rel_mse": float(d.mean() / r) if r > 0 else None})
        print(f"{key:22s} rel MSE {r:.5f}  dloss {d.mean():+.6f} +- {se:.6f}  ({', '.join(f'{x:+.5f}' for x in d)})",
              flush=True)
    res["variants"] = rows_out
    res["cpp"] = {"fp32": cpp_fp32, "nf4": cpp_nf4, "mxfp8": cpp_mx, "nf4_minus_fp32": cpp_nf4 - cpp_fp32,
                  "mxfp8_minus_fp32": cpp_mx - cpp_fp32}
    nf4v = [v for v in rows_out if v["key"] == "nf4_g64_fp16up"][0]
    res["numpy_nf4_minus_cpp_nf4_loss"] = nf4v["loss"] - cpp_nf4
    res["numpy_fp32_minus_cpp_fp32_loss"] = res["fp32_loss"] - cpp_fp32
    json.dump(res, open(os.path.join(args.work, "results.json"), "w"), indent=1)

    md = [f"Checkpoint `{res['checkpoint']}` ({layout}, table {rows} x {width}); held-out loss on the first "
          f"{args.windows} fixed validation windows, paired against the fp32 table; ± = standard error from "
          f"{args.blocks} disjoint blocks of {args.windows // args.blocks} windows.",
          "",
          f"C++ `pagegram export --eval-windows {args.windows}`: {res['cpp_export_line']}",
          f"numpy NF4 vs the C++ .pgt file: {mism} values differ; numpy-NF4 loss − C++ NF4 loss "
          f"{res['numpy_nf4_minus_cpp_nf4_loss']:+.6f}, fp32 eval − export's fp32 {res['numpy_fp32_minus_cpp_fp32_loss']:+.6f}.",
          f"fp32 table: {res['fp32_loss']:.6f} nats.",
          "",
          "| variant | group size | scale format | relative MSE | ⟨e,T⟩/⟨T,T⟩ | held-out loss − fp32 (nats) | Δloss / rel MSE |",
          "|---|---|---|---:|---:|---:|---:|"]
    for v in rows_out:
        k = f"{v['dloss_per_rel_mse']:.3f}" if v["dloss_per_rel_mse"] is not None else "–"
        md.append(f"| {v['desc']} | {v['group']} | {v['scale']} | {v['rel_mse']:.5f} | {v['proj_on_T']:+.5f} | "
                  f"{v['dloss']:+.6f} ± {v['dloss_se']:.6f} | {k} |")
    # Decomposition: antithetic pairs, and the noise's spread over seeds.
    by = {v["key"]: v for v in rows_out}
    md += ["", "Antithetic pairs: systematic (second-order) cost (Δ(+e) + Δ(−e))/2 and first-order term of the "
           "realization (Δ(+e) − Δ(−e))/2; ± from the block differences of each half-sum.", "",
           "| error e | relative MSE | Δloss(T + e) | Δloss(T − e) | systematic cost | first-order term | cost / rel MSE |",
           "|---|---:|---:|---:|---:|---:|---:|"]
    dec = []
    for k, v in by.items():
        if k.startswith("mirror_") and k[7:] in by:
            p, m_ = by[k[7:]], v
            bp, bm = np.array(p["dloss_blocks"]), np.array(m_["dloss_blocks"])
            sym, anti = (bp + bm) / 2, (bp - bm) / 2
            n = len(sym)
            se_s = float(sym.std(ddof=1) / np.sqrt(n)) if n > 1 else float("nan")
            se_a = float(anti.std(ddof=1) / np.sqrt(n)) if n > 1 else float("nan")
            dec.append({"error": k[7:], "rel_mse": p["rel_mse"], "plus": p["dloss"], "minus": m_["dloss"],
                        "systematic": float(sym.mean()), "systematic_se": se_s, "first_order": float(anti.mean()),
                        "first_order_se": se_a, "systematic_per_rel_mse": float(sym.mean()) / p["rel_mse"]})
            md.append(f"| {k[7:]} | {p['rel_mse']:.5f} | {p['dloss']:+.6f} | {m_['dloss']:+.6f} | "
                      f"{sym.mean():+.6f} ± {se_s:.6f} | {anti.mean():+.6f} ± {se_a:.6f} | {sym.mean() / p['rel_mse']:.4f} |")
    res["antithetic"] = dec
    md += ["", "Gaussian noise with the NF4 error's per-row MSE times m, over seeds (mean ± sd of the seeds):", "",
           "| m | seeds | relative MSE | Δloss mean | sd over seeds | mean / rel MSE |", "|---:|---:|---:|---:|---:|---:|"]
    res["noise_summary"] = []
    for mult in sorted({int(k.split("_x")[1].split("_")[0]) for k in by if k.startswith("noise_row_x")}):
        vs = [by[k] for k in by if k.startswith(f"noise_row_x{mult}_s")]
        d = np.array([v["dloss"] for v in vs])
        r = float(np.mean([v["rel_mse"] for v in vs]))
        sd = float(d.std(ddof=1)) if len(d) > 1 else float("nan")
        res["noise_summary"].append({"mult": mult, "seeds": len(d), "rel_mse": r, "mean": float(d.mean()), "sd": sd})
        md.append(f"| {mult} | {len(d)} | {r:.5f} | {d.mean():+.6f} | {sd:.6f} | {d.mean() / r:.4f} |")
    json.dump(res, open(os.path.join(args.work, "results.json"), "w"), indent=1)
    open(os.path.join(args.work, "results.md"), "w").write("\n".join(md) + "\n")
    print("\n".join(md))


def int4_groups(x, group):
    g = x.reshape(-1, group)
    s = half_round_up(np.abs(g).max(axis=1))
    out = np.zeros_like(g)
    nz = s > 0
    out[nz] = (np.clip(np.round(g[nz] / s[nz, None] * 7), -7, 7) / 7 * s[nz, None]).astype(np.float32)
    return out.reshape(x.shape)


if __name__ == "__main__":
    main()
