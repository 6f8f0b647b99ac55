#!/usr/bin/python3
"""Sweep report: reads the runs' HDF5 logs and writes Markdown tables with the report's numbers side by side, plus
PNG figures (the report's Table 1, 2, the S sweep, the ablations, the LR grid, Fig. 1a/1b/1c, 3, 4a/4b).

  python3 experiments/report.py experiments/table1/sweep.yaml --out experiments/table1/
  python3 experiments/report.py runs/table1/sweep.json runs/table2/sweep.json --out experiments/table1_2/
  python3 experiments/report.py experiments/regime_table2/sweep.yaml --out experiments/regime_table2/ \
      --compare-budget experiments/regime_stage2/sweep.yaml
  python3 experiments/report.py --flashsim fs.h5 --iobench io.h5 [--iobench-disk 'NVMe X'] --out experiments/storage/
  python3 experiments/report.py --selftest

A SWEEP argument is a sweep file or a sweep.json. A sweep file whose records/ folder holds run records (committed
JSON, experiments/RECORDS.md) is reported from them: the expected runs are the sweep file's expansion, records of
other or changed runs are named and left out, and only runs without a record are read from their run directory
(via the manifest <out_dir>/sweep.json, out_dir relative to the working directory as for `pagegram sweep run`).
Without records, the runs come from the manifest's run directories. Only finished runs enter the numbers; each
table says how many runs it holds, where they were read from, their revisions, regime and stalls. Figures draw the
report's numbers (REPORT_NUM) beside ours as hollow crimson markers where the report gives one. Needs h5py, numpy, matplotlib and yaml (Debian: python3-h5py python3-numpy
python3-matplotlib python3-yaml); no scipy: the t distribution's tail is the regularized incomplete beta function.
"""
import argparse
import copy
import datetime
import json
import math
import os
import platform
import re
import subprocess
import sys

import h5py
import numpy as np
import yaml

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

# ------------------------------------------------------------------------------------------------------------
# Statistics (no scipy).


def _betacf(a, b, x):
    """Continued fraction of the incomplete beta function (modified Lentz; Numerical Recipes §6.4)."""
    tiny, eps = 1e-300, 1e-15
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 400):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < eps:
            break
    return h


def betainc_reg(a, b, x):
    """Regularized incomplete beta I_x(a, b)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    lbt = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log(1.0 - x)
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(lbt) * _betacf(a, b, x) / a
    return 1.0 - math.exp(lbt) * _betacf(b, a, 1.0 - x) / b


def t_test_p(t, df):
    """Two-sided p-value of Student's t with df degrees of freedom: I_{df/(df+t^2)}(df/2, 1/2)."""
    if not math.isfinite(t):
        return 0.0
    return betainc_reg(df / 2.0, 0.5, df / (df + t * t))


def paired_t(diffs):
    """(t, two-sided p) of the paired t-test on per-seed differences; (nan, nan) below 2 pairs or zero spread."""
    d = np.asarray(diffs, dtype=float)
    n = len(d)
    if n < 2:
        return float("nan"), float("nan")
    sd = d.std(ddof=1)
    if sd == 0.0:
        return (math.copysign(math.inf, d.mean()) if d.mean() != 0 else float("nan")), (0.0 if d.mean() != 0 else 1.0)
    t = d.mean() / (sd / math.sqrt(n))
    return t, t_test_p(t, n - 1)


def t_quantile(q, df):
    """The q-quantile of Student's t with df degrees of freedom (0.5 < q < 1), by bisection on t_test_p."""
    target = 2.0 * (1.0 - q)  # two-sided p at the quantile
    lo, hi = 0.0, 1.0
    while t_test_p(hi, df) > target:
        hi *= 2.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if t_test_p(mid, df) > target else (lo, mid)
    return 0.5 * (lo + hi)


def mean_ci(diffs, level=0.95):
    """(low, high) of the t confidence interval of the mean of per-seed differences; (nan, nan) below 2 values."""
    d = np.asarray(diffs, dtype=float)
    if len(d) < 2:
        return float("nan"), float("nan")
    h = t_quantile(0.5 + level / 2.0, len(d) - 1) * d.std(ddof=1) / math.sqrt(len(d))
    return float(d.mean() - h), float(d.mean() + h)


def holm(ps):
    """Holm-Bonferroni adjusted p-values (same order as ps; nan stays nan and is not counted)."""
    idx = [i for i, p in enumerate(ps) if p is not None and math.isfinite(p)]
    out = [float("nan")] * len(ps)
    m, run = len(idx), 0.0
    for rank, i in enumerate(sorted(idx, key=lambda i: ps[i])):
        run = max(run, min(1.0, (m - rank) * ps[i]))
        out[i] = run
    return out


def f_test_p(f, d1, d2):
    """Upper tail P(F >= f) of Fisher's F(d1, d2): I_{d2/(d2 + d1 f)}(d2/2, d1/2)."""
    if not math.isfinite(f):
        return 0.0
    return betainc_reg(d2 / 2.0, d1 / 2.0, d2 / (d2 + d1 * f)) if f > 0 else 1.0


def rm_anova(matrix):
    """One-way repeated-measures ANOVA: rows = seeds (blocks), columns = layouts. (F, df1, df2, p); nan when there
    are fewer than 2 rows or columns or no residual spread."""
    x = np.asarray(matrix, dtype=float)
    n, k = x.shape if x.ndim == 2 else (0, 0)
    if n < 2 or k < 2:
        return float("nan"), 0, 0, float("nan")
    g = x.mean()
    ss_cond = n * float(((x.mean(axis=0) - g) ** 2).sum())
    ss_subj = k * float(((x.mean(axis=1) - g) ** 2).sum())
    ss_err = float(((x - g) ** 2).sum()) - ss_cond - ss_subj
    d1, d2 = k - 1, (k - 1) * (n - 1)
    if ss_err <= 0:
        return float("nan"), d1, d2, float("nan")
    f = (ss_cond / d1) / (ss_err / d2)
    return f, d1, d2, f_test_p(f, d1, d2)


def _binom_ge(n, k):
    """P(X >= k), X ~ Binomial(n, 1/2)."""
    return sum(math.comb(n, i) for i in range(max(k, 0), n + 1)) / 2.0 ** n


def sign_test_p(diffs):
    """One-sided sign test of H1 'A better' (diff = A - B < 0): P(X >= wins), X ~ Binomial(n, 1/2), ties dropped."""
    d = [x for x in diffs if x != 0.0]
    n, wins = len(d), sum(1 for x in d if x < 0.0)
    if n == 0:
        return float("nan"), 0, 0
    return _binom_ge(n, wins), wins, n


def sign_test_p2(diffs):
    """Two-sided sign test (ties dropped): 2 P(X >= max(wins, losses)), at most 1."""
    _, wins, n = sign_test_p(diffs)
    return float("nan") if n == 0 else min(1.0, 2.0 * _binom_ge(n, max(wins, n - wins)))


def selftest():
    # Reference values (scipy.stats): t.sf(2.776445, 4)*2 = 0.05; t.sf(1.0, 1)*2 = 0.5; t.sf(2.0, 10)*2 = 0.07339.
    checks = [(t_test_p(2.7764451, 4), 0.05), (t_test_p(1.0, 1), 0.5), (t_test_p(2.0, 10), 0.0733880347),
              (t_test_p(0.0, 3), 1.0), (betainc_reg(2.0, 3.0, 0.4), 0.5248), (sign_test_p([-1] * 5)[0], 1 / 32),
              (sign_test_p([-1, -1, -1, -1, 1])[0], 6 / 32), (sign_test_p2([-1] * 5), 2 / 32),
              (sign_test_p2([-1, -1, 1, 1]), 1.0), (sign_test_p2([1, 1, 1, -1, 0]), 10 / 16)]
    for got, want in checks:
        assert abs(got - want) < 1e-4, (got, want)
    # Two-sided critical values of t: 4.604 (df 4, p 0.01), 2.131 (df 15, p 0.05).
    assert abs(t_test_p(4.604095, 4) - 0.01) < 1e-5 and abs(t_test_p(-2.131450, 15) - 0.05) < 1e-5
    # t quantiles (scipy.stats.t.ppf): 0.975 at df 4 = 2.776445, df 7 = 2.364624, df 2 = 4.302653.
    for df, want in ((4, 2.776445), (7, 2.364624), (2, 4.302653)):
        assert abs(t_quantile(0.975, df) - want) < 1e-5, (df, t_quantile(0.975, df))
    # Holm: p (0.01, 0.04, 0.03) over 3 -> (0.03, 0.06, 0.06); F(2, 8) upper tail at 4.459 = 0.05.
    assert np.allclose(holm([0.01, 0.04, 0.03]), [0.03, 0.06, 0.06]) and abs(f_test_p(4.45897, 2, 8) - 0.05) < 1e-5
    # A textbook repeated-measures ANOVA (6 subjects x 3 conditions): F(2, 10) = 12.534, p = 0.0019.
    f, d1, d2, p = rm_anova([[45, 50, 55], [42, 42, 45], [36, 41, 43], [39, 35, 40], [51, 55, 59], [44, 49, 56]])
    assert (d1, d2) == (2, 10) and abs(f - 12.534) < 1e-3 and abs(p - 0.001886) < 1e-5, (f, p)
    t, p = paired_t([-0.05, -0.07, -0.02, -0.11, -0.09])  # mean -0.068, sd 0.034928
    assert abs(t - (-0.068 / (0.0349285 / math.sqrt(5)))) < 1e-3 and abs(p - t_test_p(t, 4)) < 1e-12, (t, p)
    print("selftest ok")


# ------------------------------------------------------------------------------------------------------------
# Reading sweeps and runs.


def _s(v):
    return v.decode() if isinstance(v, bytes) else str(v)


def load_manifest(arg):
    """The sweep manifest (dict) of a sweep.yaml or sweep.json, with 'root' = the directory holding the runs."""
    if arg.endswith(".json"):
        path = arg
    else:
        with open(arg) as f:
            spec = yaml.safe_load(f)
        out_dir = spec.get("out_dir") or os.path.join("runs", spec["name"])
        path = os.path.join(out_dir, "sweep.json")
    if not os.path.exists(path):
        sys.exit(f"error: {path}: no sweep manifest (hint: `pagegram sweep run {arg}` or `sweep slurm` writes it)")
    with open(path) as f:
        m = json.load(f)
    m["root"] = os.path.dirname(os.path.abspath(path))
    return m


def total_steps(train):
    if train.get("steps", 0) > 0:
        return int(train["steps"])
    return int(math.ceil(train["tokens"] / train["tokens_per_step"]))


def load_run(root, entry):
    r = dict(entry)
    r["status"], r["log"] = "pending", os.path.join(root, entry["dir"], "log.h5")
    if not os.path.exists(r["log"]):
        return r
    try:
        with h5py.File(r["log"], "r") as f:
            a = f.attrs
            r["status"] = _s(a.get("status", "running"))
            r["config"] = yaml.safe_load(_s(a["config"]))
            for k in ("host", "cpus", "revision", "kernels", "build_type", "started", "updated"):
                r[k] = _s(a.get(k, "?"))
            r["threads"] = int(a.get("threads", 0))
            r["data"] = _s(a.get("data", ""))
            r["eval_step"] = f["eval/step"][:]
            r["eval_tokens"] = f["eval/tokens"][:]
            r["eval_loss"] = f["eval/loss"][:]
            el = f["train/elapsed_s"][:]
            r["elapsed_s"] = float(el[-1]) if len(el) else 0.0
            tps = f["summary"].attrs.get("train_tok_per_s") if "summary" in f else None
            r["tok_per_s"] = float(tps) if tps is not None else float("nan")
            r["final"] = float(r["eval_loss"][-1]) if len(r["eval_loss"]) else float("nan")
    except (OSError, KeyError) as e:
        r["status"] = f"unreadable ({e})"
    return r


class Sweep:
    """A sweep's runs: from its records (a sweep file whose records/ folder holds records; run directories only for
    runs without one) or from its manifest's run directories."""

    def __init__(self, arg):
        recs = [] if arg.endswith(".json") else records_of(arg)
        if recs:
            self.manifest, self.runs, self.notes = load_from_records(arg, recs)
        else:
            self.manifest, self.notes = load_manifest(arg), []
            self.runs = [dict(load_run(self.manifest["root"], e), source="run dir") for e in self.manifest["runs"]]
        self.name = self.manifest["name"]
        self.done = [r for r in self.runs if r["status"] == "finished"]
        self.variants = list(self.manifest["variants"])

    def final(self, variant, grid=None):
        """{seed: final held-out loss} of the finished runs of a variant (and grid point)."""
        return {r["seed"]: r["final"] for r in self.done
                if r["variant"] == variant and (grid is None or r["grid"] == grid)}

    def has(self, variant):
        return variant in self.variants

    def config(self):
        for r in self.runs:
            if "config" in r:
                return r["config"]
        return None


# ------------------------------------------------------------------------------------------------------------
# Run records (experiments/<table>/records/<run>-<hash>.json, written by `pagegram sweep run`; RECORDS.md).
# A sweep file whose records/ folder holds records is reported from them; run directories are read only for the
# runs of the expansion that have no record.

def load_expansion(spec_path):
    """(spec, runs, axes) of a sweep file from <sweep dir>/records/expansion.json: the expansion as the binary
    computed it (`pagegram sweep expand`; `sweep record` and `sweep run` write it too). The run identity (run names,
    config hashes, resolved configs) has one implementation, sweep/spec.cpp: this only reads it, and refuses an
    expansion whose inputs (the sweep file and the presets of its base chain, kept in it) are not the files here now.
    spec: name, description, base, out_dir, seeds; runs: name, variant, seed, grid {key: value text}, overrides
    {key: value text} (tokens, set, variant, grid, seed), hash, planned (its resolved config, YAML text)."""
    d = os.path.dirname(os.path.abspath(spec_path))
    path = os.path.join(d, "records", "expansion.json")
    hint = f"(hint: `pagegram sweep expand {spec_path}` writes it from the sweep file; commit it beside the records)"
    try:
        with open(path) as f:
            plan = json.load(f)
    except FileNotFoundError:
        sys.exit(f"error: {path}: no expansion file of the sweep {hint}")
    except (OSError, ValueError) as e:
        sys.exit(f"error: {path}: unreadable ({e}) {hint}")
    if plan.get("format") != "pagegram-sweep-expansion" or plan.get("format_version") != 1:
        sys.exit(f"error: {path}: not a pagegram-sweep-expansion of format_version 1 {hint}")
    if os.path.normpath(os.path.join(d, plan["spec"])) != os.path.normpath(os.path.abspath(spec_path)):
        sys.exit(f"error: {path}: the expansion of {plan['spec']}, not of {os.path.basename(spec_path)} {hint}")
    for rel, text in plan["inputs"].items():
        try:
            with open(os.path.join(d, rel)) as f:
                now = f.read()
        except OSError:
            now = None
        if now != text:
            sys.exit(f"error: {path}: out of date: {rel} {'is gone' if now is None else 'changed'} since it was "
                     f"written {hint}")
    runs = [dict(name=r["name"], variant=r["variant"], seed=r["seed"], grid=dict(r["grid"]),
                 overrides=dict(x.split("=", 1) for x in r["overrides"]), hash=r["hash"], planned=r["config"])
            for r in plan["runs"]]
    spec = {k: plan[k] for k in ("name", "description", "base", "out_dir", "seeds")}
    return spec, runs, dict(grid=list(plan["grid"].items()))


def _flatten(d, prefix=""):
    out = {}
    for k, v in (d or {}).items():
        if isinstance(v, dict):
            out.update(_flatten(v, prefix + k + "."))
        else:
            out[prefix + k] = v
    return out


def _norm(v):
    """A config value comparable across yaml-cpp's dump and PyYAML (which reads 1e-06 as a string)."""
    if isinstance(v, str):
        v = yaml.safe_load(v) if v.strip() else v
    if isinstance(v, bool) or v is None:
        return v
    if isinstance(v, (int, float)):
        return float(v)
    if isinstance(v, list):
        return tuple(_norm(x) for x in v)
    try:
        return float(v)
    except (TypeError, ValueError):
        return v


RUN_OWNED = ("train.out_dir", "train.threads", "name")  # set per run or per preset file: not compared
# Memory keys that only choose what the run log records (MemoryConfig::kLogOnlyKeys): not compared either.
LOG_ONLY_KEYS = ("collision_stats", "collision_owners")


def corpus_build(data):
    """The corpus build a `data` fingerprint names, as a comparable key: the fingerprint without its `manifest` hash
    (before 964454b that hashed the manifest file, whose build time changes with every rebuild of the same text; the
    token and document counts, tokenizer and split still tell builds apart). "" when unrecorded."""
    return re.sub(r"(^|; )manifest [0-9a-f]+", r"\1manifest ·", data or "")


def run_from_record(rec, path):
    """A record as load_run's run dict (what the tables and figures read)."""
    ev = rec.get("eval", {})
    fin = rec.get("final", {}).get("heldout_loss")
    return dict(name=rec["name"], variant=rec["variant"], seed=rec["seed"], grid=dict(rec.get("grid", {})),
                hash=rec.get("config_hash"), source="record", log=path, status=rec.get("status", "?"),
                config=yaml.safe_load(rec.get("config", "")), host=rec.get("host", "?"), cpus=rec.get("cpu", "?"),
                revision=rec.get("revision", "?"), kernels=rec.get("kernels", "?"),
                build_type=rec.get("compiler_flags", "?"), started=rec.get("started", "?"),
                updated=rec.get("updated", "?"), threads=int(rec.get("threads", 0)), data=rec.get("data") or "",
                eval_step=np.asarray(ev.get("step", []), dtype=np.int64),
                eval_tokens=np.asarray(ev.get("tokens", []), dtype=np.int64),
                eval_loss=np.asarray([float("nan") if x is None else x for x in ev.get("loss", [])], dtype=float),
                elapsed_s=float(rec.get("train_seconds") or 0.0),
                tok_per_s=float(rec["tok_per_s_median"]) if rec.get("tok_per_s_median") else float("nan"),
                final=float("nan") if fin is None else float(fin))


def records_of(spec_path):
    """[(path, record)] of a sweep file's records/ folder (unreadable files: record None)."""
    d = os.path.join(os.path.dirname(os.path.abspath(spec_path)), "records")
    out = []
    for fn in sorted(os.listdir(d)) if os.path.isdir(d) else []:
        if fn.endswith(".json") and fn != "expansion.json":  # expansion.json: the sweep's expansion (load_expansion)
            try:
                with open(os.path.join(d, fn)) as f:
                    rec = json.load(f)
                out.append((os.path.join(d, fn), rec if rec.get("format") == "pagegram-run-record" else None))
            except (OSError, ValueError):
                out.append((os.path.join(d, fn), None))
    return out


def load_from_records(spec_path, recs):
    """(manifest, runs, notes) of a sweep file with records: the expected runs from the sweep file, each from its
    record, else from its run directory (when the sweep's manifest is here), else pending."""
    spec, expected, ax = load_expansion(spec_path)
    out_dir = spec["out_dir"]
    mpath = os.path.join(out_dir, "sweep.json")
    manifest = None
    if os.path.exists(mpath):
        with open(mpath) as f:
            manifest = json.load(f)
        manifest["root"] = os.path.dirname(os.path.abspath(mpath))
    entries = {e["name"]: e for e in (manifest or {}).get("runs", [])}
    by_name, notes = {}, []
    names = {r["name"] for r in expected}
    for path, rec in recs:
        fn = os.path.basename(path)
        if rec is None:
            notes.append(f"`{fn}`: not a readable pagegram-run-record (ignored)")
        elif rec.get("name") not in names:
            notes.append(f"`{fn}`: run `{rec.get('name')}` is not in the sweep file's expansion (ignored)")
        elif not fn.startswith(f"{rec['name']}-{rec.get('config_hash')}."):
            notes.append(f"`{fn}`: file name does not match its name and config_hash (ignored)")
        else:
            by_name.setdefault(rec["name"], []).append((path, rec))
    runs, kept = [], []
    for e in expected:
        cands = []
        for path, rec in by_name.get(e["name"], []):
            prob = [] if rec.get("config_hash") == e["hash"] else [
                f"config_hash {rec.get('config_hash')} is not the sweep's ({e['hash']}: records/expansion.json)"]
            if e["name"] in entries and entries[e["name"]]["hash"] != rec["config_hash"]:
                prob.append(f"hash differs from the manifest's {entries[e['name']]['hash']}")
            if prob:
                notes.append(f"`{os.path.basename(path)}`: stale, not used: " + "; ".join(prob))
            else:
                cands.append((rec.get("updated", ""), path, rec))
        if cands:
            _, path, rec = max(cands)
            if len(cands) > 1:
                notes.append(f"`{e['name']}`: {len(cands)} records fit; the latest updated (`{os.path.basename(path)}`)"
                             " is used")
            kept.append((path, rec))
            runs.append(dict(run_from_record(rec, path), grid=e["grid"]))  # the name matched: the expansion's
        elif e["name"] in entries:
            r = load_run(manifest["root"], entries[e["name"]])
            r["source"] = "run dir"
            runs.append(r)
        else:
            runs.append(dict(e, status="no record", source="none"))
    # Corpus builds (the records' `data`, RECORDS.md "Corpus builds"): runs of different builds trained on other
    # training windows; say so when the records name more than one, or some name one and some none.
    builds = {}
    for _, rec in kept:
        builds.setdefault(rec.get("data") or "", []).append(rec["name"])
    named = {k: sorted(v) for k, v in builds.items() if k}
    listing = "; ".join(f"{', '.join(v)}: `{k}`" for k, v in sorted(named.items()))
    groups = {corpus_build(k) for k in named}
    if len(named) > 1 and len(groups) == 1:
        # Before 964454b `manifest` hashed the manifest file, whose build time changes with every rebuild of the same
        # corpus text: fingerprints that differ only there may be one corpus.
        notes.append(f"corpus builds: the records name {len(named)} `data` fingerprints that differ only in the "
                     "`manifest` hash (same token and document counts, vocabulary, tokenizer and split). Builds "
                     "before 964454b hashed the manifest file, which changes with every rebuild of the same corpus "
                     "text, so the records alone cannot tell whether the training windows differ; "
                     "experiments/RECORDS.md (Corpus builds, and the sweep's section) says what was checked: "
                     + listing)
    elif len(named) > 1:
        notes.append(f"corpus builds: the records name {len(named)} different `data` fingerprints"
                     + (f" of {len(groups)} corpus builds (fingerprints that differ only in the `manifest` hash are "
                        "counted as one build: builds before 964454b hashed the manifest file, which changes with "
                        "every rebuild of the same corpus text; experiments/RECORDS.md says what was checked)"
                        if len(groups) < len(named) else "")
                     + ", so runs of different builds trained on different training windows (experiments/RECORDS.md, "
                     "Corpus builds): " + listing)
    if named and "" in builds:
        notes.append("corpus build not recorded (records written before the `data` field) for: "
                     + ", ".join(sorted(builds[""])))
    elif "" in builds:
        notes.append(f"corpus build: not recorded in any of the {len(builds[''])} records (written before the `data` "
                     "field existed): which corpus build they trained on is known only from experiments/RECORDS.md "
                     "(Corpus builds), not checkable from the records")
    elif len(named) == 1:
        notes.append(f"corpus build: every record names the same `data`: `{next(iter(named))}`")
    man = dict(name=spec["name"], description=spec.get("description", ""), spec=spec_path, base=spec["base"],
               seeds=spec["seeds"], variants=list(dict.fromkeys(e["variant"] for e in expected)),
               grid={k: v for k, v in ax["grid"]}, runs=expected,
               root=os.path.dirname(os.path.abspath(spec_path)) + "/records")
    if manifest is None:
        notes.append("hashes: a record is used when it carries its run's config hash in the sweep's expansion "
                     "(records/expansion.json, the binary's expansion of the sweep file and its presets)")
    return man, runs, notes


def git_head():
    try:
        here = os.path.dirname(os.path.abspath(__file__))
        h = subprocess.run(["git", "-C", here, "rev-parse", "--short=12", "HEAD"], capture_output=True, text=True,
                           check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", here, "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True).stdout.strip()
        return h + (" (+ uncommitted changes)" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def fmt_dur(s):
    s = int(round(s))
    return f"{s // 3600}h{s % 3600 // 60:02d}m" if s >= 3600 else f"{s // 60}m{s % 60:02d}s"


def fmt_count(n):
    return f"{n / 1e9:.1f}B" if n >= 1e9 else f"{n / 1e6:.2f}M" if n >= 1e6 else f"{n / 1e3:.0f}K" if n >= 1e3 else str(n)


def caption(sw):
    """Scale, commit, machine and time of a sweep: stated under every table."""
    c = sw.config()
    if c is None:
        return f"*No finished or started run yet in {sw.manifest['root']}.*"
    m, mem, tr = c["model"], c["memory"], c["train"]
    steps = total_steps(tr)
    tables = sorted({(r["config"]["memory"]["layout"], r["config"]["memory"]["target_params"]) for r in sw.done
                     if r["config"]["memory"]["layout"] != "none"})
    sizes = sorted({p for _, p in tables}) or [mem["target_params"]]
    tokens = sorted({total_steps(r["config"]["train"]) * r["config"]["train"]["tokens_per_step"] for r in sw.done}) \
        or [steps * tr["tokens_per_step"]]
    lr_mults = "/".join(f"{x:g}" for x in sorted({float(r["config"]["memory"]["lr_mult"]) for r in sw.done})
                        or [float(mem["lr_mult"])])
    revs = sorted({r.get("revision", "?") for r in sw.done})
    hosts = sorted({f"{r.get('host', '?')} (CPUs {r.get('cpus', '?')}, {r.get('threads', '?')} threads/run, "
                    f"{r.get('build_type', '?')})" for r in sw.done})
    train_s = sum(r["elapsed_s"] for r in sw.done)
    tps = [r["tok_per_s"] for r in sw.done if math.isfinite(r.get("tok_per_s", float("nan")))]
    return (f"*Scale:* {m['layers']} layers, d {m['d_model']}, {m['heads']} heads, T {m['context']}, vocab "
            f"{m['vocab']:,}; {' / '.join(fmt_count(t) for t in tokens)} tokens per run ({tr['tokens_per_step']:,} per "
            f"step); tables {' / '.join(fmt_count(s) for s in sizes)} params (K {mem['heads']}, r {mem['head_dim']}, "
            f"blocks {mem['inject_layers']}, table lr {lr_mults}x); {len(sw.done)}/{len(sw.runs)} runs finished. "
            f"*Commit:* {', '.join(revs) or '?'} (report generated at {git_head()}). "
            f"*Machine:* {'; '.join(hosts) or '?'}. "
            f"*Time:* {fmt_dur(train_s)} training (sum of elapsed_s over runs"
            + (f", median {np.median(tps):,.0f} tok/s per run" if tps else "") + ").")


# ------------------------------------------------------------------------------------------------------------
# Tables.


def f4(x):
    return "—" if x is None or not math.isfinite(x) else f"{x:+.4f}" if x < 0 or x > 0 else "0.0000"


def fp(p):
    return "—" if p is None or not math.isfinite(p) else f"{p:.3f}" if p >= 0.001 else f"{p:.1e}"


def variant_table(sw, variants, refs=None):
    refs = refs or {}
    seeds = sorted({r["seed"] for r in sw.runs})
    lines = ["| variant | runs | mean ± sd (nats) | " + " | ".join(f"s{s}" for s in seeds) + " | report |",
             "|---|---:|---:|" + "---:|" * len(seeds) + "---|"]
    for v in variants:
        fin = sw.final(v)
        vals = np.array(list(fin.values()))
        ms = "—" if len(vals) == 0 else f"{vals.mean():.4f}" + (f" ± {vals.std(ddof=1):.4f}" if len(vals) > 1 else "")
        per = " | ".join(f"{fin[s]:.4f}" if s in fin else "·" for s in seeds)
        lines.append(f"| {v} | {len(vals)} | {ms} | {per} | {refs.get(v, '—')} |")
    return "\n".join(lines)


def fci(ci):
    lo, hi = ci
    return "—" if not (math.isfinite(lo) and math.isfinite(hi)) else f"{f4(lo)} … {f4(hi)}"


def pair_stats(sw, a, b, seeds=None):
    """Paired statistics of A − B over the seeds where both finished (diff < 0: A better); seeds: only these."""
    fa, fb = sw.final(a), sw.final(b)
    common = sorted(set(fa) & set(fb) & (set(fa) if seeds is None else set(seeds)))
    d = [fa[s] - fb[s] for s in common]
    t, p = paired_t(d)
    ps, wins, n = sign_test_p(d)
    return dict(seeds=common, diffs=d, mean=float(np.mean(d)) if d else float("nan"),
                sd=float(np.std(d, ddof=1)) if len(d) > 1 else float("nan"), t=t, p_t=p, ci=mean_ci(d),
                p_sign=ps, wins=wins, n_sign=n, p_sign2=sign_test_p2(d))


def pair_rows(sw, pairs):
    """Rows of paired differences. pairs: (A, B, report text); diff = A - B per seed, negative = A better. The Holm
    column corrects the t-tests' p over the contrasts of this table."""
    seeds = sorted({r["seed"] for r in sw.runs})
    lines = ["| A − B | n | mean diff | 95% CI | sd | " + " | ".join(f"s{s}" for s in seeds) +
             " | paired t p (2-sided) | Holm p | A better | sign p (1-sided) | sign p (2-sided) | report |",
             "|---|---:|---:|---:|---:|" + "---:|" * len(seeds) + "---:|---:|---:|---:|---:|---|"]
    stats = {(a, b): pair_stats(sw, a, b) for a, b, _ in pairs if sw.has(a) and sw.has(b)}
    adj = dict(zip(stats, holm([st["p_t"] for st in stats.values()])))
    for a, b, ref in pairs:
        if (a, b) not in stats:
            continue
        st = stats[(a, b)]
        st["p_holm"] = adj[(a, b)]
        dd = dict(zip(st["seeds"], st["diffs"]))
        per = " | ".join(f4(dd[s]) if s in dd else "·" for s in seeds)
        sd = st["sd"]
        lines.append(f"| {a} − {b} | {len(st['diffs'])} | {f4(st['mean'])} | {fci(st['ci'])} | "
                     f"{'—' if not math.isfinite(sd) else f'{sd:.4f}'} | {per} | {fp(st['p_t'])} | {fp(st['p_holm'])} | "
                     f"{st['wins']}/{st['n_sign']} | {fp(st['p_sign'])} | {fp(st['p_sign2'])} | {ref} |")
    return "\n".join(lines), stats


def omnibus_line(sw, variants):
    """The repeated-measures ANOVA over the table layouts (every variant but none) on the seeds where all finished."""
    layouts = [v for v in variants if v != "none" and sw.final(v)]
    if len(layouts) < 2:
        return ""
    seeds = sorted(set.intersection(*(set(sw.final(v)) for v in layouts)))
    f, d1, d2, p = rm_anova([[sw.final(v)[s] for v in layouts] for s in seeds])
    if not math.isfinite(f):
        return f"*Omnibus:* not computed ({len(seeds)} seeds with every layout finished)."
    return (f"*Omnibus:* repeated-measures ANOVA over the {len(layouts)} table layouts ({', '.join(layouts)}; seeds as "
            f"blocks, the {len(seeds)} seeds where all finished): F({d1}, {d2}) = {f:.2f}, p {fp(p)}. The Holm column "
            f"corrects each paired t-test over the contrasts of the table above.")


# The report's numbers (from the PageGram report's summary) in one place, as the report prints them (strings keep
# its digits). The tables' `report` column and the figures' "report" markers both read them. Paired differences
# A − B in nats of final held-out loss (negative: A better).
REPORT_NUM = {
    # Table 1: 60M tokens, 5 seeds. Engram-style trails flat by 0.074; the memory gain (none − PageGram) is 0.40.
    "table1": {"budget": "60M tokens, 5 seeds", ("pagegram_s4", "flat"): "-0.067", ("pagegram_s4", "engram"): "-0.142",
               ("engram", "flat"): "+0.074", ("none", "pagegram_s4"): "0.40"},
    # Table 2: 120M tokens, 3 seeds (PageGram − Engram-style: "within ±0.010", no signed number).
    "table2": {"budget": "120M tokens, 3 seeds", ("pagegram_s4", "flat"): "-0.024", ("engram", "flat"): "-0.034",
               ("none", "pagegram_s4"): "0.095", ("pagegram_s4", "engram"): "±0.010"},
    # Table 5, ablations (60M tokens): what each change costs PageGram S=4 (every seed for the context gate).
    "table5_ablations": {"budget": "60M tokens", ("pagegram_s4", "pagegram_s4_ctxgate"): "-0.140",
                         ("pagegram_s4", "pagegram_s4_small"): "-0.206"},
    # Table 8: the table lr multiple that is best for every table (seed 0, 30M tokens).
    "table8_lr_grid": {"budget": "seed 0, 30M tokens", "best_lr_mult": "70"},
    # Table 6 / Fig. 1c / 4a: flash reads per token of 4-bit tables over 20M tokens. Key: (layout, table params or
    # None for every size, LRU cache bytes).
    "flashsim": {"budget": "4-bit tables of 3.2B, 10B, 20B params, 20M tokens", ("flat", None, 0): "2",
                 ("pagegram", None, 0): "2", ("engram", None, 0): "16", ("pagegram", 20e9, 2 ** 30): "0.99",
                 ("engram", 20e9, 2 ** 30): "9.18"},
    # Fig. 4b: lookups per second at 64 reads in flight on the report's NVMe device; its read latency at depth 1.
    "iobench": {"budget": "NVMe", ("engram", 64): "17K", ("pagegram", 64): "119K", "read_us_depth1": "60"},
}
REPORT_NUM["regime_stage1"] = REPORT_NUM["table1"]  # the regime-matched Table 1 compares with Table 1
REPORT_NUM["regime_stage2"] = REPORT_NUM["table1"]  # stage 2: Table 1 (and the S sweep, which has no number)
REPORT_NUM["regime_table2"] = REPORT_NUM["table2"]  # the regime-matched Table 2 compares with Table 2


def rnum(kind, key):
    """A report number as a float (None when the report gives none); 17K = 17,000."""
    s = REPORT_NUM.get(kind, {}).get(key)
    if s is None:
        return None
    s = s.lstrip("±")
    mult = 1e3 if s.endswith("K") else 1.0
    return float(s.rstrip("K")) * mult


def rtext(kind, key):
    """A report number as the tables print it (Unicode minus)."""
    return REPORT_NUM[kind][key].replace("-", "−")


def rneg(kind, key):
    """The report's A − B as B − A, printed (the report states some pairs the other way round)."""
    return f"{-rnum(kind, key):+.3f}".replace("-", "−")


def report_diffs(kind, baseline):
    """{variant: report's (variant − baseline)} of a sweep kind, from REPORT_NUM (either order of the pair)."""
    out = {}
    for key in REPORT_NUM.get(kind, {}):
        if isinstance(key, tuple) and len(key) == 2 and baseline in key and not REPORT_NUM[kind][key].startswith("±"):
            a, b = key
            if b == baseline:
                out[a] = rnum(kind, key)
            elif a == baseline:
                out[b] = -rnum(kind, key)
    return out


T1, T2, T5 = "table1", "table2", "table5_ablations"
# Per sweep kind: title and the pairs of the paired-difference table (A, B, the report's value as text).
REPORT = {
    "table1": dict(
        title="Table 1: every layout vs no table and vs each other (report: 60M tokens, 5 seeds)",
        pairs=[("pagegram_s4", "flat", f"{rtext(T1, ('pagegram_s4', 'flat'))} (t p=0.08, sign p=0.03, 5/5 seeds)"),
               ("pagegram_s4", "engram", f"{rtext(T1, ('pagegram_s4', 'engram'))} (t p=0.02)"),
               ("flat", "engram", f"{rneg(T1, ('engram', 'flat'))} (Engram-style trails flat)"),
               ("flat", "none", "< 0 (every table beats no table)"),
               ("engram", "none", "< 0 (every table beats no table)"),
               ("pagegram_s4", "none", f"< 0; memory gain {rtext(T1, ('none', 'pagegram_s4'))} at 60M (Table 2 text)")],
        extra="Report throughput (RTX 5090): PageGram 108K vs no table 113K tok/s, < 5% overhead. Ours: the table "
              "above (CPU, training steps only; runs of one sweep may share the machine with other jobs)."),
    "table2": dict(
        title="Table 2: the same at 2× tokens (report: 120M tokens, 3 seeds)",
        pairs=[("pagegram_s4", "none", f"memory gain falls from {rtext(T1, ('none', 'pagegram_s4'))} (60M) to "
                                       f"{rtext(T2, ('none', 'pagegram_s4'))} (120M)"),
               ("engram", "flat", f"{rtext(T2, ('engram', 'flat'))} (Engram-style beats flat)"),
               ("pagegram_s4", "engram", f"within {rtext(T2, ('pagegram_s4', 'engram'))} of Engram-style"),
               ("pagegram_s4", "flat", rtext(T2, ("pagegram_s4", "flat"))),
               ("flat", "none", "< 0"), ("engram", "none", "< 0")]),
    "table4_s_sweep": dict(
        title="S sweep: PageGram S ∈ {1, 4, 8, 15, 60} and Engram-style (report: 60M tokens, 5 seeds)",
        pairs=[("pagegram_s4", "pagegram_s1", "S=1 and 4 stable on every seed; S=4 recommended"),
               ("pagegram_s4", "pagegram_s8", "S ≥ 8 falls behind from ≈13M tokens on seed 1 (stalls near 5.28)"),
               ("pagegram_s4", "pagegram_s15", "as S=8"), ("pagegram_s4", "pagegram_s60", "as S=8"),
               ("pagegram_s4", "engram", "Engram-style falls behind on seed 1 too")]),
    "table5_ablations": dict(
        title="Ablations: injection gate and table size (report: 60M tokens)",
        pairs=[("pagegram_s4", "pagegram_s4_ctxgate", f"{rtext(T5, ('pagegram_s4', 'pagegram_s4_ctxgate'))} (the context "
                f"gate costs {rtext(T5, ('pagegram_s4', 'pagegram_s4_ctxgate')).lstrip('−')} on every seed)"),
               ("pagegram_s4", "pagegram_s4_ctxgate_sqrt", "— (Engram's released gate; not in the report)"),
               ("pagegram_s4", "pagegram_s4_small", f"{rtext(T5, ('pagegram_s4', 'pagegram_s4_small'))} (table 200M → "
                f"50M costs {rtext(T5, ('pagegram_s4', 'pagegram_s4_small')).lstrip('−')})")]),
    "table8_lr_grid": dict(title="Table LR grid: table lr multiple × layout (report: seed 0, 30M tokens)"),
    "regime_stage1": dict(
        title="Regime-matched Table 1 (issue 13 stage 1): flat / Engram-style / PageGram S=4 at the report's "
              "steps, lookups per row and params per token",
        pairs=[("pagegram_s4", "flat", f"{rtext(T1, ('pagegram_s4', 'flat'))} (t p=0.08, sign p=0.03, 5/5 seeds)"),
               ("pagegram_s4", "engram", f"{rtext(T1, ('pagegram_s4', 'engram'))} (t p=0.02)"),
               ("engram", "flat", f"{rtext(T1, ('engram', 'flat'))} (Engram-style trails flat)")]),
    # No pairs: the screening table (screening_table) replaces the paired-difference table.
    "regime_factors": dict(
        title="Factor screening (issue 13 stage 1): one quantity at a time, Engram-style − flat at seed 0"),
}


def merged_pairs(*groups, skip=()):
    """The pairs of several kinds' tables in order, each (A, B) once: a pair two tables share keeps its first
    place and both report texts ('; '-joined). Pairs naming a variant in skip are left out."""
    out = {}
    for pairs in groups:
        for a, b, ref in pairs:
            if a in skip or b in skip:
                continue
            if (a, b) not in out:
                out[(a, b)] = ref
            elif ref not in out[(a, b)]:
                out[(a, b)] += f"; {ref}"
    return [(a, b, ref) for (a, b), ref in out.items()]


# Issue 13 stage 2: Table 1 and the S sweep (Table 4 / Fig. 3) in one sweep at the regime preset (no S=60).
REPORT["regime_stage2"] = dict(
    title="Regime-matched Table 1 and S sweep (issue 13 stage 2): none / flat / Engram-style / PageGram S ∈ {1, 4, "
          "8, 15} at the report's steps, lookups per row and params per token (report: 60M tokens, 5 seeds)",
    pairs=merged_pairs(REPORT["table1"]["pairs"], REPORT["table4_s_sweep"]["pairs"],
                       [("pagegram_s4", "pagegram_s8", "steps matched: ≈13M / 131,072 = step ≈99, ≈1.6M "
                         "tokens here")],
                       skip=("pagegram_s60",)),
    extra=REPORT["table1"]["extra"])
# Issue 13, Table 2 at the regime preset: 2x stage 2's tokens; the budget section compares it with stage 2.
REPORT["regime_table2"] = dict(
    title="Regime-matched Table 2 (issue 13): none / flat / Engram-style / PageGram S=4 at 2× stage 2's tokens "
          "(report: 120M tokens, 3 seeds)",
    pairs=list(REPORT["table2"]["pairs"]))
# Issue 38: the report's width (stage A) and the report's model (stage B) at the regime preset, each with a decision
# rule pre-registered in its README (kept above the marker; PREREG_RULE below applies it).
for _kind, _what in (("regime_d384", "d 384, 6 heads, vocabulary 8,192"),
                     ("regime_report_model", "d 384, 6 heads, vocabulary 65,536")):
    REPORT_NUM[_kind] = REPORT_NUM["table1"]
    REPORT[_kind] = dict(
        title=f"The report's signature at the regime preset with {_what} (issue 38): flat / Engram-style / PageGram "
              "S=4 (report: 60M tokens, 5 seeds)",
        pairs=[("pagegram_s4", "engram", f"{rtext(T1, ('pagegram_s4', 'engram'))} (t p=0.02)"),
               ("engram", "flat", f"{rtext(T1, ('engram', 'flat'))} (Engram-style trails flat)"),
               ("pagegram_s4", "flat", f"{rtext(T1, ('pagegram_s4', 'flat'))} (t p=0.08, sign p=0.03, 5/5 seeds)"),
               ("flat", "none", "< 0 (every table beats no table)"),
               ("engram", "none", "< 0 (every table beats no table)"),
               ("pagegram_s4", "none", f"< 0; memory gain {rtext(T1, ('none', 'pagegram_s4'))} at 60M")],
        extra=REPORT["table1"]["extra"])
# The pre-registered rule of regime_d384 / regime_report_model (their README.md, above the marker): thresholds in
# nats of paired final held-out loss; the seeds the rule is first applied to, and the seeds it grows to.
PREREG_RULE = dict(present_s4_engram=-0.07, present_p=0.05, present_engram_flat=0.03, absent_ci=0.05,
                   absent_engram_flat=0.0, lag=0.10, lag_evals=2, layouts=("flat", "engram", "pagegram_s4"),
                   first_seeds={"regime_d384": 5, "regime_report_model": 3}, max_seeds=8)
PREREG_KINDS = ("regime_d384", "regime_report_model")


def apply_rule(s4e, ef, n_seeds, max_seeds=PREREG_RULE["max_seeds"]):
    """The pre-registered verdict from the paired statistics of PageGram S=4 − Engram-style (s4e: mean, p_t, ci) and
    the mean of Engram-style − flat (ef): 'signature present', 'signature absent', 'inconclusive: add seeds' (below
    max_seeds) or 'inconclusive' (at max_seeds)."""
    R = PREREG_RULE
    if s4e["mean"] <= R["present_s4_engram"] and s4e["p_t"] < R["present_p"] and ef >= R["present_engram_flat"]:
        return "signature present"
    lo, hi = s4e["ci"]
    if -R["absent_ci"] < lo and hi < R["absent_ci"] and ef <= R["absent_engram_flat"]:
        return "signature absent"
    return "inconclusive: add seeds" if n_seeds < max_seeds else "inconclusive"


def seed_lag_stalls(sw, layouts=PREREG_RULE["layouts"], lag=PREREG_RULE["lag"], evals=PREREG_RULE["lag_evals"]):
    """[(run, step)] of the table runs whose held-out loss exceeds their seed's median (over the seed's runs of
    `layouts` at that evaluation) by more than `lag` at `evals` consecutive evaluations; step = the first of them."""
    out = []
    for r in (r for r in sw.done if r["variant"] in layouts):
        peers = [o for o in sw.done if o["seed"] == r["seed"] and o["variant"] in layouts]
        at = [dict(zip((int(x) for x in o["eval_step"]), o["eval_loss"])) for o in peers]
        run = 0
        for st, lo in zip(r["eval_step"], r["eval_loss"]):
            vals = [a[int(st)] for a in at if int(st) in a]
            run = run + 1 if len(vals) == len(peers) and lo - float(np.median(vals)) > lag else 0
            if run == evals:
                i = list(r["eval_step"]).index(st) - evals + 1
                out.append((r, int(r["eval_step"][i])))
                break
    return out


def verdict_section(sw, kind, stall=(None, None)):
    """The pre-registered decision (README above the marker) applied to the finished runs."""
    R = PREREG_RULE
    first = R["first_seeds"][kind]
    seeds = sorted({r["seed"] for r in sw.runs if r["variant"] in R["layouts"]})
    done = sorted(set.intersection(*(set(sw.final(v)) for v in R["layouts"]))) if all(sw.has(v) for v in R["layouts"]) \
        else []
    s4e, ef, s4f = (pair_stats(sw, a, b) for a, b in (("pagegram_s4", "engram"), ("engram", "flat"),
                                                      ("pagegram_s4", "flat")))
    lines = ["### Pre-registered decision", "",
             f"The rule above the marker line of this README, applied to the final held-out losses: "
             f"{len(done)} of the {len(seeds)} planned seeds have all three table runs finished "
             f"(the rule is applied at {first} seeds and, if inconclusive, at {R['max_seeds']}).", "",
             "| quantity | n | mean | 95% CI | paired t p | rule |", "|---|---:|---:|---:|---:|---|",
             f"| PageGram S=4 − Engram-style | {len(s4e['diffs'])} | {f4(s4e['mean'])} | {fci(s4e['ci'])} | "
             f"{fp(s4e['p_t'])} | present: ≤ {R['present_s4_engram']:+.2f} with p < {R['present_p']}; absent: CI "
             f"inside ±{R['absent_ci']:.2f} |",
             f"| Engram-style − flat | {len(ef['diffs'])} | {f4(ef['mean'])} | {fci(ef['ci'])} | {fp(ef['p_t'])} | "
             f"present: ≥ {R['present_engram_flat']:+.2f}; absent: ≤ {R['absent_engram_flat']:.0f} |",
             f"| PageGram S=4 − flat (not in the rule) | {len(s4f['diffs'])} | {f4(s4f['mean'])} | {fci(s4f['ci'])} | "
             f"{fp(s4f['p_t'])} | — |", ""]
    complete = len(done) >= first and len(done) == len(seeds)
    if len(seeds) > first and set(seeds[:first]) <= set(done):
        # The sweep was extended after the rule's first application: that verdict, on the first seeds alone, stays.
        s4e1, ef1 = (pair_stats(sw, a, b, seeds[:first]) for a, b in (("pagegram_s4", "engram"), ("engram", "flat")))
        v1 = apply_rule(s4e1, ef1["mean"], first)
        lines.append(f"**Verdict at the first {first} seeds (s{seeds[0]}–s{seeds[first - 1]}): {v1}.** PageGram S=4 − "
                     f"Engram-style {f4(s4e1['mean'])} ({fci(s4e1['ci'])}, paired t p {fp(s4e1['p_t'])}); "
                     f"Engram-style − flat {f4(ef1['mean'])}." + (f" Seeds {seeds[first]}–{seeds[-1]} were added, as "
                     "the rule says." if v1 == "inconclusive: add seeds" else ""))
        lines.append("")
    if complete and len(s4e["diffs"]) >= 2:
        v = apply_rule(s4e, ef["mean"], len(done))
        more = (f" Seeds {max(seeds) + 1}–{R['max_seeds'] - 1} are to be added (flat, Engram-style, PageGram S=4) and "
                f"the rule applied to {R['max_seeds']} seeds." if v == "inconclusive: add seeds" else "")
        lines.append(f"**Verdict ({len(done)} seeds): {v}.**{more}")
    else:
        lines.append(f"**Verdict: pending** ({len(done)} of {len(seeds)} seeds complete; the figures above are "
                     "interim and decide nothing).")
    det = stalls(sw, *stall) if stall[0] else stalls(sw)
    lag = seed_lag_stalls(sw)
    names = sorted({r["name"] for r, _ in det} | {r["name"] for r, _ in lag})
    lines += ["", f"*Stalls (rule's definition):* report.py's detector flags {len(det)} run(s)"
              + (f" ({', '.join(r['name'] for r, _ in det)})" if det else "")
              + f"; {len(lag)} run(s) lag their seed's median by > {R['lag']:.2f} nats at {R['lag_evals']} consecutive "
              "evaluations" + (" (" + ", ".join(r["name"] + f" from step {st}" for r, st in lag) + ")" if lag else "")
              + f". Stalled runs: {', '.join(names) if names else 'none'}."]
    builds = corpus_builds_line(sw, R["layouts"])
    return "\n".join(lines + (["", builds] if builds else []))


def corpus_builds_line(sw, layouts):
    """What the pre-registered design ("every run from one corpus build") meets: None when the finished runs of
    `layouts` name no corpus build; else one line saying whether they are one build, and if not, which seeds each
    build holds and whether every seed's runs share one (a paired difference within one build) or some straddle."""
    runs = [r for r in sw.done if r["variant"] in layouts and r.get("data")]
    if not runs:
        return None
    order = []
    for r in sorted(runs, key=lambda r: (r["seed"], r["name"])):
        if corpus_build(r["data"]) not in order:
            order.append(corpus_build(r["data"]))
    if len(order) == 1:
        return ("*Corpus builds:* every finished run the rule compares names one corpus build (the records' `data`), "
                "as the design says.")
    label = {b: chr(ord("A") + i) for i, b in enumerate(order)}
    by_seed = {}
    for r in runs:
        by_seed.setdefault(r["seed"], {})[r["name"]] = label[corpus_build(r["data"])]
    on = {b: sorted(s for s, m in by_seed.items() if label[b] in m.values()) for b in order}
    held = "; ".join(f"{label[b]}: seed{'s' if len(on[b]) > 1 else ''} {seed_list(on[b])} (`{b}`)" for b in order)
    split = sorted(s for s, m in by_seed.items() if len(set(m.values())) > 1)
    text = (f"*Corpus builds:* the runs the rule compares come from {len(order)} corpus builds, not one as the design "
            f"says (experiments/RECORDS.md says why): {held}. ")
    if not split:
        return text + ("Every seed's runs share one build, so each paired difference is taken within one build; "
                       "between seeds the builds differ as another sample of training windows would.")
    return text + ("The runs of seed(s) " + ", ".join(
        f"s{s} (" + ", ".join(f"{n} {b}" for n, b in sorted(by_seed[s].items())) + ")" for s in split)
        + " straddle builds: their paired differences compare runs trained on different training windows.")


def seed_list(seeds):
    """'0–4, 7' for [0, 1, 2, 3, 4, 7]."""
    out, i = [], 0
    while i < len(seeds):
        j = i
        while j + 1 < len(seeds) and seeds[j + 1] == seeds[j] + 1:
            j += 1
        out.append(f"{seeds[i]}" if i == j else f"{seeds[i]}–{seeds[j]}")
        i = j + 1
    return ", ".join(out)


# The kinds that get the optional sections of sweep_section.
STABILITY_KINDS = ("table4_s_sweep", "regime_stage2")  # the stability table (final loss, rise above the best)
THROUGHPUT_KINDS = ("table1", "table2", "regime_stage2", "regime_table2") + PREREG_KINDS  # the throughput table
S_SWEEP_KINDS = ("table4_s_sweep", "regime_stage2")  # Fig. 3


def throughput_table(sw, variants):
    """tok/s per variant: the median over runs (one run starved by other work on the machine does not move it), the
    fastest run (the closest to a quiet machine) and the number of runs."""
    lines = ["| variant | runs | tok/s (median over runs) | fastest run | vs first (median) |", "|---|---:|---:|---:|---:|"]
    base = None
    for v in variants:
        t = [r["tok_per_s"] for r in sw.done if r["variant"] == v and math.isfinite(r["tok_per_s"])]
        if not t:
            continue
        m = float(np.median(t))
        base = base or m
        lines.append(f"| {v} | {len(t)} | {m:,.0f} | {max(t):,.0f} | {100 * (m / base - 1):+.1f}% |")
    return "\n".join(lines)


def lr_grid_table(sw):
    """Table 8: final loss per (variant, lr_mult) on the sweep's seeds; the best lr per variant."""
    key = next((k for k in sw.manifest["grid"] if k.endswith("lr_mult")), None)
    if key is None:
        return "*No memory.lr_mult grid in this sweep.*"
    values = sw.manifest["grid"][key]
    lines = ["| variant | " + " | ".join(f"{v}×" for v in values) + " | best | report |",
             "|---|" + "---:|" * len(values) + "---:|---|"]
    for var in sw.variants:
        row, best = [], (math.inf, None)
        for v in values:
            fin = sw.final(var, {key: v})
            m = float(np.mean(list(fin.values()))) if fin else float("nan")
            row.append("·" if not fin else f"{m:.4f}")
            if fin and m < best[0]:
                best = (m, v)
        lines.append(f"| {var} | " + " | ".join(row) + f" | {best[1] + '×' if best[1] else '—'} | "
                     f"{REPORT_NUM['table8_lr_grid']['best_lr_mult']}× best for every table |")
    return "\n".join(lines)


def stability_table(sw, variants):
    """Per (variant, seed): final loss, its rise above the run's best held-out loss (a stall/regression shows)."""
    seeds = sorted({r["seed"] for r in sw.runs})
    lines = ["| variant | " + " | ".join(f"s{s} final (rise)" for s in seeds) + " |", "|---|" + "---:|" * len(seeds)]
    for v in variants:
        cells = []
        for s in seeds:
            r = next((r for r in sw.done if r["variant"] == v and r["seed"] == s), None)
            if r is None or not len(r["eval_loss"]):
                cells.append("·")
            else:
                cells.append(f"{r['final']:.4f} ({r['final'] - float(np.min(r['eval_loss'])):+.3f})")
        lines.append(f"| {v} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def seed_stability_table(sw):
    """The report's seed-1 pattern per seed and evaluation: mean held-out loss of the layouts the report saw stall
    (Engram-style, PageGram S >= 8) minus the mean of the stable ones (S = 1, 4), at each evaluation step where all
    of a seed's runs of both groups have one. A stall of the first group shows as a difference that grows."""
    unstable = [v for v in sw.variants if v == "engram" or (v.startswith("pagegram_s") and (slots_of(sw, v) or 0) >= 8)]
    stable = [v for v in sw.variants if v.startswith("pagegram_s") and slots_of(sw, v) in (1, 4)]
    if not unstable or not stable:
        return ""
    seeds = sorted({r["seed"] for r in sw.runs})
    steps = sorted({int(x) for r in sw.done if r["variant"] in unstable + stable for x in r["eval_step"]})
    lines = ["| seed | " + " | ".join(str(x) for x in steps) + " | final |", "|---|" + "---:|" * (len(steps) + 1)]
    for s in seeds:
        runs = {v: next((r for r in sw.done if r["variant"] == v and r["seed"] == s), None) for v in unstable + stable}
        if any(r is None for r in runs.values()):
            lines.append(f"| s{s} | " + " | ".join("·" for _ in steps) + " | · |")
            continue
        at = {v: dict(zip((int(x) for x in r["eval_step"]), r["eval_loss"])) for v, r in runs.items()}
        cells = []
        for x in steps:
            if all(x in at[v] for v in at):
                cells.append(f4(np.mean([at[v][x] for v in unstable]) - np.mean([at[v][x] for v in stable])))
            else:
                cells.append("·")
        fin = np.mean([runs[v]["final"] for v in unstable]) - np.mean([runs[v]["final"] for v in stable])
        lines.append(f"| s{s} | " + " | ".join(cells) + f" | {f4(fin)} |")
    return ("Per seed and evaluation step: mean held-out loss of " + ", ".join(unstable) + " minus the mean of " +
            ", ".join(stable) + " (> 0: the layouts the report saw stall are behind; a stall shows as a value that "
            "grows along its row, as the report's seed 1 from ≈13M of 60M tokens).\n\n" + "\n".join(lines))


# The report's training regime (its §4 and Appendix A, docs/model.md §2 and §4: 60M tokens, 131,072 tokens per
# step, 200M-param tables, K 8, r 64, 2 orders, d 384, BF16 autocast) in the quantities that set how a table row
# is trained (configs/regime.yaml).
REGIME_REPORT = {"optimizer steps": "60M / 131,072 = 457.8", "tokens per step": "131,072",
                 "table params per training token": "200M / 60M = 3.33", "rows per head": "195,300",
                 "lookups per row per step": "0.67", "lookups per row over the run": "≈307",
                 "W_V compression": "1,024 : 384 = 2.7 : 1", "precision": "BF16 autocast"}
# The report's Table 2 (120M tokens, the same tables): twice the steps, half the params per token, twice the lookups.
REGIME_REPORT_2X = dict(REGIME_REPORT, **{"optimizer steps": "120M / 131,072 = 915.5",
                                          "table params per training token": "200M / 120M = 1.67",
                                          "lookups per row over the run": "≈614"})


def regime(c):
    """[(quantity, how it is computed, value)] of a resolved config (quantities: REGIME_REPORT's keys). Rows per
    head as Engram-style tables hold them; a lookup = one token reading one row of one head."""
    m, mem, tr = c["model"], c["memory"], c["train"]
    steps, tps = total_steps(tr), int(tr["tokens_per_step"])
    orders, k, r = len(mem.get("orders") or [2, 3]), int(mem["heads"]), int(mem["head_dim"])
    rows = float(mem["target_params"]) / (orders * k * r)
    per_step = tps / rows
    return [("optimizer steps", "", f"{steps:,}"), ("tokens per step", "", f"{tps:,}"),
            ("table params per training token", "",
             f"{float(mem['target_params']) / (steps * tps):.2f}" if steps * tps else "—"),
            ("rows per head", "Engram-style: target_params / (orders × K × r)", f"{rows:,.0f}"),
            ("lookups per row per step", "tokens per step / rows per head", f"{per_step:.2f}"),
            ("lookups per row over the run", "", f"{per_step * steps:.0f}"),
            ("W_V compression", "orders·K·r : d_model", f"{orders * k * r:,} : {m['d_model']} = "
                                                       f"{orders * k * r / m['d_model']:.1f} : 1"),
            ("precision", "", str(tr.get("precision", "fp32 (CPU trainer)")))]


def regime_table(sw, ref=REGIME_REPORT):
    """The regime quantities of the sweep's runs (one column per distinct regime, named by its variants) beside
    the report's (ref: REGIME_REPORT, or REGIME_REPORT_2X for the report's Table 2). Runs without a table (layout
    none) are left out unless there is nothing else."""
    runs = [r for r in sw.runs if "config" in r]
    runs = [r for r in runs if r["config"]["memory"]["layout"] != "none"] or runs
    cols = {}
    for r in runs:
        cols.setdefault(tuple(v for _, _, v in regime(r["config"])), []).append(r["variant"])
    if not cols:
        return "*No run config yet: regime unknown.*"
    heads = [", ".join(dict.fromkeys(v)) if len(cols) > 1 else "this sweep" for v in cols.values()]
    lines = ["| quantity | " + " | ".join(heads) + " | report |", "|---|" + "---:|" * len(cols) + "---:|"]
    for i, (q, how, _) in enumerate(regime(runs[0]["config"])):
        lines.append(f"| {q}{f' ({how})' if how else ''} | " + " | ".join(c[i] for c in cols) +
                     f" | {ref[q]} |")
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------------------------
# Factor screening (experiments/regime_factors/sweep.yaml, issue 13 stage 1): each factor level changes one quantity
# of configs/regime.yaml and runs flat and Engram-style; the screened number is Engram-style − flat (the report's
# signature, Table 1: +0.074, Engram-style trails flat) and its change against the base pair's. One seed sees only
# changes beyond the seed-to-seed spread of Engram-style − flat: stage 1 at the regime preset (3 seeds,
# experiments/regime_stage1/README.md) found +0.0034 ± 0.0138.

STAGE1_DIFF = dict(mean=0.0034, sd=0.0138, seeds=3)  # Engram-style − flat at stage 1: mean ± sd over its seeds
# Engram-style − flat of the later, decisive runs (their READMEs): stage 1's rerun (session 15) and stage 2.
STAGE1_RERUN_DIFF = dict(mean=-0.0165, sd=0.0046, seeds=3)
STAGE2_DIFF = dict(mean=-0.0166, sd=0.0253, seeds=8)
SCREEN_THRESHOLD = 0.03  # nats, ≈ 2 sd of STAGE1_DIFF: a level whose change against the base exceeds it: seeds 1-2
FACTOR_LEVELS = {"": ("base", "base"), "bf16": ("precision", "bf16"), "r21": ("W_V compression", "r 21"),
                 "batch2x": ("batch / steps", "batch 2x"), "batch_half": ("batch / steps", "batch ½"),
                 "table_half": ("table size", "table ½"), "table2x": ("table size", "table 2x")}  # by suffix
# The regime quantities (regime()'s) as the screening table names them; "rows per head" and the W_V ratio included.
SCREEN_QUANTITIES = {"tokens per step": "tokens/step", "optimizer steps": "steps",
                     "table params per training token": "params/token", "rows per head": "rows/head",
                     "lookups per row per step": "lookups/row/step", "lookups per row over the run": "lookups/row/run",
                     "W_V compression": "W_V", "precision": "precision"}


def factor_pairs(variants):
    """The screening's levels from the variant names, base first, then in the sweep's order: dicts with suffix,
    flat, engram (None if the level has none) and vs_base (the level has no flat of its own). `engram_<x>` pairs
    with `flat_<x>` when the sweep has it, else with the base `flat` (a factor only Engram-style has, as W_V
    compression: flat has no W_V); `engram` pairs with `flat`."""
    suffixes = []
    for v in variants:
        fam, _, suffix = v.partition("_")
        if fam in ("flat", "engram") and suffix not in suffixes:
            suffixes.append(suffix)
    suffixes.sort(key=lambda x: x != "")  # stable: the base level first
    out = []
    for x in suffixes:
        eng, fl = (f"engram_{x}", f"flat_{x}") if x else ("engram", "flat")
        own = fl in variants
        out.append(dict(suffix=x, flat=fl if own else ("flat" if "flat" in variants else None),
                        engram=eng if eng in variants else None, vs_base=not own))
    return out


def _overrides(entry):
    """[(dotted key, value)] of an expanded run: a dict (sweep file with records) or "key=value" strings (manifest)."""
    ov = (entry or {}).get("overrides") or {}
    return list(ov.items()) if isinstance(ov, dict) else [tuple(x.split("=", 1)) for x in ov if "=" in x]


def planned_config(sw, variant):
    """A variant's resolved config: its run's when one has a config, else the sweep's expansion
    (records/expansion.json), else the base pair's (a `flat` or `engram` run, else any run of the sweep) with the variant's overrides from the
    manifest applied; seed, out_dir and threads are the base pair's. None while no run has a config."""
    r = next((r for r in sw.runs if r["variant"] == variant and "config" in r), None)
    if r is not None:
        return r["config"]
    tmpl = next((r["config"] for v in ("flat", "engram") for r in sw.runs if r["variant"] == v and "config" in r),
                None) or sw.config()
    if tmpl is None:
        return None
    entry = next((e for e in sw.manifest.get("runs", []) if e.get("variant") == variant), None)
    if entry is not None and "planned" in entry:  # the sweep's expansion: the binary resolved it
        c = yaml.safe_load(entry["planned"])
        for k in ("seed", "out_dir", "threads"):  # left alone, as below
            if k in tmpl.get("train", {}):
                c["train"][k] = tmpl["train"][k]
        # the expansion leaves train.precision out at its default (fp32, sweep/spec.cpp portable_yaml); records name
        # it when the build that wrote them did
        if "precision" not in c["train"] and "precision" in tmpl.get("train", {}):
            c["train"]["precision"] = "fp32"
        return c
    c = copy.deepcopy(tmpl)
    for k, v in _overrides(entry):
        if k in ("train.seed", "train.out_dir"):
            continue
        *path, last = k.split(".")
        node = c
        for p in path:
            node = node.setdefault(p, {})
        node[last] = yaml.safe_load(v) if isinstance(v, str) else v
    return c


def _screen_values(c):
    """{quantity: value} of SCREEN_QUANTITIES in a config (W_V as its ratio only); {} for None."""
    if c is None:
        return {}
    vals = {q: v for q, _, v in regime(c) if q in SCREEN_QUANTITIES}
    if "W_V compression" in vals:
        vals["W_V compression"] = vals["W_V compression"].split(" = ")[-1]
    return vals


def regime_moves(base, level):
    """The regime quantities a level moves, as text: 'name base → level' for each that differs; base None: the
    base's own values."""
    if base is None:
        return ", ".join(f"{SCREEN_QUANTITIES[q]} {v}" for q, v in level.items()) or "?"
    moved = [f"{SCREEN_QUANTITIES[q]} {base[q]} → {v}" for q, v in level.items() if q in base and base[q] != v]
    return "; ".join(moved) if moved else ("?" if not level or not base else "none")


def factor_level(sw, p):
    """(factor, level) of a screening level: FACTOR_LEVELS by its suffix, else the keys its overrides set (besides
    the layout, seed and logging intervals) and the suffix."""
    if p["suffix"] in FACTOR_LEVELS:
        return FACTOR_LEVELS[p["suffix"]]
    entry = next((e for e in sw.manifest.get("runs", []) if e.get("variant") in (p["engram"], p["flat"])), None)
    keys = [k for k, _ in _overrides(entry) if k not in ("memory.layout", "train.seed", "train.eval_interval",
                                                          "train.checkpoint_interval", "train.tokens")]
    return ", ".join(keys) or "?", p["suffix"]


def pair_diffs(sw, a, b):
    """{seed: final(a) − final(b)} over the seeds where both finished; {} when either variant is missing."""
    if a is None or b is None:
        return {}
    fa, fb = sw.final(a), sw.final(b)
    return {s: fa[s] - fb[s] for s in sorted(set(fa) & set(fb))}


def screening_rows(sw):
    """One dict per factor level (factor_pairs): its names, the regime it moves, the mean final losses of flat and
    Engram-style and their difference over the seeds where both finished (n), the change against the base pair's
    difference (paired over the seeds both pairs finished; n_change), the report's way (difference > 0) and
    worth (|change| > SCREEN_THRESHOLD). Numbers are nan when pending."""
    levels = factor_pairs(sw.variants)
    cfg = {p["suffix"]: planned_config(sw, p["engram"] or p["flat"]) if (p["engram"] or p["flat"]) else None
           for p in levels}
    base_vals = _screen_values(cfg.get(""))
    base_d = pair_diffs(sw, "engram", "flat") if "" in cfg else {}
    nan = float("nan")
    mean = lambda f, ss: float(np.mean([f[s] for s in ss])) if ss else nan  # noqa: E731
    rows = []
    for p in levels:
        x = p["suffix"]
        factor, level = factor_level(sw, p)
        d = pair_diffs(sw, p["engram"], p["flat"])
        seeds = sorted(d)
        fl, en = (sw.final(p[k]) if p[k] else {} for k in ("flat", "engram"))
        common = [s for s in seeds if s in base_d] if x else []
        change = float(np.mean([d[s] - base_d[s] for s in common])) if common else nan
        diff = float(np.mean(list(d.values()))) if d else nan
        rows.append(dict(factor=factor, level=level, flat=p["flat"], engram=p["engram"],
                         vs_base=p["vs_base"] and x != "",
                         moves=regime_moves(None if not x else base_vals, _screen_values(cfg[x])),
                         flat_loss=mean(fl, seeds or sorted(fl)), engram_loss=mean(en, seeds or sorted(en)),
                         diff=diff, n=len(d), seeds=seeds, change=change, n_change=len(common),
                         report_way=diff > 0 if math.isfinite(diff) else None,
                         worth=abs(change) > SCREEN_THRESHOLD if math.isfinite(change) else None))
    return rows


def screening_table(sw):
    """The factor screening table (screening_rows) and its rule, as Markdown."""
    rep = rtext(T1, ("engram", "flat"))
    lines = ["| factor | level | pair | regime moved (base → level) | flat | Engram-style | Engram-style − flat | n | "
             "change vs base | report's way (> 0)? | worth seeds 1–2? |",
             "|---|---|---|---|---:|---:|---:|---:|---:|---|---|"]
    for r in screening_rows(sw):
        pair = (f"{r['engram'] or '—'} − {r['flat'] or '—'}" + (" (vs base flat)" if r["vs_base"] else ""))
        loss = lambda x: "·" if not math.isfinite(x) else f"{x:.4f}"  # noqa: E731
        diff = "pending" if not r["n"] else f4(r["diff"])
        if r["level"] == "base":
            change, worth = "(reference)", "—"
        elif not r["n_change"]:
            change, worth = "pending", "—"
        else:
            note = f" (n {r['n_change']})" if r["n_change"] != r["n"] else ""
            change, worth = f4(r["change"]) + note, "**yes**" if r["worth"] else "no"
        way = "—" if r["report_way"] is None else "yes (trails)" if r["report_way"] else "no (ahead)"
        lines.append(f"| {r['factor']} | {r['level']} | {pair} | {r['moves']} | {loss(r['flat_loss'])} | "
                     f"{loss(r['engram_loss'])} | {diff} | {r['n']} | {change} | {way} | {worth} |")
    sd = STAGE1_DIFF["sd"]
    rule = (f"Screening rule (sweep header): one seed shows only factor effects larger than the seed-to-seed spread "
            f"of Engram-style − flat, sd ≈{sd:.3f} nats over {STAGE1_DIFF['seeds']} seeds at stage 1 "
            f"({STAGE1_DIFF['mean']:+.3f} ± {sd:.3f}, experiments/regime_stage1/README.md); a level whose change "
            f"against the base pair exceeds {SCREEN_THRESHOLD:.2f} nats either way (≈{SCREEN_THRESHOLD / sd:.0f} sd) "
            f"is worth seeds 1–2 (report.py SCREEN_THRESHOLD). The change is itself a difference of two single-seed "
            f"differences (its own spread ≈{sd * math.sqrt(2):.3f} nats): the rule screens, it does not test.")
    later = (f"**Read with care (added after the screening ran):** the {STAGE1_DIFF['mean']:+.3f} ± {sd:.3f} above is "
             f"stage 1's first runs, superseded: stage 1's rerun gives Engram-style − flat "
             f"{STAGE1_RERUN_DIFF['mean']:+.4f} ± {STAGE1_RERUN_DIFF['sd']:.4f} ({STAGE1_RERUN_DIFF['seeds']} seeds) "
             f"and stage 2 {STAGE2_DIFF['mean']:+.4f} ± {STAGE2_DIFF['sd']:.4f} ({STAGE2_DIFF['seeds']} seeds, "
             f"experiments/regime_stage2/README.md). With stage 2's sd a change between two single-seed differences "
             f"has an sd of ≈{STAGE2_DIFF['sd'] * math.sqrt(2):.3f} nats, so the {SCREEN_THRESHOLD:.2f} threshold "
             f"lies below one sd of the screen's own noise: a level that passed or failed it is no evidence either "
             f"way, and no factor was dropped or kept on it alone (stage 2 then ran the full table at 8 seeds).")
    how = (f"Engram-style − flat > 0 points the report's way (Table 1, {REPORT_NUM[T1]['budget']}: {rep}, "
           "Engram-style trails flat). Over several seeds: the mean difference over the seeds where both runs "
           "finished (n), its change paired over the seeds the base pair finished too (their number in brackets "
           "when fewer). 'vs base flat': a factor flat does not have (W_V) is compared with the base flat run. "
           "Regime of a level whose runs are pending: the base run's config with the level's overrides from the "
           "sweep file.")
    return "\n".join(lines) + "\n\n" + rule + "\n\n" + later + "\n\n" + how


def provenance(sw):
    """Where the runs were read from, their revisions (mixed revisions flagged) and kernels, and the records not
    used (stale, not in the expansion)."""
    src = {}
    for r in sw.done:
        src[r.get("source", "run dir")] = src.get(r.get("source", "run dir"), 0) + 1
    revs = sorted({r.get("revision", "?") for r in sw.done})
    kern = sorted({r.get("kernels", "?") for r in sw.done})
    out = ["*Read from:* " + (", ".join(f"{n} {k}{'s' if n > 1 else ''}" for k, n in sorted(src.items())) or
                              "no finished run") + "."]
    if len(revs) > 1:
        out.append(f"**Mixed revisions ({len(revs)}):** " + ", ".join(
            f"{v} ({sum(1 for r in sw.done if r.get('revision', '?') == v)} runs)" for v in revs) + ".")
    if kern != ["?"] and kern:
        out.append("*Kernels:* " + ", ".join(kern) + (" (the kernel tables give the same bits on every ISA, by "
                                                      "test: runs are comparable)" if len(kern) > 1 else "") + ".")
    text = " ".join(out)
    if sw.notes:
        text += "\n\n**Records:**\n\n" + "\n".join(f"- {n}" for n in sw.notes)
    return text


# Stall detector. A run stalls from evaluation step s when, over the next `window` evaluations, its best held-out
# loss so far improves by at most `delta` while the median of the same improvement over the other finished runs of
# the sweep exceeds `delta`. Best-so-far (running minimum) rather than the raw loss: a noisy curve that keeps
# reaching new lows is not a stall, and a spike up is not a regression of the measure. Comparing with the other
# runs over the same steps separates a run that stops learning from the end of training (or a learning-rate decay)
# that slows every run.
STALL_WINDOW, STALL_DELTA = 3, 0.01


def stall_from(steps, loss, others, window=STALL_WINDOW, delta=STALL_DELTA):
    """The first stall of a run (dict: step, i, loss, gain, others_gain) or None. steps/loss: the run's held-out
    curve; others: [(steps, loss)] of the other runs (aligned by step: an evaluation counts where they have it)."""
    best = np.fmin.accumulate(np.asarray(loss, float)) if len(loss) else np.array([])
    obest = [dict(zip((int(x) for x in st), np.fmin.accumulate(np.asarray(lo, float)))) for st, lo in others
             if len(lo)]
    for i in range(len(steps) - window):
        s0, s1 = int(steps[i]), int(steps[i + window])
        gains = [o[s0] - o[s1] for o in obest if s0 in o and s1 in o]
        gain = best[i] - best[i + window]
        if gains and not gain > delta and float(np.median(gains)) > delta:
            return dict(step=s0, i=i, loss=float(loss[i]), gain=float(gain), others_gain=float(np.median(gains)))
    return None


def stalls(sw, window=STALL_WINDOW, delta=STALL_DELTA):
    """[(run, stall)] of the finished runs that stall."""
    out = []
    for r in sw.done:
        others = [(o["eval_step"], o["eval_loss"]) for o in sw.done if o is not r]
        st = stall_from(r["eval_step"], r["eval_loss"], others, window, delta)
        if st:
            out.append((r, st))
    return out


def stall_table(sw, window=STALL_WINDOW, delta=STALL_DELTA):
    found = stalls(sw, window, delta)
    head = (f"A run stalls from step s when, over the next {window} evaluations, its best held-out loss so far "
            f"improves by at most {delta} nats while the median improvement of the other finished runs of the sweep "
            f"over the same evaluations exceeds {delta} (RECORDS.md).")
    if not found:
        return head + f" No run of the {len(sw.done)} finished stalls."
    lines = [head, "", f"| run | stalls from step (tokens) | loss then | own gain over {window} evals | others' "
                       "median gain | final | others' median final |", "|---|---:|---:|---:|---:|---:|---:|"]
    for r, st in found:
        tok = int(r["eval_tokens"][st["i"]]) if len(r["eval_tokens"]) > st["i"] else 0
        med = float(np.median([o["final"] for o in sw.done if o is not r]))
        lines.append(f"| {r['name']} | {st['step']} ({fmt_count(tok)}) | {st['loss']:.4f} | {st['gain']:+.4f} | "
                     f"{st['others_gain']:+.4f} | {r['final']:.4f} | {med:.4f} |")
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------------------------
# Figures.


def _curves(sw, variant):
    """{seed: (tokens, loss)} of a variant's finished runs."""
    return {r["seed"]: (np.asarray(r["eval_tokens"], float), np.asarray(r["eval_loss"], float))
            for r in sw.done if r["variant"] == variant and len(r["eval_loss"])}


def fig_loss_curves(sw, variants, path, title):
    """Fig. 1a: held-out loss vs tokens per variant, mean over seeds (band: min-max over seeds)."""
    fig, ax = plt.subplots(figsize=(7, 4.5))
    lo_y = []
    for v in variants:
        cur = _curves(sw, v)
        if not cur:
            continue
        n = min(len(t) for t, _ in cur.values())
        tok = list(cur.values())[0][0][:n]
        L = np.array([l[:n] for _, l in cur.values()])
        ax.plot(tok / 1e6, L.mean(0), label=f"{v} ({len(cur)} seeds)")
        if len(cur) > 1:
            ax.fill_between(tok / 1e6, L.min(0), L.max(0), alpha=0.2)
        lo_y.append(L[:, n // 3:].max())
    ax.set_xlabel("training tokens (M)")
    ax.set_ylabel("held-out loss (nats)")
    if lo_y:  # the early steps dwarf the differences: show the last two thirds
        ax.set_ylim(top=max(lo_y) + 0.05)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


SEED_STYLES = [("o", "-"), ("s", "--"), ("^", ":"), ("D", "-."), ("v", (0, (5, 1, 1, 1)))]  # per seed: no colour needed
REPORT_STYLE = dict(marker="D", ms=9, mfc="none", mec="crimson", mew=1.8, ls="none")  # hollow: the report's number


def fig_diff_to(sw, variants, baseline, path, title, report=None, report_label="report"):
    """Fig. 1b: per-seed differences of held-out loss to the baseline (flat) over training, one panel per variant,
    each on its own axes and y scale (none − flat, ≈ +0.7, would flatten the others), with a zero line; < 0: better
    than flat. The mean over seeds is the thick line and its final value a filled marker; report: {variant: the
    report's final (variant − baseline)}, drawn as a hollow marker at the end of the run (the report's own budget
    is in report_label). Returns the figure (None: no data)."""
    others = [v for v in variants if v != baseline and _curves(sw, v)]
    base = _curves(sw, baseline)
    if not others or not base:
        return None
    report = report or {}
    fig, axes = plt.subplots(1, len(others), figsize=(4.2 * len(others), 4.0), squeeze=False)
    for ax, v in zip(axes[0], others):
        cur = _curves(sw, v)
        seeds = sorted(set(cur) & set(base))
        n = min(min(len(cur[s][1]), len(base[s][1])) for s in seeds) if seeds else 0
        finals = []
        for i, s in enumerate(seeds):
            (t, l), (_, lb) = cur[s], base[s]
            m, ls = SEED_STYLES[i % len(SEED_STYLES)]
            ax.plot(t[:n] / 1e6, l[:n] - lb[:n], lw=1, ls=ls, marker=m, ms=3, alpha=0.8, label=f"seed {s}")
            finals.append(l[n - 1] - lb[n - 1])
        x_end = cur[seeds[0]][0][n - 1] / 1e6 if seeds else 0.0
        if len(seeds) > 1:
            mean = np.mean([cur[s][1][:n] - base[s][1][:n] for s in seeds], axis=0)
            ax.plot(cur[seeds[0]][0][:n] / 1e6, mean, color="k", lw=2.2, label=f"mean of {len(seeds)} seeds")
        if finals:
            ax.plot([x_end], [np.mean(finals)], marker="o", ms=8, color="k", ls="none",
                    label=f"ours, final{' mean' if len(finals) > 1 else ''}: {np.mean(finals):+.4f}")
        if v in report:
            ax.plot([x_end], [report[v]], label=f"{report_label}: {report[v]:+.3f}", **REPORT_STYLE)
        ax.axhline(0, color="k", lw=0.8)
        ax.set_title(f"{v} − {baseline} ({len(seeds)} seed{'s' if len(seeds) != 1 else ''})", fontsize=9)
        ax.set_xlabel("training tokens (M)")
        ax.set_ylabel(f"held-out loss − {baseline} (nats)")
        ax.grid(alpha=0.3)
        h, lab = ax.get_legend_handles_labels()
        keep = [i for i, x in enumerate(lab) if not x.startswith("seed ")]
        ax.legend([h[i] for i in keep], [lab[i] for i in keep], fontsize=7)
    h, lab = axes[0][0].get_legend_handles_labels()  # the seeds once, under the panels
    seeds_h = [(a, b) for a, b in zip(h, lab) if b.startswith("seed ")]
    if seeds_h:
        fig.legend([a for a, _ in seeds_h], [b for _, b in seeds_h], loc="lower center", ncol=len(seeds_h), fontsize=8)
    fig.suptitle(title + "\n< 0: better than " + baseline, fontsize=10)
    fig.tight_layout(rect=(0, 0.07 if seeds_h else 0, 1, 1))
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return fig


def report_pair_value(kind, a, b):
    """The report's A − B (either order stored in REPORT_NUM) as a float, or None (no signed number)."""
    for key, sign in (((a, b), 1.0), ((b, a), -1.0)):
        txt = REPORT_NUM.get(kind, {}).get(key)
        if txt is not None and not txt.startswith("±"):
            return sign * rnum(kind, key)
    return None


def panel_grid(n):
    """n panels in two columns (one when n = 1), each readable at page width, room above for a two-line title;
    unused panels hidden. Returns (figure, axes, rows)."""
    ncol = 2 if n > 1 else 1
    nrow = (n + ncol - 1) // ncol
    fig, axes = plt.subplots(nrow, ncol, figsize=(4.8 * ncol, 3.1 * nrow + 0.6), squeeze=False)
    for ax in axes.flat[n:]:
        ax.axis("off")
    return fig, axes, nrow


def finish_panels(fig, nrow, path):
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.6 / (3.1 * nrow + 0.6)))
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return fig


def fig_contrasts(sw, pairs, kind, path, title):
    """One panel per contrast A − B (two columns, readable at page width): each seed's final difference, the mean
    with its 95% t interval, the report's value as a hollow marker beside ours, and a zero line. Returns the figure
    (None: no contrast with two seeds)."""
    stats = [(a, b, pair_stats(sw, a, b)) for a, b, _ in pairs if sw.has(a) and sw.has(b)]
    stats = [(a, b, st) for a, b, st in stats if len(st["diffs"]) >= 2]
    if not stats:
        return None
    fig, axes, nrow = panel_grid(len(stats))
    for ax, (a, b, st) in zip(axes.flat, stats):
        d = np.asarray(st["diffs"])
        ax.scatter(np.zeros(len(d)) + np.linspace(-0.12, 0.12, len(d)), d, s=18, color="0.45", zorder=3,
                   label="one seed")
        lo, hi = st["ci"]
        ax.errorbar([0.45], [st["mean"]], yerr=[[st["mean"] - lo], [hi - st["mean"]]], fmt="o", color="k", ms=7,
                    capsize=5, lw=1.8, label="ours: mean, 95% CI")
        ref = report_pair_value(kind, a, b)
        if ref is not None:
            ax.plot([0.9], [ref], label="report", **REPORT_STYLE)
        ax.axhline(0, color="k", lw=0.8)
        ax.set_xlim(-0.4, 1.3)
        ax.set_xticks([0, 0.45] + ([0.9] if ref is not None else []))
        ax.set_xticklabels(["seeds", "ours"] + (["report"] if ref is not None else []), fontsize=8)
        ax.set_ylabel("Δ held-out loss (nats)", fontsize=8)
        ax.set_title(f"{a} − {b}\nours {st['mean']:+.3f} [{lo:+.3f}, {hi:+.3f}], n={len(d)}, p {fp(st['p_t'])}"
                     + (f"; report {ref:+.3f}" if ref is not None else ""), fontsize=8)
        ax.grid(axis="y", alpha=0.3)
    fig.suptitle(title + "\n< 0: A better; grey: one seed each; black: our mean with its 95% CI; hollow crimson: "
                 "the report", fontsize=9)
    return finish_panels(fig, nrow, path)


def slots_of(sw, variant):
    r = next((r for r in sw.runs if r["variant"] == variant and "config" in r), None)
    if r is None:
        m = re.search(r"_s(\d+)$", variant)
        return int(m.group(1)) if m else None
    mem = r["config"]["memory"]
    return int(mem["slots"]) if mem["layout"] == "pagegram" else None


def fig_s_sweep(sw, path, title):
    """Fig. 3, the S sweep, three panels. (a) final held-out loss per S (and Engram-style): each seed's run as a
    point, the mean ± sd over seeds as a black bar. (b) the paired view: per seed, final loss − the same seed's
    S=4 run, one line per seed, zero line, mean of the differences in black. (c) seed 1 (the report's unstable
    seed) over training: held-out loss − S=4. The report gives no number comparable with ours for this figure
    (its stalls sit near 5.28 nats on its own corpus), so none is drawn. Returns the figure (None: no S)."""
    ss = sorted((slots_of(sw, v), v) for v in sw.variants if slots_of(sw, v) is not None)
    if not ss:
        return None
    cats = [(f"S={S}", v) for S, v in ss] + ([("Engram-\nstyle", "engram")] if "engram" in sw.variants else [])
    seeds = sorted({r["seed"] for r in sw.done})
    fin = {v: sw.final(v) for _, v in cats}
    fig, (ax, axp, ax2) = plt.subplots(1, 3, figsize=(15, 5.4))
    x = np.arange(len(cats))
    jit = {s: 0.16 * (i - (len(seeds) - 1) / 2) / max(1, len(seeds) - 1) for i, s in enumerate(seeds)}  # ±0.08
    for i, s in enumerate(seeds):
        m, _ = SEED_STYLES[i % len(SEED_STYLES)]
        pts = [(k, fin[v][s]) for k, (_, v) in enumerate(cats) if s in fin[v]]
        if pts:
            ax.plot([k + jit[s] for k, _ in pts], [y for _, y in pts], marker=m, ls="none", ms=5, alpha=0.7,
                    label=f"seed {s}")
    means = [np.mean(list(fin[v].values())) if fin[v] else np.nan for _, v in cats]
    sds = [np.std(list(fin[v].values()), ddof=1) if len(fin[v]) > 1 else 0.0 for _, v in cats]
    ax.errorbar(x, means, yerr=sds, fmt="_", color="k", ms=16, mew=2, capsize=5, elinewidth=1.5,
                label="mean ± sd over seeds")
    flat = list(sw.final("flat").values()) if sw.has("flat") else []
    if flat:  # the flat table as a band across every S, as the report's Fig. 3 draws it
        fm, fs = float(np.mean(flat)), float(np.std(flat, ddof=1)) if len(flat) > 1 else 0.0
        ax.axhspan(fm - fs, fm + fs, color="tab:blue", alpha=0.15, lw=0, label=f"flat: mean ± sd ({len(flat)} seeds)")
        ax.axhline(fm, color="tab:blue", lw=1.2, ls="--")

    def label(a, ylabel, title):  # one S category per tick, as both panels show them; legend under the axes
        a.set_xticks(x)
        a.set_xticklabels([c for c, _ in cats])
        a.set_ylabel(ylabel)
        a.set_title(title, fontsize=9)
        a.grid(alpha=0.3)
        a.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=3, frameon=False)
    label(ax, "final held-out loss (nats)", "(a) final loss per S: seeds and mean ± sd")
    # (b) paired: the same seed's S=4 run subtracted.
    ref = next((v for S, v in ss if S == 4), None)
    if ref is not None:
        diffs = {}
        for i, s in enumerate(seeds):
            if s not in fin[ref]:
                continue
            m, ls = SEED_STYLES[i % len(SEED_STYLES)]
            pts = [(k, fin[v][s] - fin[ref][s]) for k, (_, v) in enumerate(cats) if s in fin[v]]
            for k, d in pts:
                diffs.setdefault(k, []).append(d)
            axp.plot([k for k, _ in pts], [d for _, d in pts], marker=m, ls=ls, lw=1, ms=5, alpha=0.8,
                     label=f"seed {s}")
        ks = sorted(diffs)
        axp.plot(ks, [np.mean(diffs[k]) for k in ks], marker="_", ms=16, mew=2.5, color="k", ls="none",
                 label="mean difference")
        axp.axhline(0, color="k", lw=0.8)
        label(axp, "final loss − same seed's S=4 (nats)", "(b) paired: difference to S=4 per seed (> 0: S=4 better)")
    else:
        axp.set_axis_off()
        axp.set_title("(b) no S=4 variant: no paired view", fontsize=9)
    # (c) curves on seed 1 (the report's unstable seed), difference to S=4.
    seed = 1 if 1 in seeds else (seeds[0] if seeds else None)
    if seed is not None and ref is not None and seed in _curves(sw, ref):
        tb, lb = _curves(sw, ref)[seed]
        j = 0
        for _, v in cats:
            cur = _curves(sw, v)
            if seed in cur and v != ref:
                t, l = cur[seed]
                n = min(len(l), len(lb))
                m, ls = SEED_STYLES[j % len(SEED_STYLES)]
                ax2.plot(t[:n] / 1e6, l[:n] - lb[:n], marker=m, ls=ls, ms=3, lw=1, label=v)
                j += 1
        ax2.axhline(0, color="k", lw=0.8)
        ax2.set_title(f"(c) seed {seed} over training: held-out loss − S=4", fontsize=9)
        ax2.set_xlabel("training tokens (M)")
        ax2.set_ylabel("held-out loss − same seed's S=4 (nats)")
        ax2.grid(alpha=0.3)
        ax2.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=3, frameon=False)
    else:
        ax2.set_axis_off()
    fig.suptitle(title + f" ({len(seeds)} seeds). Report: no comparable number (its S ≥ 8 and Engram-style runs "
                 "stall near 5.28 nats on seed 1, on its own corpus)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return fig


def fig_lr_grid(sw, path, title):
    """Table 8: final held-out loss (mean over seeds) per table lr multiple, one line per variant (distinct
    markers and line styles); the report's best multiple (70x for every table) as a dotted vertical line."""
    key = next((k for k in sw.manifest["grid"] if k.endswith("lr_mult")), None)
    if key is None:
        return None
    fig, ax = plt.subplots(figsize=(6.5, 4.2))
    for i, var in enumerate(sw.variants):
        xs, ys = [], []
        for v in sw.manifest["grid"][key]:
            fin = sw.final(var, {key: v})
            if fin:
                xs.append(float(v))
                ys.append(np.mean(list(fin.values())))
        if xs:
            m, ls = SEED_STYLES[i % len(SEED_STYLES)]
            ax.plot(xs, ys, marker=m, ls=ls, label=var)
    best = rnum("table8_lr_grid", "best_lr_mult")
    ax.axvline(best, color="crimson", ls=":", lw=1.5,
               label=f"report: {best:g}× best for every table ({REPORT_NUM['table8_lr_grid']['budget']})")
    ax.set_xscale("log")
    ticks = sorted({float(v) for v in sw.manifest["grid"][key]} | {best})
    ax.set_xticks(ticks)
    ax.set_xticklabels([f"{t:g}×" for t in ticks])
    ax.minorticks_off()
    ax.set_xlabel("table lr multiple (memory.lr_mult)")
    ax.set_ylabel("final held-out loss (nats)")
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return fig


# ------------------------------------------------------------------------------------------------------------
# Storage figures: HDF5 outputs of `pagegram flashsim --out` and `pagegram iobench --out` (eval/FORMATS.md).


def _columns(group):
    cols = {k: group[k][:] for k in group.keys() if isinstance(group[k], h5py.Dataset)}
    labels = _s(group.attrs.get("layouts", "")).split(",") if "layouts" in group.attrs else None
    n = len(next(iter(cols.values()))) if cols else 0
    if labels is None or len(labels) != n:
        labels = [_s(x) for x in cols["layout"]] if "layout" in cols else ["?"] * n
    return labels, cols, n


def storage_meta(f):
    return f"*Commit:* {_s(f.attrs.get('revision', '?'))}. *Command:* `{_s(f.attrs.get('command', '?'))}`. " \
           f"*Stream:* {_s(f.attrs.get('stream', '?'))}. *Machine:* report generated on {platform.node()} " \
           f"(the file does not record its host)."


def cache_label(cb):
    if cb == 0:
        return "no cache"
    for unit, name in ((2**30, "GiB"), (2**20, "MiB"), (2**10, "KiB")):
        if cb >= unit:
            return f"{cb / unit:g} {name}"
    return f"{cb:g} B"


LAYOUT_MARKERS = ["o", "^", "s", "D", "v", "P", "X", "*"]  # per layout label, in order of first appearance
SIZE_STYLES = ["-", "--", ":", "-."]  # per table size, smallest first


def layout_family(label):
    """flat / engram / pagegram of a storage file's layout label (e.g. `pagegram(S=4)`), as REPORT_NUM keys it."""
    return label.split("(")[0].strip()


def layout_styles(labels):
    """{label: (marker, colour)}: each layout label its own marker (so lines differ without colour) and colour."""
    uniq = list(dict.fromkeys(labels))
    return {lab: (LAYOUT_MARKERS[i % len(LAYOUT_MARKERS)], f"C{i % 10}") for i, lab in enumerate(uniq)}


def fig_flash_reads(rows, caches, path, title):
    """Fig. 1c / 4a: flash reads per token vs LRU cache size. rows: {(layout label, table params): [(cache bytes,
    reads per token)]}. Marker (and colour) per layout, line style per table size, so every series differs without
    colour; the report's numbers (REPORT_NUM["flashsim"]) as hollow crimson markers of the layout's shape. Returns
    the figure."""
    fig, ax = plt.subplots(figsize=(9, 4.8))
    pos = {cb: k for k, cb in enumerate(caches)}
    style = layout_styles([lab for lab, _ in sorted(rows)])
    sizes = sorted({size for _, size in rows})
    for (lab, size), pts in sorted(rows.items()):
        pts = sorted(pts)
        m, c = style[lab]
        ax.plot([pos[p[0]] for p in pts], [p[1] for p in pts], marker=m, color=c,
                ls=SIZE_STYLES[sizes.index(size) % len(SIZE_STYLES)], label=f"{lab}, {fmt_count(size)}")
    fam_marker = {layout_family(lab): m for lab, (m, _) in style.items()}
    ref = REPORT_NUM["flashsim"]
    for key in ref:
        if not isinstance(key, tuple):
            continue
        fam, size, cb = key
        if cb not in pos:
            continue  # our file has no such cache size: the number stays in the text only
        st = dict(REPORT_STYLE, marker=fam_marker.get(fam, "D"), ms=11)
        ax.plot([pos[cb]], [rnum("flashsim", key)], **st,
                label=f"report: {fam}, {'every size' if size is None else fmt_count(size)}, {cache_label(cb)}: "
                      f"{ref[key]}")
    ax.set_xticks(range(len(caches)))
    ax.set_xticklabels([cache_label(cb) for cb in caches])
    ax.set_yscale("log")
    ax.set_xlabel("LRU page cache")
    ax.set_ylabel("flash reads per token")
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5))
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return fig


def flashsim_section(path, out, prefix):
    """Fig. 1c / 4a: flash reads per token vs LRU cache size, one line per (layout, table size)."""
    with h5py.File(path, "r") as f:
        if "flashsim" not in f:
            return f"*{path}: no /flashsim group.*"
        labels, c, n = _columns(f["flashsim"])
        meta = storage_meta(f)
    rows = {}
    for i in range(n):
        rows.setdefault((labels[i], float(c["target_params"][i])), []).append(
            (float(c["cache_bytes"][i]), float(c["reads_per_token"][i])))
    caches = sorted({float(x) for x in c["cache_bytes"]})
    name = f"{prefix}fig4a-reads-per-token.png"
    fig_flash_reads(rows, caches, os.path.join(out, name),
                    "Fig. 1c / 4a: flash reads per token vs cache size\n(hollow crimson: the report, "
                    f"{REPORT_NUM['flashsim']['budget']})")
    lines = ["| layout | table params | " + " | ".join(cache_label(cb) for cb in caches) + " |",
             "|---|---:|" + "---:|" * len(caches)]
    for (lab, size), pts in sorted(rows.items()):
        d = dict(pts)
        lines.append(f"| {lab} | {fmt_count(size)} | " + " | ".join(f"{d[cb]:.3f}" if cb in d else "·" for cb in caches)
                     + " |")
    r = lambda k: REPORT_NUM["flashsim"][k]  # noqa: E731
    return ("### Flash reads per token (report Table 6, Fig. 1c / 4a)\n\n" + "\n".join(lines) +
            f"\n\nReport ({REPORT_NUM['flashsim']['budget']}): no cache {r(('pagegram', None, 0))} reads/token "
            f"(PageGram, flat) vs {r(('engram', None, 0))} (Engram-style); 20B with a 1 GiB cache: "
            f"{r(('pagegram', 20e9, 2 ** 30))} (PageGram) vs {r(('engram', 20e9, 2 ** 30))} (Engram-style). In the "
            "figure: hollow crimson markers of the layout's shape.\n\n" + meta + f"\n\n![Fig. 4a]({name})\n")


def iobench_setup(f, disk=None):
    """(table size, disk) of an iobench file as the figure names them: the file's `table_params` attribute and
    its `disk` (or `device`) attribute; `disk` (--iobench-disk) when the file records none; else 'unknown'."""
    tp = f.attrs.get("table_params")
    size = ("table size unknown" if tp is None else
            f"table of {_s(tp) if isinstance(tp, (str, bytes)) else fmt_count(float(tp))} params")
    rec = next((_s(f.attrs[k]) for k in ("disk", "device") if k in f.attrs), None)
    where = (f"disk {rec}" if rec else f"disk {disk} (stated with --iobench-disk; not recorded in the file)" if disk
             else "disk unknown (not recorded in the file)")
    return size, where


def fig_iobench(rows, path, title):
    """Fig. 4b: (left) lookups per second vs reads in flight, (right) read latency p50 vs reads in flight, one
    line per layout (own marker and line style); the report's numbers (REPORT_NUM["iobench"]) as hollow crimson
    markers. rows: {layout label: [(depth, lookups/s, read p50 µs)]}. Returns the figure."""
    fig, (ax, axl) = plt.subplots(1, 2, figsize=(11.5, 4.4))
    style = layout_styles(list(rows))
    for i, (lab, pts) in enumerate(rows.items()):
        pts = sorted(pts)
        m, c = style[lab]
        ls = SIZE_STYLES[i % len(SIZE_STYLES)]
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker=m, color=c, ls=ls, label=lab)
        if any(math.isfinite(p[2]) for p in pts):
            axl.plot([p[0] for p in pts], [p[2] for p in pts], marker=m, color=c, ls=ls, label=lab)
    fam_marker = {layout_family(lab): m for lab, (m, _) in style.items()}
    ref = REPORT_NUM["iobench"]
    for key in ref:
        if isinstance(key, tuple):
            fam, depth = key
            ax.plot([depth], [rnum("iobench", key)], **dict(REPORT_STYLE, marker=fam_marker.get(fam, "D"), ms=11),
                    label=f"report ({ref['budget']}): {fam}, depth {depth}: {ref[key]}")
    axl.plot([1], [rnum("iobench", "read_us_depth1")], **REPORT_STYLE,
             label=f"report ({ref['budget']}): {ref['read_us_depth1']} µs per read at depth 1")
    depths = sorted({p[0] for pts in rows.values() for p in pts} | {1, 64})
    for a, yl in ((ax, "lookups per second"), (axl, "read latency p50 (µs)")):
        a.set_xscale("log", base=2)
        a.set_xticks(depths)
        a.set_xticklabels([str(d) for d in depths])
        a.set_yscale("log")
        a.set_xlabel("reads in flight (O_DIRECT 4 KiB)")
        a.set_ylabel(yl)
        a.grid(alpha=0.3)
        a.legend(fontsize=7)
    ax.set_title("lookups/s (a lookup: every block of one token)", fontsize=9)
    axl.set_title("read latency, median", fontsize=9)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return fig


def iobench_section(path, out, prefix, disk=None):
    """Fig. 4b: lookups per second vs reads in flight, one line per layout; the table size and the disk named."""
    with h5py.File(path, "r") as f:
        if "iobench" not in f:
            return f"*{path}: no /iobench group.*"
        labels, c, n = _columns(f["iobench"])
        size, where = iobench_setup(f, disk)
        meta = storage_meta(f) + f" *Table and device:* {size}, {where}."
    rows = {}
    for i in range(n):
        rows.setdefault(labels[i], []).append((int(c["depth"][i]), float(c["lookups_per_second"][i]),
                                               float(c["read_p50_us"][i]) if "read_p50_us" in c else float("nan")))
    name = f"{prefix}fig4b-lookups-per-second.png"
    fig_iobench(rows, os.path.join(out, name), f"Fig. 4b: direct-I/O table lookups; {size}, {where}")
    depths = sorted({p[0] for pts in rows.values() for p in pts})
    lines = ["| layout | " + " | ".join(f"depth {d}" for d in depths) + " | read p50 at depth 1 |",
             "|---|" + "---:|" * len(depths) + "---:|"]
    for lab, pts in rows.items():
        d = {p[0]: p for p in pts}
        p50 = f"{d[1][2]:.0f} µs" if 1 in d and math.isfinite(d[1][2]) else "—"
        lines.append(f"| {lab} | " + " | ".join(f"{d[x][1]:,.0f}" if x in d else "·" for x in depths) + f" | {p50} |")
    r = REPORT_NUM["iobench"]
    return (f"### Lookups per second (report Fig. 4b; {size}, {where})\n\n" + "\n".join(lines) +
            f"\n\nReport ({r['budget']}): {r['read_us_depth1']} µs per read at depth 1; at 64 in flight Engram-style "
            f"{r[('engram', 64)]} lookups/s, PageGram ≈{r[('pagegram', 64)]}. In the figure: hollow crimson markers."
            "\n\n" + meta + f"\n\n![Fig. 4b]({name})\n")


# ------------------------------------------------------------------------------------------------------------
# One sweep's section.


def sweep_section(sw, out, kind, stall=(STALL_WINDOW, STALL_DELTA)):
    ref = REPORT.get(kind, {})
    p = f"{sw.name}-"
    desc = sw.manifest.get("description", "")
    cap = caption(sw)
    parts = [f"## {ref.get('title', 'Sweep ' + sw.name)}", "",
             f"Sweep `{sw.name}` ({sw.manifest['spec']}): {len(sw.runs)} runs, variants "
             f"{', '.join(sw.variants)}, seeds {sw.manifest['seeds']}" +
             (f", grid {sw.manifest['grid']}" if sw.manifest["grid"] else "") + "." + (f" {desc}" if desc else ""), "",
             provenance(sw), "", "### Regime", "",
             regime_table(sw, REGIME_REPORT_2X if kind in ("table2", "regime_table2") else REGIME_REPORT), ""]
    not_done = [f"{r['name']} ({r['status']})" for r in sw.runs if r["status"] != "finished"]
    if not_done:
        parts += [f"**Not finished ({len(not_done)}):** " + ", ".join(not_done) + ". Their seeds are left out of "
                  "the comparisons that need them.", ""]
    variants = sw.variants
    if kind == "table8_lr_grid":
        parts += ["### Final held-out loss per table lr multiple (mean over the sweep's seeds)", "", lr_grid_table(sw), "", cap, ""]
        if fig_lr_grid(sw, os.path.join(out, p + "lr-grid.png"), "Table LR grid: final held-out loss") is not None:
            parts += [f"![LR grid]({p}lr-grid.png)", ""]
        return "\n".join(parts)

    parts += ["### Final held-out loss (nats)", "",
              "Absolute losses are not comparable to the report's (our corpus, tokenizer and scale differ); the "
              "paired differences below are what the report's numbers are compared with.", "",
              variant_table(sw, variants), "", cap, ""]
    if kind == "regime_factors":  # one pair per factor level instead of every pair of variants
        parts += ["### Factor screening: Engram-style − flat per factor level (> 0: Engram-style trails flat)", "",
                  screening_table(sw), "", cap, ""]
    else:
        pairs = ref.get("pairs")
        if pairs is None:  # generic sweep: every pair of variants
            pairs = [(a, b, "—") for i, b in enumerate(variants) for a in variants[i + 1:]]
        table, _ = pair_rows(sw, pairs)
        parts += ["### Paired differences per seed (A − B; negative: A better)", "",
                  "Same seed = same backbone initialization and data order for every variant. Paired t-test "
                  "two-sided on the per-seed differences; sign test one-sided for 'A better' and two-sided (ties "
                  "dropped); 'A better' = seeds where A's final held-out loss is lower; 95% CI: the t interval "
                  "of the mean difference.", "",
                  table, "", omnibus_line(sw, variants), "", cap, ""]
    if kind in PREREG_KINDS:
        parts += [verdict_section(sw, kind, stall), ""]
    parts += ["### Stalls", "", stall_table(sw, *stall), ""]
    if kind in STABILITY_KINDS:
        seedview = seed_stability_table(sw)
        parts += ["### Stability per seed: the report's seed-1 pattern", "", seedview, "", cap, ""] if seedview else \
            ["### Stability: final loss and its rise above the run's best held-out loss", "",
             stability_table(sw, variants), "", cap, ""]
    if kind in THROUGHPUT_KINDS:
        parts += ["### Throughput", "", throughput_table(sw, variants), "", ref.get("extra", ""), "", cap, ""]

    figs = []
    if fig_loss_curves_ok(sw, variants):
        fig_loss_curves(sw, variants, os.path.join(out, p + "fig1a-loss.png"),
                        f"Fig. 1a ({sw.name}): held-out loss, mean over seeds (band: min–max)")
        figs.append(f"![Fig. 1a]({p}fig1a-loss.png)")
        figs.append("Fig. 1a: no report number is drawn: the report's losses are on its own corpus and tokenizer, "
                    "not comparable with ours (we compare differences).")
    rdiff = report_diffs(kind, "flat")
    rlabel = f"report ({REPORT_NUM[kind]['budget']})" if rdiff else "report"
    # regime_factors: no Fig. 1b (every variant − the base flat is not its pairs; the screening table has them)
    fig1b = "flat" in variants and kind != "regime_factors"
    if fig1b and fig_diff_to(sw, variants, "flat", os.path.join(out, p + "fig1b-diff-to-flat.png"),
                             f"Fig. 1b ({sw.name}): per-seed held-out loss − flat", rdiff, rlabel) is not None:
        figs.append(f"![Fig. 1b]({p}fig1b-diff-to-flat.png)")
        figs.append("Fig. 1b: " + (f"hollow markers = the report's final difference to flat "
                                   f"({REPORT_NUM[kind]['budget']}), drawn at "
                                   "the end of our run; our final mean is the filled marker."
                                   if rdiff else "the report gives no number for this sweep's differences to flat."))
    if kind != "regime_factors" and ref.get("pairs") and fig_contrasts(
            sw, ref["pairs"], kind, os.path.join(out, p + "fig-contrasts.png"),
            f"Paired differences ({sw.name})") is not None:
        figs.append(f"![Paired differences]({p}fig-contrasts.png)")
        figs.append("Paired differences: one panel per contrast of the table above; the report's value "
                    + (f"({REPORT_NUM[kind]['budget']}) " if kind in REPORT_NUM else "") + "beside ours where it "
                    "gives a signed number.")
    if kind in S_SWEEP_KINDS and fig_s_sweep(sw, os.path.join(out, p + "fig3-s-sweep.png"),
                                             f"Fig. 3 ({sw.name}): the S sweep") is not None:
        figs.append(f"![Fig. 3]({p}fig3-s-sweep.png)")
    if figs:
        parts += ["### Figures", ""] + [f + "\n" for f in figs]
    return "\n".join(parts)


# Table 2's question: does the memory gain shrink with 2x tokens, does Engram-style catch up? Contrasts measured at
# both budgets on the seeds both sweeps finished; report values (REPORT_NUM) at 60M -> 120M tokens.
BUDGET_CONTRASTS = [
    ("none", "pagegram_s4", "memory gain of PageGram S=4 (none − PageGram)",
     f"{rtext(T1, ('none', 'pagegram_s4'))} → {rtext(T2, ('none', 'pagegram_s4'))}"),
    ("none", "flat", "memory gain of flat (none − flat)", "—"),
    ("none", "engram", "memory gain of Engram-style (none − Engram-style)", "—"),
    ("engram", "flat", "Engram-style − flat (negative: Engram-style better)",
     f"{rtext(T1, ('engram', 'flat'))} → {rtext(T2, ('engram', 'flat'))}"),
    ("pagegram_s4", "engram", "PageGram S=4 − Engram-style",
     f"{rtext(T1, ('pagegram_s4', 'engram'))} → within {rtext(T2, ('pagegram_s4', 'engram'))}"),
    ("pagegram_s4", "flat", "PageGram S=4 − flat",
     f"{rtext(T1, ('pagegram_s4', 'flat'))} → {rtext(T2, ('pagegram_s4', 'flat'))}"),
]


# Config keys two budgets may differ in (besides the runs' own keys): the budget, the seed, what a variant sets.
BUDGET_FREE = ("train.tokens", "train.steps", "train.seed", "memory.layout", "memory.slots")


def config_values(sw):
    """{dotted config key: {normalized value: value as text}} over a sweep's runs with a config, without the keys
    BUDGET_FREE, RUN_OWNED and the log-only memory keys name."""
    skip = set(BUDGET_FREE) | set(RUN_OWNED) | {f"memory.{k}" for k in LOG_ONLY_KEYS}
    out = {}
    for r in sw.runs:
        for k, v in _flatten(r.get("config") or {}).items():
            if k not in skip:
                out.setdefault(k, {})[repr(_norm(v))] = str(v)
    return out


def budget_mismatch(short, long):
    """['key short → long'] of the config keys on which two budgets' runs disagree (keys both have; the values of
    every run, so a key a variant sets compares as the set of its values): a non-empty list says the two sweeps
    differ in more than their tokens; None when either has no config yet."""
    a, b = config_values(short), config_values(long)
    if not a or not b:
        return None
    return [f"{k} {'/'.join(sorted(a[k].values()))} → {'/'.join(sorted(b[k].values()))}"
            for k in sorted(set(a) & set(b)) if set(a[k]) != set(b[k])]


# The report's value of a BUDGET_CONTRASTS entry at 60M and 120M tokens (None where it gives no signed number).
def _report_at(kind, a, b):
    return report_pair_value(kind, a, b)


def fig_budget(short, long, path, title):
    """The Table 2 budget figure: one panel per contrast of BUDGET_CONTRASTS that both sweeps have, our mean with
    its 95% CI at both budgets (the seeds where all four runs finished, joined by a line) and the report's values at
    60M and 120M as hollow markers on a second x position pair. Returns the figure (None: no contrast)."""
    rows = []
    for a, b, label, _ in BUDGET_CONTRASTS:
        if not all(sw.has(v) for sw in (short, long) for v in (a, b)):
            continue
        sa, sb, la, lb = short.final(a), short.final(b), long.final(a), long.final(b)
        seeds = sorted(set(sa) & set(sb) & set(la) & set(lb))
        if len(seeds) < 2:
            continue
        d1 = np.array([sa[s] - sb[s] for s in seeds])
        d2 = np.array([la[s] - lb[s] for s in seeds])
        rows.append((a, b, label, seeds, d1, d2))
    if not rows:
        return None
    fig, axes, nrow = panel_grid(len(rows))
    for ax, (a, b, label, seeds, d1, d2) in zip(axes.flat, rows):
        for i in range(len(seeds)):
            ax.plot([0, 1], [d1[i], d2[i]], color="0.6", lw=0.8, marker="o", ms=3)
        for x, d in ((0, d1), (1, d2)):
            lo, hi = mean_ci(d)
            ax.errorbar([x + 0.08], [d.mean()], yerr=[[d.mean() - lo], [hi - d.mean()]], fmt="o", color="k", ms=7,
                        capsize=5, lw=1.8)
        ax.plot([0.08, 1.08], [d1.mean(), d2.mean()], color="k", lw=1.8)
        r1, r2 = _report_at(T1, a, b), _report_at(T2, a, b)
        pts = [(x, r) for x, r in ((2, r1), (3, r2)) if r is not None]
        if pts:
            ax.plot([x for x, _ in pts], [r for _, r in pts], color="crimson", lw=1, ls=":")
            for x, r in pts:
                ax.plot([x], [r], **REPORT_STYLE)
        ax.axhline(0, color="k", lw=0.8)
        ax.set_xticks([0, 1, 2, 3])
        ax.set_xticklabels([f"ours\n{fmt_count(short_tokens(short))}", f"ours\n{fmt_count(short_tokens(long))}",
                            "report\n60M", "report\n120M"], fontsize=8)
        ax.set_xlim(-0.4, 3.4)
        ax.set_ylabel("Δ held-out loss (nats)", fontsize=8)
        ax.set_title(f"{label}\nours {d1.mean():+.3f} → {d2.mean():+.3f} (n={len(seeds)})"
                     + (f"; report {r1:+.3f} → {r2:+.3f}" if r1 is not None and r2 is not None else ""), fontsize=8)
        ax.grid(axis="y", alpha=0.3)
    fig.suptitle(title + "\ngrey: one seed at both budgets; black: our mean with its 95% CI; hollow crimson: the "
                 "report", fontsize=9)
    return finish_panels(fig, nrow, path)


def short_tokens(sw):
    c = sw.config()
    return total_steps(c["train"]) * c["train"]["tokens_per_step"] if c else 0


def budget_section(short, long, out=None):
    """Contrasts at two token budgets (short: Table 1, long: Table 2), paired over the seeds both finished; says
    whether the two sweeps' configs differ in anything besides the budget (budget_mismatch)."""
    def tokens(sw):
        c = sw.config()
        return fmt_count(total_steps(c["train"]) * c["train"]["tokens_per_step"]) if c else "?"
    ts, tl = tokens(short), tokens(long)
    diff = budget_mismatch(short, long)
    if diff is None:
        same = "*Configs:* not compared (a sweep has no run with a config yet)."
    elif diff:
        same = (f"**Not the same setup besides the budget ({len(diff)} keys):** {'; '.join(diff)}. The changes below "
                "mix the budget with these.")
    else:
        same = ("*Configs:* the two sweeps' runs agree on every config key both record, besides the budget, seeds, "
                "layouts and S.")
    lines = [f"## Budget: {short.name} ({ts} tokens) vs {long.name} ({tl} tokens)", "",
             f"Each contrast A − B per seed at both budgets, on the seeds where all four runs finished; 'change' = "
             f"{tl} − {ts}, with its paired t-test (two-sided). The report's values are for 60M → 120M tokens.", "",
             same, "",
             f"| contrast | seeds | at {ts} | at {tl} | change | change t p | sign same at both | report |",
             "|---|---:|---:|---:|---:|---:|---:|---|"]
    for a, b, label, ref in BUDGET_CONTRASTS:
        if not all(sw.has(v) for sw in (short, long) for v in (a, b)):
            continue
        sa, sb, la, lb = short.final(a), short.final(b), long.final(a), long.final(b)
        seeds = sorted(set(sa) & set(sb) & set(la) & set(lb))
        if not seeds:
            lines.append(f"| {label} | 0 | — | — | — | — | — | {ref} |")
            continue
        d1 = np.array([sa[s] - sb[s] for s in seeds])
        d2 = np.array([la[s] - lb[s] for s in seeds])
        _, p = paired_t(d2 - d1)
        same = int(np.sum(np.sign(d1) == np.sign(d2)))
        lines.append(f"| {label} | {len(seeds)} | {f4(d1.mean())} | {f4(d2.mean())} | {f4((d2 - d1).mean())} | "
                     f"{fp(p)} | {same}/{len(seeds)} | {ref} |")
    lines += ["", caption(long), ""]
    name = f"{long.name}-fig-budget.png"
    if out and fig_budget(short, long, os.path.join(out, name), f"Budget: {short.name} vs {long.name}") is not None:
        lines += [f"![Budget]({name})", "", "Budget figure: each contrast at both budgets, ours (seeds, mean and 95% "
                  "CI) beside the report's 60M → 120M where it gives a signed number.", ""]
    return "\n".join(lines)


def fig_loss_curves_ok(sw, variants):
    return any(_curves(sw, v) for v in variants)


PREREG_MARKER = "<!-- report.py: everything above this line is the pre-registration and is kept as it is; results below. -->"


def preregistration(path):
    """The pre-registered head of an existing README (up to and including the marker line, then a blank line), or ""
    when it has no marker. The head is committed before a sweep's first run and never rewritten: the report is
    written below it."""
    if not os.path.exists(path):
        return ""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    at = text.find(PREREG_MARKER)
    if at < 0:
        return ""
    return text[:at + len(PREREG_MARKER)] + "\n\n"


def write_atomic(path, text):
    """Writes text to path through a temporary file in the same folder, renamed over it (never half a README)."""
    tmp = f"{path}.tmp.{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


# ------------------------------------------------------------------------------------------------------------
# The claims index (experiments/README.md): every claim of the report with our value, from the records.

# (claim, sweep folder, A, B, report kind for the value, note). A − B in nats of final held-out loss.
CLAIMS = [
    ("Table 1: PageGram S=4 beats flat", "regime_stage2", "pagegram_s4", "flat", T1),
    ("Table 1: PageGram S=4 beats Engram-style", "regime_stage2", "pagegram_s4", "engram", T1),
    ("Table 1: Engram-style trails flat", "regime_stage2", "engram", "flat", T1),
    ("Table 1: memory gain (PageGram S=4 − none)", "regime_stage2", "pagegram_s4", "none", T1),
    ("Table 4: S=4 beats S=8", "regime_stage2", "pagegram_s4", "pagegram_s8", None),
    ("Table 4: S=4 beats S=15", "regime_stage2", "pagegram_s4", "pagegram_s15", None),
    ("Table 4: S=4 vs S=1 (both stable)", "regime_stage2", "pagegram_s4", "pagegram_s1", None),
    ("Table 1 at d 384 (issue 38 A): PageGram S=4 − Engram-style", "regime_d384", "pagegram_s4", "engram", T1),
    ("Table 1 at d 384 (issue 38 A): Engram-style − flat", "regime_d384", "engram", "flat", T1),
    ("Table 1 at d 384 (issue 38 A): PageGram S=4 − flat", "regime_d384", "pagegram_s4", "flat", T1),
    ("Table 1, the report's model (issue 38 B): PageGram S=4 − Engram-style", "regime_report_model", "pagegram_s4",
     "engram", T1),
    ("Table 1, the report's model (issue 38 B): Engram-style − flat", "regime_report_model", "engram", "flat", T1),
    ("Table 2 (2x tokens): PageGram S=4 − flat", "regime_table2", "pagegram_s4", "flat", T2),
    ("Table 2 (2x tokens): Engram-style − flat", "regime_table2", "engram", "flat", T2),
    ("Table 2 (2x tokens): memory gain (PageGram S=4 − none)", "regime_table2", "pagegram_s4", "none", T2),
    ("Table 2 (2x tokens): PageGram S=4 − Engram-style (report: within ±0.010)", "regime_table2", "pagegram_s4",
     "engram", T2),
]
INDEX_MARKER = "<!-- report.py --index: everything above this line is kept; the claims table below is written from the records. -->"


def claim_verdict(st, ref):
    """Our paired statistics against the report's value: 'reproduced' (same sign, p < 0.05, the report's value
    inside our 95% CI), 'same sign, smaller' / 'same sign, larger' (p < 0.05, report outside the CI), 'not
    reproduced' (the report's value outside our CI and our mean of the other sign or not significant),
    'inconclusive' (report inside the CI, not significant); 'no report number' / 'pending'."""
    if len(st["diffs"]) < 2 or not math.isfinite(st["p_t"]):
        return "pending"
    if ref is None:
        return "no report number"
    lo, hi = st["ci"]
    inside, sig, same = lo <= ref <= hi, st["p_t"] < 0.05, np.sign(st["mean"]) == np.sign(ref)
    if sig and same:
        return "reproduced" if inside else ("same sign, smaller" if abs(st["mean"]) < abs(ref) else "same sign, larger")
    return "inconclusive" if inside else "not reproduced"


def claims_table(root):
    """The claims index as Markdown, from experiments/<sweep>/records (root: the experiments folder)."""
    lines = ["| claim | report | ours (mean, 95% CI) | seeds | p (t) | verdict | where |",
             "|---|---:|---:|---:|---:|---|---|"]
    cache = {}
    for claim, folder, a, b, kind in CLAIMS:
        spec = os.path.join(root, folder, "sweep.yaml")
        if folder not in cache:
            cache[folder] = Sweep(spec) if os.path.exists(spec) and records_of(spec) else None
        sw = cache[folder]
        ref = report_pair_value(kind, a, b) if kind else None
        within = kind == T2 and (a, b) == ("pagegram_s4", "engram")
        rtxt = "±0.010" if within else ("—" if ref is None else f"{ref:+.3f}")
        link = f"[{folder}]({folder}/README.md)"
        if sw is None or not (sw.has(a) and sw.has(b)):
            lines.append(f"| {claim} | {rtxt} | — | 0 | — | pending (no records yet) | {link} |")
            continue
        st = pair_stats(sw, a, b)
        if within:
            lo, hi = st["ci"]
            v = ("pending" if len(st["diffs"]) < 2 else "reproduced (CI inside ±0.010)" if -0.01 <= lo and hi <= 0.01
                 else "consistent (CI contains 0)" if lo <= 0 <= hi else "not reproduced")
        else:
            v = claim_verdict(st, ref)
        ours = "—" if not st["diffs"] else f"{f4(st['mean'])} ({fci(st['ci'])})"
        lines.append(f"| {claim} | {rtxt} | {ours} | {len(st['diffs'])} | {fp(st['p_t'])} | {v} | {link} |")
    for folder in ("regime_stage2", "regime_d384", "regime_report_model"):
        sw = cache.get(folder)
        link = f"[{folder}]({folder}/README.md)"
        claim = f"Fig. 3: S ≥ 8 and Engram-style stall on seed 1 ({folder})"
        if sw is None or not sw.done:
            lines.append(f"| {claim} | stall | — | 0 | — | pending (no records yet) | {link} |")
            continue
        found = stalls(sw)
        seeds = sorted({r["seed"] for r in sw.done})
        who = ", ".join(r["name"] for r, _ in found)
        lines.append(f"| {claim} | stall | {len(found)} of {len(sw.done)} runs stall{f' ({who})' if who else ''} | "
                     f"{len(seeds)} | — | {'reproduced' if found else 'not reproduced (no stall)'} | {link} |")
    return "\n".join(lines)


def write_index(path):
    """experiments/README.md: its hand-written head (above INDEX_MARKER) kept, the claims table rewritten."""
    head = ""
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            text = f.read()
        at = text.find(INDEX_MARKER)
        if at >= 0:
            head = text[:at]
    if not head:
        head = "# Experiments\n\n"
    body = (INDEX_MARKER + "\n\n## Claims of the report, ours beside them\n\n"
            f"Written by `python3 experiments/report.py --index experiments/README.md` (commit {git_head()}) from the "
            "committed records alone. A − B in nats of final held-out loss (negative: A better), paired by seed. "
            "Verdict: *reproduced* = our mean has the report's sign, p < 0.05 and the report's value lies inside our "
            "95% CI; *same sign, smaller/larger* = significant, same sign, the report's value outside our CI; *not "
            "reproduced* = the report's value lies outside our CI and our mean has the other sign or is not "
            "significant; *inconclusive* = the report's value inside our CI, not significant. Each folder's README "
            "has the per-seed tables, Holm-corrected p-values and figures.\n\n" + claims_table(os.path.dirname(path)) +
            "\n")
    write_atomic(path, head + body)


def kind_of(name, forced):
    """The sweep kind (a REPORT key or "generic") of a sweep name: forced if given, else the longest REPORT key the
    name starts with and not followed by a digit (so REPORT's order does not matter: regime_stage2 is not
    regime_stage1, table10 is not table1, and regime_table2 is not table2, which it does not start with)."""
    if forced:
        return forced
    hits = [k for k in REPORT if name.startswith(k) and not name[len(k):len(k) + 1].isdigit()]
    return max(hits, key=len) if hits else "generic"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("sweeps", nargs="*", help="sweep.yaml files or sweep.json manifests")
    ap.add_argument("--out", help="output directory (README.md + PNGs)")
    ap.add_argument("--kind", choices=list(REPORT) + ["generic"], help="which report numbers to compare with (default: by sweep name)")
    ap.add_argument("--compare-budget", metavar="SWEEP",
                    help="the same variants at another token budget (Table 1's sweep for Table 2; regime_stage2's "
                         "for regime_table2): adds a table of the memory gain and the layout differences at both "
                         "budgets, and says whether the two sweeps' configs differ besides the budget")
    ap.add_argument("--flashsim", action="append", default=[], help="`pagegram flashsim --out` HDF5 (Fig. 1c / 4a)")
    ap.add_argument("--iobench", action="append", default=[], help="`pagegram iobench --out` HDF5 (Fig. 4b)")
    ap.add_argument("--iobench-disk", metavar="TEXT",
                    help="the device the --iobench files were measured on, named in Fig. 4b when a file does not "
                         "record it (without it: 'disk unknown')")
    ap.add_argument("--stall-window", type=int, default=STALL_WINDOW, help="stall detector: evaluations (RECORDS.md)")
    ap.add_argument("--stall-delta", type=float, default=STALL_DELTA, help="stall detector: nats (RECORDS.md)")
    ap.add_argument("--selftest", action="store_true", help="check the statistics against reference values")
    ap.add_argument("--index", metavar="README", help="write the claims index (experiments/README.md) from the records")
    a = ap.parse_args()
    if a.selftest:
        selftest()
        return
    if a.index:
        write_index(a.index)
        print(f"wrote {a.index}")
        return
    if not a.out or not (a.sweeps or a.flashsim or a.iobench):
        ap.error("give --out and at least one sweep, --flashsim or --iobench file")
    os.makedirs(a.out, exist_ok=True)
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    cmd = "python3 " + " ".join([os.path.relpath(sys.argv[0])] + sys.argv[1:])
    sweeps = [Sweep(s) for s in a.sweeps]
    doc = [f"# Report: {', '.join(sw.name for sw in sweeps) or 'storage'}", "",
           f"Written by `{cmd}` at {now} (commit {git_head()}, on {platform.node()}). Numbers in nats of held-out "
           "loss unless stated; the report's numbers (REPORT_NUM in experiments/report.py) are in the `report` column.", ""]
    for sw in sweeps:
        doc.append(sweep_section(sw, a.out, kind_of(sw.name, a.kind), (a.stall_window, a.stall_delta)))
    if a.compare_budget:
        if len(sweeps) != 1:
            ap.error("--compare-budget needs exactly one sweep (the longer budget)")
        doc.append(budget_section(Sweep(a.compare_budget), sweeps[0], a.out))
    if a.flashsim or a.iobench:
        doc += ["## Storage", ""]
        multi = len(a.flashsim) + len(a.iobench) > 2
        for i, f in enumerate(a.flashsim):
            doc.append(flashsim_section(f, a.out, f"{i}-" if multi else ""))
        for i, f in enumerate(a.iobench):
            doc.append(iobench_section(f, a.out, f"{i}-" if multi else "", a.iobench_disk))
    path = os.path.join(a.out, "README.md")
    head = preregistration(path)
    write_atomic(path, head + "\n".join(doc).rstrip() + "\n")
    print(f"wrote {path}" + (" (below its pre-registration, kept as it was)" if head else ""))


if __name__ == "__main__":
    main()
