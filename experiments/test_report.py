#!/usr/bin/python3
"""Tests of experiments/report.py on synthetic sweeps (run by ctest as `report_py`; or directly:
`/usr/bin/python3 experiments/test_report.py`). The logs follow README.md "Run log" with known final losses, so every
number the report prints can be checked against arithmetic done here."""
import contextlib
import glob
import json
import os
import re
import subprocess
import sys
import tempfile
import types
import unittest
import zlib

import h5py
import numpy as np
import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
REPORT = os.path.join(HERE, "report.py")
sys.path.insert(0, HERE)
import report  # noqa: E402


def pagegram_binary():
    """The binary that writes sweep expansion files (the run identity lives in C++ alone): $PAGEGRAM_BIN (ctest sets it), else
    build-test/ or build/ of this checkout."""
    env = os.environ.get("PAGEGRAM_BIN")
    cands = [env] if env else [os.path.join(HERE, "..", d, "pagegram") for d in ("build-test", "build")]
    for c in cands:
        if c and os.access(c, os.X_OK):
            return c
    raise RuntimeError(f"no pagegram binary ({', '.join(c for c in cands if c)}): build it (scripts/setup.sh) or set "
                       "PAGEGRAM_BIN; the expansion files these tests need are written by it")


def write_expansion(spec_path):
    """records/expansion.json of a sweep file, by the binary (`pagegram sweep expand`)."""
    r = subprocess.run([pagegram_binary(), "sweep", "expand", spec_path], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr

CONFIG = {
    "model": {"layers": 4, "d_model": 128, "heads": 4, "context": 128, "vocab": 8192},
    "memory": {"layout": "none", "target_params": 8000000, "heads": 8, "head_dim": 64, "inject_layers": [0, 3],
               "lr_mult": 70.0},
    "train": {"tokens": 0, "steps": 0, "tokens_per_step": 16384, "seed": 0},
}


def write_log(run_dir, cfg, loss, status="finished"):
    """A run's log.h5 with two evaluations: 9.0 at step 0 and `loss` at the end."""
    with h5py.File(os.path.join(run_dir, "log.h5"), "w") as f:
        f.attrs["status"] = status
        f.attrs["config"] = yaml.safe_dump(cfg)
        for k in ("host", "cpus", "revision", "build_type", "started", "updated"):
            f.attrs[k] = "test"
        f.attrs["threads"] = 2
        f["eval/step"] = np.array([0, 10], dtype=np.int64)
        f["eval/tokens"] = np.array([0, 10 * 16384], dtype=np.int64)
        f["eval/loss"] = np.array([9.0, loss])
        f["train/elapsed_s"] = np.array([1.0, 60.0])
        f.create_group("summary").attrs["train_tok_per_s"] = 1000.0


def write_sweep(root, name, tokens, finals, unfinished=(), variants=None, configure=None):
    """A sweep manifest + one log.h5 per (variant, seed) with the given final held-out loss. variants: the
    manifest's variant order (default: Table 1's); configure(cfg, variant) sets a run's memory keys (default: the
    layout named by the variant)."""
    os.makedirs(root, exist_ok=True)
    order = variants or ["none", "flat", "engram", "pagegram_s4"]
    seeds = sorted({s for _, s in finals})
    runs = []
    for (v, s), loss in finals.items():
        d = f"{v}-s{s}-0000abcd"
        runs.append(dict(name=f"{v}-s{s}", variant=v, seed=s, grid={}, dir=d, hash="0000abcd", overrides=[]))
        os.makedirs(os.path.join(root, d))
        cfg = json.loads(json.dumps(CONFIG))
        cfg["memory"]["layout"] = "none" if v == "none" else v.split("_")[0]
        if configure:
            configure(cfg, v)
        cfg["train"]["tokens"], cfg["train"]["seed"] = tokens, s
        write_log(os.path.join(root, d), cfg, loss, "running" if (v, s) in unfinished else "finished")
    with open(os.path.join(root, "sweep.json"), "w") as f:
        json.dump(dict(format="pagegram-sweep", format_version=1, name=name, description="", spec=name + ".yaml",
                       base="base.yaml", seeds=seeds, variants=[v for v in order if v in {x for x, _ in finals}]
                       if variants is None else order, grid={}, runs=runs), f)
    return os.path.join(root, "sweep.json")


def write_grid_sweep(root, finals):
    """Table 8's shape: variants x memory.lr_mult grid (values are strings in the manifest, as sweep.cpp writes them)."""
    os.makedirs(root, exist_ok=True)
    runs = []
    for (v, lr), loss in finals.items():
        d = f"{v}-lr_mult{lr}-s0-0000abcd"
        runs.append(dict(name=d[:-9], variant=v, seed=0, grid={"memory.lr_mult": lr}, dir=d, hash="0000abcd",
                         overrides=[]))
        os.makedirs(os.path.join(root, d))
        cfg = json.loads(json.dumps(CONFIG))
        cfg["memory"]["layout"], cfg["memory"]["lr_mult"] = v.split("_")[0], float(lr)
        cfg["train"]["tokens"] = 1_250_000
        write_log(os.path.join(root, d), cfg, loss)
    with open(os.path.join(root, "sweep.json"), "w") as f:
        json.dump(dict(format="pagegram-sweep", format_version=1, name="table8_lr_grid", description="", spec="t8.yaml",
                       base="base.yaml", seeds=[0], variants=sorted({v for v, _ in finals}),
                       grid={"memory.lr_mult": ["10", "70", "200"]}, runs=runs), f)
    return os.path.join(root, "sweep.json")


def row(md, label):
    """The cells of the Markdown table row starting with `| label |`."""
    for line in md.splitlines():
        if line.startswith(f"| {label} |"):
            return [c.strip() for c in line.strip().strip("|").split("|")]
    raise AssertionError(f"no row {label!r} in:\n{md}")


class Statistics(unittest.TestCase):
    def test_selftest(self):
        report.selftest()  # raises on a wrong p-value

    def test_paired_t_and_sign(self):
        t, p = report.paired_t([-0.1, -0.2, -0.3])
        self.assertAlmostEqual(t, -0.2 / (0.1 / 3 ** 0.5), places=9)
        self.assertLess(p, 0.1)
        p_sign, wins, n = report.sign_test_p([-1.0, -1.0, 1.0, 0.0])
        self.assertEqual((wins, n), (2, 3))
        self.assertAlmostEqual(p_sign, 0.5)


class Tables(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.d = self.tmp.name
        rng = np.random.default_rng(7)
        self.t1, self.t2 = {}, {}
        for s in range(3):
            base = 4.0 + 0.01 * s
            for v, off in (("none", 0.0), ("flat", -0.70), ("engram", -0.72), ("pagegram_s4", -0.74)):
                self.t1[(v, s)] = base + off + 0.001 * rng.standard_normal()
                self.t2[(v, s)] = base - 0.3 + off * 0.5 + 0.001 * rng.standard_normal()
        self.t1[("flat", 3)] = 3.0  # seed 3 only in table1: not in the budget comparison
        self.s1 = write_sweep(os.path.join(self.d, "t1"), "table1", 2_500_000, self.t1)
        self.s2 = write_sweep(os.path.join(self.d, "t2"), "table2", 5_000_000, self.t2,
                              unfinished={("engram", 2)})

    def tearDown(self):
        self.tmp.cleanup()

    def run_report(self, *args):
        out = os.path.join(self.d, "out")
        subprocess.run([sys.executable, REPORT, *args, "--out", out], check=True, capture_output=True, text=True)
        with open(os.path.join(out, "README.md")) as f:
            return f.read(), out

    def test_preregistration_is_kept_byte_for_byte(self):
        out = os.path.join(self.d, "out")
        os.makedirs(out, exist_ok=True)
        head = "# x\n\nRule: S=4 - Engram-style <= -0.07.\n\n" + report.PREREG_MARKER + "\n\n"
        with open(os.path.join(out, "README.md"), "w") as f:
            f.write(head + "old results\n")
        md, _ = self.run_report(self.s1)
        self.assertTrue(md.startswith(head))
        self.assertNotIn("old results", md)
        self.assertIn("| pagegram_s4 − flat |", md)
        md2, _ = self.run_report(self.s1)  # a second report keeps the same head, once
        self.assertEqual(md2.count(report.PREREG_MARKER), 1)
        self.assertTrue(md2.startswith(head))
        # The committed pre-registrations carry the marker (else report.py would overwrite them).
        for sweep in ("regime_d384", "regime_report_model"):
            self.assertTrue(report.preregistration(os.path.join(HERE, sweep, "README.md")), sweep)

    def test_variant_and_pair_tables(self):
        md, out = self.run_report(self.s1)
        vals = [self.t1[("pagegram_s4", s)] for s in range(3)]
        cells = row(md, "pagegram_s4")
        self.assertEqual(cells[1], "3")
        self.assertEqual(cells[2], f"{np.mean(vals):.4f} ± {np.std(vals, ddof=1):.4f}")
        d = [self.t1[("pagegram_s4", s)] - self.t1[("flat", s)] for s in range(3)]
        cells = row(md, "pagegram_s4 − flat")
        self.assertEqual(cells[1], "3")
        self.assertEqual(cells[2], f"{np.mean(d):+.4f}")
        self.assertIn("3/3", cells)
        self.assertTrue(os.path.exists(os.path.join(out, "table1-fig1a-loss.png")))

    def test_unfinished_runs_are_named_and_left_out(self):
        md, _ = self.run_report(self.s2)
        self.assertIn("engram-s2 (running)", md)
        self.assertEqual(row(md, "engram")[1], "2")

    def test_budget_comparison(self):
        md, _ = self.run_report(self.s2, "--compare-budget", self.s1)
        # tokens = whole steps: ceil(2.5M / 16,384) x 16,384 = 2.51M
        self.assertIn("## Budget: table1 (2.51M tokens) vs table2 (5.01M tokens)", md)
        gain = row(md, "memory gain of PageGram S=4 (none − PageGram)")
        g1 = np.mean([self.t1[("none", s)] - self.t1[("pagegram_s4", s)] for s in range(3)])
        g2 = np.mean([self.t2[("none", s)] - self.t2[("pagegram_s4", s)] for s in range(3)])
        self.assertEqual(gain[1:5], ["3", f"{g1:+.4f}", f"{g2:+.4f}", f"{g2 - g1:+.4f}"])
        self.assertEqual(gain[6], "3/3")
        # engram-s2 of table2 is unfinished: contrasts with Engram-style use seeds 0 and 1 only.
        e = row(md, "Engram-style − flat (negative: Engram-style better)")
        d1 = np.mean([self.t1[("engram", s)] - self.t1[("flat", s)] for s in range(2)])
        self.assertEqual(e[1:3], ["2", f"{d1:+.4f}"])

    def test_lr_grid(self):
        finals = {("flat", "10"): 3.9, ("flat", "70"): 3.7, ("flat", "200"): 3.8,
                  ("pagegram_s4", "10"): 3.6, ("pagegram_s4", "70"): 3.65}  # pagegram 200x missing
        md, out = self.run_report(write_grid_sweep(os.path.join(self.d, "t8"), finals))
        self.assertEqual(row(md, "flat")[1:5], ["3.9000", "3.7000", "3.8000", "70×"])
        self.assertEqual(row(md, "pagegram_s4")[1:5], ["3.6000", "3.6500", "·", "10×"])
        self.assertTrue(os.path.exists(os.path.join(out, "table8_lr_grid-lr-grid.png")))

    def test_compare_budget_needs_one_sweep(self):
        r = subprocess.run([sys.executable, REPORT, self.s1, self.s2, "--compare-budget", self.s1, "--out",
                            os.path.join(self.d, "o")], capture_output=True, text=True)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("--compare-budget needs exactly one sweep", r.stderr)

    def test_missing_manifest_is_one_clear_line(self):
        r = subprocess.run([sys.executable, REPORT, os.path.join(self.d, "nope.json"), "--out",
                            os.path.join(self.d, "o")], capture_output=True, text=True)
        self.assertNotEqual(r.returncode, 0)
        self.assertTrue(re.search(r"nope\.json: no sweep manifest \(hint:", r.stderr), r.stderr)


# ------------------------------------------------------------------------------------------------------------
# Run records (experiments/<table>/records/*.json, RECORDS.md) and the stall detector.

# A preset for the sweep file of the record tests (the binary resolves it, with its defaults, into each run's config
# in the sweep's expansion).
RECORD_BASE = f"""
base: {os.path.join(os.path.dirname(HERE), "configs", "regime.yaml")}
memory: {{gate_init: 0.5}}
"""
RECORD_SWEEP = """
name: regime_stage1
description: "records test"
base: base.yaml
seeds: [0, 1, 2, 3]
variants:
  flat: {memory.layout: flat}
  engram: {memory.layout: engram}
  pagegram_s4: {memory: {layout: pagegram, slots: 4}}
"""
EVAL_STEPS = [46 * i for i in range(10)] + [458]


def set_key(text, section, key, value):
    """The config dump with `section.key` (a two-level key) set to value."""
    out, cur, done = [], None, False
    for line in text.split("\n"):
        if line and not line.startswith(" "):
            cur = line.split(":")[0]
        elif cur == section and line.startswith(f"  {key}:") and not done:
            line, done = f"  {key}: {value}", True
        out.append(line)
    assert done, (section, key)
    return "\n".join(out)


def curve(final, plateau_from=None):
    """Held-out losses at EVAL_STEPS ending at `final`: halving distance to it per evaluation, or flat from
    evaluation `plateau_from` on (a stall)."""
    n = len(EVAL_STEPS)
    if plateau_from is None:
        return [final + 3.0 * (0.5 ** i - 0.5 ** (n - 1)) for i in range(n)]
    return [final + 3.0 * (0.5 ** min(i, plateau_from) - 0.5 ** plateau_from) for i in range(n)]


def write_record(folder, name, variant, seed, final, revision="rev1", kernels="avx2", layers=None, plateau_from=None,
                 config_hash=None, layout=None, slots=None, extra=(), updated="2026-11-30T10:15:00Z", grid=None, add=(),
                 data=None):
    """A record as sweep/records.cpp run_record_json writes it; returns its path. Its config and hash are its run's
    in the sweep's expansion (folder/expansion.json, written by the binary); layers, layout, slots, extra ((section, key,
    value) set) and add ((section, key, value) added) change the config, and then the record carries another hash
    (config_hash, or a made-up one: Python does not compute the C++ hash), as a record of an older sweep file does."""
    with open(os.path.join(folder, "expansion.json")) as f:
        runs = json.load(f)["runs"]
    # a run the expansion does not have (the sweep file no longer has it): the first run's config, another hash
    entry = next((r for r in runs if r["name"] == name), dict(runs[0], hash=None))
    text = entry["config"].rstrip("\n")
    planned = text
    for key, value in (("layout", layout), ("slots", slots)):
        if value is not None:
            text = set_key(text, "memory", key, value)
    if layers is not None:
        text = set_key(text, "model", "layers", layers)
    for sec, key, value in extra:
        text = set_key(text, sec, key, value)
    for sec, key, value in add:
        assert f"\n{sec}:\n" in text, sec
        text = text.replace(f"\n{sec}:\n", f"\n{sec}:\n  {key}: {value}\n", 1)
    # a log's config names train.precision at its default, the expansion's leaves it out (sweep/spec.cpp portable_yaml)
    same = text.replace("\n  precision: fp32", "") == planned and entry["hash"]
    h = config_hash or (entry["hash"] if same else f"{zlib.crc32(text.encode()):08x}")
    text = set_key(set_key(text, "train", "out_dir", f"/elsewhere/runs/regime_stage1/{name}"), "train", "threads", 2)
    ev = curve(final, plateau_from)
    rec = {"format": "pagegram-run-record", "format_version": 1, "sweep": "regime_stage1", "name": name,
           "variant": variant, "seed": seed, "grid": grid or {}, "config_hash": h, "status": "finished",
           "revision": revision, "kernels": kernels, "cpu": "Test CPU @ 2.0GHz", "host": "testhost", "threads": 2,
           "compiler_flags": "-O3", "started": "2026-11-30T10:00:00Z", "updated": updated,
           "steps": 458, "total_steps": 458, "tokens": 458 * 16384, "train_seconds": 900.0,
           "tok_per_s_median": 8400.0, "final": {"heldout_loss": final, "train_loss": final - 0.05},
           "eval": {"step": EVAL_STEPS, "tokens": [s * 16384 for s in EVAL_STEPS], "loss": ev},
           "train": {"step": [1, 458], "loss": [9.0, final - 0.05]}, "scalars_last": {"gate/0": 0.5},
           "config": text}
    if data is not None:
        rec["data"] = data
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, f"{name}-{h}.json")
    with open(path, "w") as f:
        json.dump(rec, f, indent=1)
    return path


def t_p_df2(t):
    """Two-sided p of Student's t with 2 degrees of freedom (closed form: F(t) = 1/2 + t / (2 sqrt(t^2 + 2)))."""
    return 1.0 - abs(t) / (t * t + 2.0) ** 0.5


def t_p_df3(t):
    """Two-sided p with 3 degrees of freedom: 1 - (2/pi) (theta + sin theta cos theta), theta = atan(|t|/sqrt 3)."""
    th = np.arctan(abs(t) / 3 ** 0.5)
    return 1.0 - 2.0 / np.pi * (th + np.sin(th) * np.cos(th))


def t_stat(d):
    d = np.asarray(d, float)
    return d.mean() / (d.std(ddof=1) / len(d) ** 0.5)


class Records(unittest.TestCase):
    FLAT = {0: 3.50, 1: 3.52, 2: 3.49, 3: 3.51}
    D_PAGEGRAM = {0: -0.05, 1: -0.07, 2: -0.03}  # pagegram_s4 - flat; seed 3 has no record
    D_ENGRAM = {0: 0.02, 1: 0.04, 2: -0.01, 3: 0.03}  # engram - flat

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.d = self.tmp.name
        self.t = os.path.join(self.d, "experiments", "regime_stage1")
        os.makedirs(self.t)
        with open(os.path.join(self.t, "base.yaml"), "w") as f:
            f.write(RECORD_BASE)
        with open(os.path.join(self.t, "sweep.yaml"), "w") as f:
            f.write(RECORD_SWEEP)
        write_expansion(os.path.join(self.t, "sweep.yaml"))
        rec = os.path.join(self.t, "records")
        self.finals = {}
        for s, x in self.FLAT.items():
            self.finals[("flat", s)] = x
            write_record(rec, f"flat-s{s}", "flat", s, x)
            self.finals[("engram", s)] = x + self.D_ENGRAM[s]
            write_record(rec, f"engram-s{s}", "engram", s, x + self.D_ENGRAM[s], kernels="avx512",
                         plateau_from=3 if s == 1 else None)
            if s in self.D_PAGEGRAM:
                self.finals[("pagegram_s4", s)] = x + self.D_PAGEGRAM[s]
                write_record(rec, f"pagegram_s4-s{s}", "pagegram_s4", s, x + self.D_PAGEGRAM[s], revision="rev2")
        # Records that must not be used: a run of an older sweep file (4 layers), a hash that is not its config's,
        # a run the sweep file no longer has.
        write_record(rec, "flat-s0", "flat", 0, 9.99, layers=4)
        write_record(rec, "flat-s2", "flat", 2, 9.99, config_hash="deadbeef")
        write_record(rec, "none-s0", "none", 0, 9.99, layout="none")

    def tearDown(self):
        self.tmp.cleanup()

    def run_report(self):
        """report.py on the sweep file from the temporary folder: no runs/, no run directory, no manifest."""
        out = os.path.join(self.t, "out")
        r = subprocess.run([sys.executable, REPORT, "experiments/regime_stage1/sweep.yaml", "--out", out],
                           cwd=self.d, capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(os.path.join(out, "README.md")) as f:
            return f.read(), out

    def test_committed_expansions_are_current_and_name_every_record(self):
        # Every committed sweep with records has its expansion file (written by the binary from the sweep file and its presets,
        # which are unchanged since), and every record carries its run's hash in it.
        specs = sorted(glob.glob(os.path.join(HERE, "*", "records", "*-*.json")))
        self.assertGreater(len(specs), 1)
        for spec in sorted({os.path.dirname(os.path.dirname(p)) for p in specs}):
            spec_path = os.path.join(spec, "sweep.yaml")
            _, runs, _ = report.load_expansion(spec_path)
            hashes = {r["name"]: r["hash"] for r in runs}
            for p in glob.glob(os.path.join(spec, "records", "*-*.json")):
                with open(p) as f:
                    rec = json.load(f)
                self.assertEqual(hashes.get(rec["name"]), rec["config_hash"], p)

    def test_an_expansion_file_missing_or_out_of_date_is_refused(self):
        expansion = os.path.join(self.t, "records", "expansion.json")
        with open(os.path.join(self.t, "base.yaml"), "a") as f:
            f.write("# edited\n")
        r = subprocess.run([sys.executable, REPORT, "experiments/regime_stage1/sweep.yaml", "--out", "o"], cwd=self.d,
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 1)
        self.assertIn("expansion.json: out of date: base.yaml changed since it was written", r.stderr)
        self.assertIn("`pagegram sweep expand experiments/regime_stage1/sweep.yaml`", r.stderr)
        self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)
        os.remove(expansion)
        r = subprocess.run([sys.executable, REPORT, "experiments/regime_stage1/sweep.yaml", "--out", "o"], cwd=self.d,
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 1)
        self.assertIn("expansion.json: no expansion file of the sweep", r.stderr)

    def test_table_from_records_alone(self):
        md, out = self.run_report()
        # variant table: means over the records used (not the stale 9.99s)
        for v, n in (("flat", 4), ("engram", 4), ("pagegram_s4", 3)):
            vals = [self.finals[(v, s)] for s in range(4) if (v, s) in self.finals]
            cells = row(md, v)
            self.assertEqual(cells[1:3], [str(n), f"{np.mean(vals):.4f} ± {np.std(vals, ddof=1):.4f}"], v)
        # paired differences: hand-computed t p-values (closed forms for 2 and 3 degrees of freedom) and sign tests
        d = list(self.D_PAGEGRAM.values())
        cells = row(md, "pagegram_s4 − flat")
        self.assertEqual(cells[1:3], ["3", f"{np.mean(d):+.4f}"])
        # columns: name, n, mean, 95% CI, sd, s0..s3, t p, Holm p, A better, sign p (1-sided), sign p (2-sided)
        self.assertEqual([cells[9]] + cells[11:14], [f"{t_p_df2(t_stat(d)):.3f}", "3/3", "0.125", "0.250"])
        self.assertEqual(cells[9], "0.049")
        h = 4.302653 * np.std(d, ddof=1) / np.sqrt(3)  # t(0.975, 2)
        self.assertEqual(cells[3], f"{np.mean(d) - h:+.4f} … {np.mean(d) + h:+.4f}".replace("+0.0000", "0.0000"))
        d = list(self.D_ENGRAM.values())
        cells = row(md, "engram − flat")
        self.assertEqual(cells[1:3], ["4", f"{np.mean(d):+.4f}"])
        self.assertEqual([cells[9]] + cells[11:14], [f"{t_p_df3(t_stat(d)):.3f}", "1/4", "0.938", "0.625"])
        d = [self.D_PAGEGRAM[s] - self.D_ENGRAM[s] for s in range(3)]
        self.assertEqual(row(md, "pagegram_s4 − engram")[9], f"{t_p_df2(t_stat(d)):.3f}")
        # Holm over the table's three contrasts: the smallest p times 3, then monotone
        ps = {k: float(row(md, k)[9]) for k in ("pagegram_s4 − flat", "pagegram_s4 − engram", "engram − flat")}
        want = dict(zip(ps, report.holm(list(ps.values()))))
        for k in ps:
            self.assertAlmostEqual(float(row(md, k)[10]), want[k], delta=0.0011, msg=k)
        self.assertAlmostEqual(min(want.values()), min(1.0, 3 * min(ps.values())), delta=0.004)
        self.assertIn("*Omnibus:* repeated-measures ANOVA over the 3 table layouts", md)
        for d, p in ((list(self.D_PAGEGRAM.values()), t_p_df2), (list(self.D_ENGRAM.values()), t_p_df3)):
            self.assertAlmostEqual(report.paired_t(d)[1], p(t_stat(d)), places=9)
        # regime quantities from the records' configs
        self.assertEqual(row(md, "optimizer steps")[1], "458")
        self.assertEqual(row(md, "table params per training token")[1], "3.33")
        self.assertEqual(row(md, "lookups per row per step (tokens per step / rows per head)")[1], "0.67")
        self.assertEqual(row(md, "lookups per row over the run")[1], "307")
        self.assertEqual(row(md, "W_V compression (orders·K·r : d_model)")[1], "1,024 : 128 = 8.0 : 1")
        # provenance: records only, mixed revisions and kernels listed, records not used named
        self.assertIn("*Read from:* 11 records.", md)
        self.assertIn("**Mixed revisions (2):** rev1 (8 runs), rev2 (3 runs).", md)
        self.assertIn("*Kernels:* avx2, avx512", md)
        self.assertIn("pagegram_s4-s3 (no record)", md)
        self.assertRegex(md, r"`flat-s0-[0-9a-f]{8}\.json`: stale, not used: config_hash [0-9a-f]{8} is not the sweep's "
                             r"\([0-9a-f]{8}: records/expansion.json\)")
        self.assertIn("`flat-s2-deadbeef.json`: stale, not used: config_hash deadbeef is not the sweep's", md)
        self.assertRegex(md, r"`none-s0-[0-9a-f]{8}\.json`: run `none-s0` is not in the sweep file's expansion")
        # the stall: engram-s1 is flat from its 4th evaluation (step 138) while the others keep improving
        cells = row(md, "engram-s1")
        self.assertEqual(cells[1], "138 (2.26M)")
        self.assertEqual(len([l for l in md.splitlines() if re.match(r"\| \w+-s\d \| \d+ \(", l)]), 1)
        self.assertTrue(os.path.exists(os.path.join(out, "regime_stage1-fig1a-loss.png")))

    def test_a_record_of_another_config_is_stale(self):
        """A second record of engram-s3 whose config differs in a key neither the sweep file nor its presets set (a C++
        default changed since): its hash is not the expansion's, so it is named stale and the run's own record is used."""
        rec = os.path.join(self.t, "records")
        write_record(rec, "engram-s3", "engram", 3, 9.99, extra=[("memory", "gate_init", 0.3)],
                     updated="2026-12-01T10:15:00Z")
        md, _ = self.run_report()
        self.assertRegex(md, r"`engram-s3-[0-9a-f]{8}\.json`: stale, not used: config_hash [0-9a-f]{8} is not the "
                             r"sweep's \([0-9a-f]{8}: records/expansion.json\)")
        self.assertEqual(row(md, "engram")[6], f"{self.finals[('engram', 3)]:.4f}")
        self.assertEqual(row(md, "engram")[1], "4")

    def test_records_of_different_corpus_builds_are_named(self):
        rec = os.path.join(self.t, "records")
        md, _ = self.run_report()
        # no record names one: said once, as unknown (not checkable from the records)
        self.assertIn("corpus build: not recorded in any of the 11 records", md)
        self.assertNotIn("corpus builds:", md)
        write_record(rec, "flat-s0", "flat", 0, self.FLAT[0], data="train 100 tokens 2 docs; manifest aa")
        write_record(rec, "flat-s1", "flat", 1, self.FLAT[1], data="train 101 tokens 2 docs; manifest bb")
        md, _ = self.run_report()
        self.assertIn("corpus builds: the records name 2 different `data` fingerprints", md)
        self.assertIn("flat-s0: `train 100 tokens 2 docs; manifest aa`", md)
        self.assertIn("corpus build not recorded (records written before the `data` field) for: engram-s0", md)
        self.assertEqual(row(md, "flat")[1], "4")  # named, still used
        # the same counts and tokenizer, only the manifest hash differs (a rebuild before 964454b): said as such
        write_record(rec, "flat-s1", "flat", 1, self.FLAT[1], data="train 100 tokens 2 docs; manifest bb")
        md, _ = self.run_report()
        self.assertIn("corpus builds: the records name 2 `data` fingerprints that differ only in the `manifest` hash",
                      md)
        self.assertIn("flat-s1: `train 100 tokens 2 docs; manifest bb`", md)
        self.assertNotIn("different `data` fingerprints", md)
        for f in os.listdir(rec):  # every record names the same build: said once
            if f.endswith(".json"):
                with open(os.path.join(rec, f)) as fh:
                    r = json.load(fh)
                r["data"] = "train 100 tokens 2 docs; manifest aa"
                with open(os.path.join(rec, f), "w") as fh:
                    json.dump(r, fh)
        md, _ = self.run_report()
        self.assertIn("corpus build: every record names the same `data`: `train 100 tokens 2 docs; manifest aa`", md)

    def test_lr_grid_from_records(self):
        t8 = os.path.join(self.d, "experiments", "table8_lr_grid")
        os.makedirs(t8)
        with open(os.path.join(t8, "base.yaml"), "w") as f:
            f.write(RECORD_BASE)
        with open(os.path.join(t8, "sweep.yaml"), "w") as f:
            f.write("name: table8_lr_grid\nbase: base.yaml\nseeds: [0]\nvariants:\n  flat: {memory.layout: flat}\n"
                    "  engram: {memory.layout: engram}\ngrid:\n  memory.lr_mult: [10, 70]\n")
        write_expansion(os.path.join(t8, "sweep.yaml"))
        finals = {("flat", "10"): 3.9, ("flat", "70"): 3.7, ("engram", "10"): 3.6}  # engram 70x: no record
        for (v, lr), x in finals.items():
            write_record(os.path.join(t8, "records"), f"{v}-lr_mult={lr}-s0", v, 0, x,
                         extra=[("memory", "lr_mult", lr)], grid={"memory.lr_mult": lr})
        r = subprocess.run([sys.executable, REPORT, "experiments/table8_lr_grid/sweep.yaml", "--out", "o"], cwd=self.d,
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(os.path.join(self.d, "o", "README.md")) as f:
            md = f.read()
        self.assertEqual(row(md, "flat")[1:4], ["3.9000", "3.7000", "70×"])
        self.assertEqual(row(md, "engram")[1:4], ["3.6000", "·", "10×"])
        self.assertIn("engram-lr_mult=70-s0 (no record)", md)

    def test_run_dir_for_a_run_without_record(self):
        root = os.path.join(self.d, "runs", "regime_stage1")
        os.makedirs(os.path.join(root, "pagegram_s4-s3-0000abcd"))
        cfg = json.loads(json.dumps(CONFIG))
        cfg["memory"]["layout"], cfg["train"]["seed"], cfg["train"]["tokens"] = "pagegram", 3, 7503872
        write_log(os.path.join(root, "pagegram_s4-s3-0000abcd"), cfg, 3.40)
        with open(os.path.join(root, "sweep.json"), "w") as f:
            json.dump(dict(name="regime_stage1", runs=[dict(name="pagegram_s4-s3", variant="pagegram_s4", seed=3,
                                                            grid={}, dir="pagegram_s4-s3-0000abcd", hash="0000abcd")]),
                      f)
        md, _ = self.run_report()
        self.assertIn("*Read from:* 11 records, 1 run dir.", md)
        self.assertEqual(row(md, "pagegram_s4")[1], "4")
        self.assertEqual(row(md, "pagegram_s4")[6], "3.4000")
        self.assertNotIn("(no record)", md)


# Issue 13 stage 2 and the regime-matched Table 2 (experiments/regime_stage2, regime_table2): a few of their variants.
STAGE2_SWEEP = """
name: regime_stage2
description: "stage 2 test"
base: base.yaml
seeds: [0, 1, 2]
variants:
  none: {memory.layout: none}
  flat: {memory.layout: flat}
  engram: {memory.layout: engram}
  pagegram_s1: {memory.layout: pagegram, memory.slots: 1}
  pagegram_s4: {memory.layout: pagegram, memory.slots: 4}
  pagegram_s8: {memory.layout: pagegram, memory.slots: 8}
"""
TABLE2_SWEEP = """
name: regime_table2
description: "regime table 2 test"
base: base.yaml
seeds: [0, 1, 2]
tokens: 15007744
variants:
  none: {memory.layout: none}
  flat: {memory.layout: flat}
  engram: {memory.layout: engram}
  pagegram_s4: {memory.layout: pagegram, memory.slots: 4}
"""


def write_regime_sweep(root, name, text, finals, extra=(), plateau=(), data=None):
    """experiments/<name>/ under root: base.yaml, sweep.yaml (text) and a record per {(variant, seed): final};
    extra: config keys every record sets; plateau: the (variant, seed) runs that stall from their 4th evaluation;
    data: (variant, seed) -> the record's `data` fingerprint (None: no field)."""
    t = os.path.join(root, "experiments", name)
    os.makedirs(t)
    with open(os.path.join(t, "base.yaml"), "w") as f:
        f.write(RECORD_BASE)
    with open(os.path.join(t, "sweep.yaml"), "w") as f:
        f.write(text)
    write_expansion(os.path.join(t, "sweep.yaml"))
    for (v, s), x in finals.items():
        slots = int(v.rsplit("_s", 1)[1]) if v.startswith("pagegram") else 4
        write_record(os.path.join(t, "records"), f"{v}-s{s}", v, s, x, slots=slots, extra=extra,
                     plateau_from=3 if (v, s) in plateau else None, data=data(v, s) if data else None)
    return f"experiments/{name}/sweep.yaml"


class RegimeStage2(unittest.TestCase):
    # Offsets to flat per variant (seed s adds 0.01 s); pagegram_s8-s2 and none-s2 have no record, pagegram_s8-s1
    # stalls from its 4th evaluation (step 138).
    OFF = {"none": 0.40, "flat": 0.0, "engram": 0.03, "pagegram_s1": -0.02, "pagegram_s4": -0.05, "pagegram_s8": 0.01}
    MISSING = {("pagegram_s8", 2), ("none", 2)}

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.d = self.tmp.name
        self.finals = {(v, s): 3.50 + 0.01 * s + off + 0.002 * ((s * 7 + i) % 3)
                       for i, (v, off) in enumerate(self.OFF.items()) for s in range(3) if (v, s) not in self.MISSING}
        spec = write_regime_sweep(self.d, "regime_stage2", STAGE2_SWEEP, self.finals, plateau={("pagegram_s8", 1)})
        r = subprocess.run([sys.executable, REPORT, spec, "--out", "o"], cwd=self.d, capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.out = os.path.join(self.d, "o")
        with open(os.path.join(self.out, "README.md")) as f:
            self.md = f.read()

    def tearDown(self):
        self.tmp.cleanup()

    def diffs(self, a, b):
        return [self.finals[(a, s)] - self.finals[(b, s)] for s in range(3) if (a, s) in self.finals and
                (b, s) in self.finals]

    def test_kinds(self):
        self.assertEqual(report.kind_of("regime_stage2", None), "regime_stage2")
        self.assertEqual(report.kind_of("regime_table2", None), "regime_table2")
        self.assertEqual(report.kind_of("regime_stage1", None), "regime_stage1")
        self.assertEqual(report.kind_of("table2", None), "table2")
        self.assertEqual(report.kind_of("table2_bf16", None), "table2")  # a prefix still picks its kind
        self.assertEqual(report.kind_of("table10", None), "generic")  # table1 followed by a digit is not table1
        self.assertEqual(report.kind_of("regime_stage2", "table1"), "table1")
        self.assertEqual(report.REPORT_NUM["regime_stage2"], report.REPORT_NUM["table1"])
        self.assertEqual(report.REPORT_NUM["regime_table2"], report.REPORT_NUM["table2"])
        self.assertEqual(report.report_diffs("regime_table2", "flat"), {"pagegram_s4": -0.024, "engram": -0.034})

    def test_pairs_are_table1_and_the_s_sweep_once(self):
        pairs = [(a, b) for a, b, _ in report.REPORT["regime_stage2"]["pairs"]]
        self.assertEqual(len(pairs), len(set(pairs)))
        t1 = [(a, b) for a, b, _ in report.REPORT["table1"]["pairs"]]
        t4 = [(a, b) for a, b, _ in report.REPORT["table4_s_sweep"]["pairs"] if b != "pagegram_s60"]
        self.assertEqual(pairs, t1 + [p for p in t4 if p not in t1])
        text = dict(((a, b), t) for a, b, t in report.REPORT["regime_stage2"]["pairs"])
        self.assertEqual(text[("pagegram_s4", "engram")],
                         "−0.142 (t p=0.02); Engram-style falls behind on seed 1 too")
        # in the README: each pair once, the S pairs whose variants the sweep has, no every-pair rows
        rows = [l.split(" |")[0][2:] for l in self.md.splitlines() if re.match(r"\| \w\w+ − \w+ \|", l)]
        self.assertEqual(rows, [f"{a} − {b}" for a, b in pairs if b != "pagegram_s15"])
        self.assertTrue(row(self.md, "pagegram_s4 − flat")[-1].startswith("−0.067 "))
        d = self.diffs("pagegram_s4", "pagegram_s8")  # pagegram_s8-s2 missing: 2 seeds
        self.assertEqual(row(self.md, "pagegram_s4 − pagegram_s8")[1:3], ["2", f"{np.mean(d):+.4f}"])
        d = self.diffs("pagegram_s4", "pagegram_s1")
        self.assertEqual(row(self.md, "pagegram_s4 − pagegram_s1")[1:3], ["3", f"{np.mean(d):+.4f}"])
        self.assertIn("3/3", row(self.md, "pagegram_s4 − pagegram_s1"))
        self.assertEqual(row(self.md, "pagegram_s4 − none")[1], "2")

    def test_sections(self):
        self.assertIn("## Regime-matched Table 1 and S sweep (issue 13 stage 2)", self.md)
        self.assertIn("pagegram_s8-s2 (no record)", self.md)
        self.assertIn("none-s2 (no record)", self.md)
        # stability per seed: mean(engram, S=8) − mean(S=1, S=4) at each evaluation; a dot row where a run is missing
        st = self.md.split("### Stability per seed", 1)[1].split("### ", 1)[0]
        self.assertIn("mean held-out loss of engram, pagegram_s8 minus the mean of pagegram_s1, pagegram_s4", st)
        for s in (0, 1):
            runs = {v: curve(self.finals[(v, s)], 3 if (v, s) == ("pagegram_s8", 1) else None)
                    for v in ("engram", "pagegram_s8", "pagegram_s1", "pagegram_s4")}
            want = [(runs["engram"][i] + runs["pagegram_s8"][i]) / 2 - (runs["pagegram_s1"][i] + runs["pagegram_s4"][i]) / 2
                    for i in range(len(EVAL_STEPS))]
            cells = row(st, f"s{s}")
            self.assertEqual(cells[1:-1], [report.f4(x) for x in want], s)
        self.assertEqual(set(row(st, "s2")[1:]), {"·"})
        # seed 1's S=8 plateaus: the difference grows along its row; seed 0's shrinks to the final one
        s1 = [float(x) for x in row(st, "s1")[1:-1]]
        self.assertGreater(s1[-1], s1[4])
        # the stall detector names the run that plateaus, and only it
        self.assertEqual(row(self.md, "pagegram_s8-s1")[1], "138 (2.26M)")
        self.assertEqual(len([l for l in self.md.splitlines() if re.match(r"\| \w+-s\d \| \d+ \(", l)]), 1)
        self.assertIn("### Throughput", self.md)
        self.assertIn("PageGram 108K vs no table 113K tok/s", self.md)
        for fig in ("fig1a-loss", "fig1b-diff-to-flat", "fig3-s-sweep"):
            self.assertIn(f"(regime_stage2-{fig}.png)", self.md)
            self.assertTrue(os.path.getsize(os.path.join(self.out, f"regime_stage2-{fig}.png")) > 0, fig)
        self.assertIn("hollow markers = the report's final difference to flat (60M tokens, 5 seeds)", self.md)

    def test_fig3_without_s60(self):
        # From the synthetic repo, as report.py is run: a sweep's out_dir (runs/<name>) is relative to the working
        # directory, and the real repo's runs/regime_stage2 must not leak in while a real sweep is running.
        with contextlib.chdir(self.d):
            sw = report.Sweep("experiments/regime_stage2/sweep.yaml")
        fig = report.fig_s_sweep(sw, os.path.join(self.d, "f3.png"), "Fig. 3")
        ax, axp = fig.axes[:2]
        self.assertEqual([t.get_text() for t in ax.get_xticklabels()], ["S=1", "S=4", "S=8", "Engram-\nstyle"])
        mean = lines(axp)["mean difference"].get_ydata()
        self.assertAlmostEqual(mean[2], -np.mean(self.diffs("pagegram_s4", "pagegram_s8")))


D384_SWEEP = """
name: regime_d384
description: "pre-registered test"
base: base.yaml
seeds: [0, 1, 2, 3, 4]
variants:
  none: {memory.layout: none}
  flat: {memory.layout: flat}
  engram: {memory.layout: engram}
  pagegram_s4: {memory.layout: pagegram, memory.slots: 4}
variant_seeds: {none: [0, 1]}
"""


class Preregistered(unittest.TestCase):
    """regime_d384's pre-registered rule (its README above the marker) as report.py applies it."""

    def report(self, off, missing=(), lag_run=None, sweep=D384_SWEEP):
        """README of a regime_d384 sweep (seeds 0-4 finished) whose finals are flat + off[variant] + seed noise."""
        with tempfile.TemporaryDirectory() as d:
            noise = [0.0, 0.004, -0.003, 0.002, -0.001]
            finals = {(v, s): 3.0 + 0.01 * s + o + (noise[(s + i) % 5] if v != "flat" else 0.0)
                      for i, (v, o) in enumerate(off.items()) for s in range(5)
                      if (v, s) not in missing and (v != "none" or s < 2)}
            if lag_run:
                finals[lag_run] += 0.15
            spec = write_regime_sweep(d, "regime_d384", sweep, finals)
            r = subprocess.run([sys.executable, REPORT, spec, "--out", "o"], cwd=d, capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, r.stderr)
            with open(os.path.join(d, "o", "README.md")) as f:
                return f.read()

    def test_rule(self):
        st = lambda mean, p, lo, hi: dict(mean=mean, p_t=p, ci=(lo, hi))
        self.assertEqual(report.apply_rule(st(-0.10, 0.01, -0.14, -0.06), 0.05, 5), "signature present")
        self.assertEqual(report.apply_rule(st(-0.10, 0.01, -0.14, -0.06), 0.02, 5), "inconclusive: add seeds")
        self.assertEqual(report.apply_rule(st(-0.06, 0.01, -0.08, -0.04), 0.05, 5), "inconclusive: add seeds")
        self.assertEqual(report.apply_rule(st(-0.10, 0.06, -0.2, 0.0), 0.05, 5), "inconclusive: add seeds")
        self.assertEqual(report.apply_rule(st(-0.01, 0.5, -0.04, 0.03), -0.01, 5), "signature absent")
        self.assertEqual(report.apply_rule(st(-0.01, 0.5, -0.04, 0.03), 0.0, 5), "signature absent")
        self.assertEqual(report.apply_rule(st(-0.01, 0.5, -0.04, 0.03), 0.01, 5), "inconclusive: add seeds")
        self.assertEqual(report.apply_rule(st(-0.01, 0.5, -0.06, 0.03), -0.01, 5), "inconclusive: add seeds")
        self.assertEqual(report.apply_rule(st(-0.01, 0.5, -0.06, 0.03), -0.01, 8), "inconclusive")

    def test_absent_present_pending(self):
        md = self.report({"none": 0.8, "flat": 0.0, "engram": -0.01, "pagegram_s4": -0.015})
        self.assertIn("### Pre-registered decision", md)
        self.assertIn("**Verdict (5 seeds): signature absent.**", md)
        self.assertIn("Stalled runs: none.", md)
        self.assertEqual(row(md, "pagegram_s4 − none")[1], "2")  # none on seeds 0-1 only
        self.assertIn("![Paired differences](regime_d384-fig-contrasts.png)", md)
        self.assertEqual(report.report_pair_value("regime_d384", "pagegram_s4", "engram"), -0.142)
        self.assertEqual(report.report_pair_value("regime_d384", "flat", "engram"), -0.074)
        self.assertEqual(report.report_pair_value("regime_d384", "pagegram_s4", "none"), -0.40)
        self.assertIsNone(report.report_pair_value("table2", "pagegram_s4", "engram"))  # "within ±0.010"
        md = self.report({"none": 0.8, "flat": 0.0, "engram": 0.05, "pagegram_s4": -0.05})
        self.assertIn("**Verdict (5 seeds): signature present.**", md)
        md = self.report({"none": 0.8, "flat": 0.0, "engram": 0.05, "pagegram_s4": 0.02})
        self.assertIn("**Verdict (5 seeds): inconclusive: add seeds.** Seeds 5–7 are to be added", md)
        md = self.report({"none": 0.8, "flat": 0.0, "engram": -0.01, "pagegram_s4": -0.015},
                         missing={("engram", 3)})
        self.assertIn("**Verdict: pending** (4 of 5 seeds complete", md)
        self.assertNotIn("Verdict at the first", md)

    def test_the_first_verdict_stays_when_seeds_are_added(self):
        """After an inconclusive verdict at 5 seeds the sweep file lists seeds 0-7: while seeds 5-7 run, the README keeps
        the verdict of seeds 0-4 and says the 8-seed one is pending."""
        md = self.report({"none": 0.8, "flat": 0.0, "engram": 0.05, "pagegram_s4": 0.02},
                         sweep=D384_SWEEP.replace("seeds: [0, 1, 2, 3, 4]", "seeds: [0, 1, 2, 3, 4, 5, 6, 7]"))
        self.assertIn("**Verdict at the first 5 seeds (s0–s4): inconclusive: add seeds.** PageGram S=4 − Engram-style "
                      "-0.0300", md)
        self.assertIn("Seeds 5–7 were added, as the rule says.", md)
        self.assertIn("**Verdict: pending** (5 of 8 seeds complete", md)

    def test_corpus_builds_beside_the_verdict(self):
        """The design names one corpus build. Seeds 0-4 on build A and 5-7 on build B (another document count): the
        verdict says so, seed by seed; a seed whose runs straddle the builds is named with each run's build; records
        that differ only in the manifest hash count as one build."""
        build_a = "train 100 tokens 2 docs; heldout 50 tokens 1 docs; vocab 8192; tokenizer aa; manifest {}; split_seed 1"
        build_b = "train 101 tokens 3 docs; heldout 49 tokens 1 docs; vocab 8192; tokenizer aa; manifest cc; split_seed 1"
        seeds8 = D384_SWEEP.replace("seeds: [0, 1, 2, 3, 4]", "seeds: [0, 1, 2, 3, 4, 5, 6, 7]")
        off = {"none": 0.8, "flat": 0.0, "engram": 0.01, "pagegram_s4": 0.005}
        finals = {(v, s): 3.0 + 0.01 * s + o + 0.002 * ((s + i) % 3) for i, (v, o) in enumerate(off.items())
                  for s in range(8) if v != "none" or s < 2}

        def readme(data):
            with tempfile.TemporaryDirectory() as d:
                spec = write_regime_sweep(d, "regime_d384", seeds8, finals, data=data)
                r = subprocess.run([sys.executable, REPORT, spec, "--out", "o"], cwd=d, capture_output=True, text=True)
                self.assertEqual(r.returncode, 0, r.stderr)
                with open(os.path.join(d, "o", "README.md")) as f:
                    return f.read()

        one = readme(lambda v, s: build_a.format("a1" if s < 3 else "a2"))
        self.assertIn("*Corpus builds:* every finished run the rule compares names one corpus build", one)
        self.assertIn("that differ only in the `manifest` hash", one)
        two = readme(lambda v, s: build_a.format("a1" if s < 3 else "a2") if s < 5 else build_b)
        self.assertIn("the runs the rule compares come from 2 corpus builds, not one as the design says", two)
        self.assertIn("A: seeds 0–4 (`train 100 tokens", two)
        self.assertIn("B: seeds 5–7 (`train 101 tokens", two)
        self.assertIn("Every seed's runs share one build, so each paired difference is taken within one build", two)
        self.assertIn("the records name 3 different `data` fingerprints of 2 corpus builds", two)
        self.assertIn("**Verdict (8 seeds):", two)
        mixed = readme(lambda v, s: build_b if s > 5 or (s == 5 and v == "pagegram_s4") else build_a.format("a1"))
        self.assertIn("The runs of seed(s) s5 (engram-s5 A, flat-s5 A, pagegram_s4-s5 B) straddle builds", mixed)
        self.assertNotIn("Every seed's runs share one build", mixed)
        self.assertNotIn("*Corpus builds:*", readme(None))  # no record names a build: nothing to say here

    def test_lagging_run_is_a_stall(self):
        md = self.report({"none": 0.8, "flat": 0.0, "engram": -0.01, "pagegram_s4": -0.015}, lag_run=("engram", 1))
        self.assertIn("1 run(s) lag their seed's median by > 0.10 nats at 2 consecutive evaluations (engram-s1 from "
                      "step 0)", md)
        self.assertIn("Stalled runs: engram-s1.", md)


class RegimeBudget(unittest.TestCase):
    """regime_table2 with --compare-budget regime_stage2: the memory gain of PageGram falls 0.40 → 0.10 and
    Engram-style − flat goes +0.05 → −0.03 (made-up numbers shaped as the report's 60M → 120M)."""
    SHORT = {"none": 0.40, "flat": 0.0, "engram": 0.05, "pagegram_s4": 0.0, "pagegram_s8": 0.02}
    LONG = {"none": 0.10, "flat": 0.0, "engram": -0.03, "pagegram_s4": 0.0}

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.d = self.tmp.name
        self.short = {(v, s): 3.5 + off + 0.01 * s + 0.003 * ((i + s) % 2)
                      for i, (v, off) in enumerate(self.SHORT.items()) for s in range(3)}
        self.long = {(v, s): 3.3 + off + 0.01 * s - 0.002 * ((i * s) % 3)
                     for i, (v, off) in enumerate(self.LONG.items()) for s in range(3) if (v, s) != ("engram", 2)}
        self.s2 = write_regime_sweep(self.d, "regime_stage2", STAGE2_SWEEP, self.short)
        self.t2 = write_regime_sweep(self.d, "regime_table2", TABLE2_SWEEP, self.long,
                                     extra=[("train", "tokens", 15007744)])

    def tearDown(self):
        self.tmp.cleanup()

    def run_report(self, *args):
        r = subprocess.run([sys.executable, REPORT, *args, "--out", "o"], cwd=self.d, capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(os.path.join(self.d, "o", "README.md")) as f:
            return f.read()

    def test_budget_section(self):
        md = self.run_report(self.t2, "--compare-budget", self.s2)
        self.assertIn("## Regime-matched Table 2 (issue 13)", md)
        self.assertIn("## Budget: regime_stage2 (7.50M tokens) vs regime_table2 (15.01M tokens)", md)
        self.assertIn("*Configs:* the two sweeps' runs agree on every config key both record", md)
        budget = md.split("## Budget:", 1)[1]
        g1 = [self.short[("none", s)] - self.short[("pagegram_s4", s)] for s in range(3)]
        g2 = [self.long[("none", s)] - self.long[("pagegram_s4", s)] for s in range(3)]
        gain = row(budget, "memory gain of PageGram S=4 (none − PageGram)")
        self.assertEqual(gain[1:5], ["3", f"{np.mean(g1):+.4f}", f"{np.mean(g2):+.4f}",
                                     f"{np.mean(g2) - np.mean(g1):+.4f}"])
        self.assertEqual(gain[5], report.fp(report.paired_t(np.array(g2) - np.array(g1))[1]))
        self.assertEqual(gain[6:], ["3/3", "0.40 → 0.095"])
        self.assertLess(float(gain[4].replace("−", "-")), -0.25)  # the gain falls
        # engram-s2 of regime_table2 has no record: contrasts with Engram-style on seeds 0 and 1
        e = row(budget, "Engram-style − flat (negative: Engram-style better)")
        d1 = np.mean([self.short[("engram", s)] - self.short[("flat", s)] for s in range(2)])
        d2 = np.mean([self.long[("engram", s)] - self.long[("flat", s)] for s in range(2)])
        self.assertEqual(e[1:5], ["2", f"{d1:+.4f}", f"{d2:+.4f}", f"{d2 - d1:+.4f}"])
        self.assertEqual(e[6:], ["0/2", "+0.074 → −0.034"])  # Engram-style catches up: the sign flips
        # the regime table compares with the report's 2x budget (its Table 2), not with its 1x quantities
        self.assertEqual(row(md, "optimizer steps")[-1], "120M / 131,072 = 915.5")
        self.assertEqual(row(md, "table params per training token")[-1], "200M / 120M = 1.67")
        self.assertEqual(row(md, "lookups per row over the run")[-1], "≈614")
        self.assertEqual(row(self.run_report(self.s2), "optimizer steps")[-1], "60M / 131,072 = 457.8")
        # regime_table2's own section: Table 2's pairs and report numbers, throughput, Fig. 1b at 120M
        self.assertTrue(row(md, "pagegram_s4 − none")[-1].startswith("memory gain falls from 0.40 (60M) to 0.095"))
        self.assertEqual(row(md, "engram − flat")[-1], "−0.034 (Engram-style beats flat)")
        self.assertNotIn("| none − flat |", md)  # not every pair: Table 2's
        self.assertIn("### Throughput", md)
        self.assertIn("hollow markers = the report's final difference to flat (120M tokens, 3 seeds)", md)
        self.assertNotIn("### Stability", md)

    def test_budget_flags_a_different_setup(self):
        """A short budget from another preset (here 4 layers): the section names the keys that differ."""
        d = os.path.join(self.d, "experiments", "regime_stage2")
        with open(os.path.join(d, "base.yaml"), "w") as f:
            f.write(RECORD_BASE.replace("gate_init: 0.5", "gate_init: 0.3"))
        write_expansion(os.path.join(d, "sweep.yaml"))
        t = os.path.join(d, "records")
        for fn in os.listdir(t):
            if fn != "expansion.json":
                os.remove(os.path.join(t, fn))
        for (v, s), x in self.short.items():
            write_record(t, f"{v}-s{s}", v, s, x)
        md = self.run_report(self.t2, "--compare-budget", self.s2)
        self.assertIn("**Not the same setup besides the budget (1 keys):** memory.gate_init 0.3 → 0.5.", md)
        self.assertIn("memory gain of PageGram S=4 (none − PageGram)", md)  # the contrasts are still given


# The factor screening (experiments/regime_factors/sweep.yaml's shape): flat and Engram-style per factor level.
FACTOR_SWEEP = """
name: regime_factors
description: "factor screening test"
base: base.yaml
seeds: [0, 1]
variants:
  flat: {memory.layout: flat}
  engram: {memory.layout: engram}
  flat_bf16: {memory.layout: flat, train.precision: bf16}
  engram_bf16: {memory.layout: engram, train.precision: bf16}
  engram_r21: {memory.layout: engram, memory.head_dim: 21}
  flat_batch2x: {memory.layout: flat, train.tokens_per_step: 32768}
  engram_batch2x: {memory.layout: engram, train.tokens_per_step: 32768}
"""


def screening(md):
    """{level: cells} of the factor screening table (the rows under its heading)."""
    part = md.split("### Factor screening", 1)[1].split("\n\n", 2)[1]
    cells = [[c.strip() for c in line.strip().strip("|").split("|")] for line in part.splitlines()[2:]]
    return {c[1]: c for c in cells}


class CommittedConstants(unittest.TestCase):
    def test_stage_differences_match_the_records(self):
        """The screening note's stage-1-rerun and stage-2 Engram-style − flat come from the committed records."""
        for const, sweep in ((report.STAGE1_RERUN_DIFF, "regime_stage1"), (report.STAGE2_DIFF, "regime_stage2")):
            with contextlib.chdir(os.path.dirname(HERE)):
                sw = report.Sweep(f"experiments/{sweep}/sweep.yaml")
            st = report.pair_stats(sw, "engram", "flat")
            self.assertEqual(len(st["diffs"]), const["seeds"], sweep)
            self.assertAlmostEqual(st["mean"], const["mean"], delta=5e-5, msg=sweep)
            self.assertAlmostEqual(st["sd"], const["sd"], delta=5e-5, msg=sweep)


class ClaimsIndex(unittest.TestCase):
    def test_verdicts(self):
        st = lambda mean, p, lo, hi, n=5: dict(mean=mean, p_t=p, ci=(lo, hi), diffs=[0.0] * n)
        self.assertEqual(report.claim_verdict(st(-0.06, 0.01, -0.09, -0.03), -0.067), "reproduced")
        self.assertEqual(report.claim_verdict(st(-0.02, 0.01, -0.03, -0.01), -0.067), "same sign, smaller")
        self.assertEqual(report.claim_verdict(st(-0.8, 0.001, -0.85, -0.75), -0.40), "same sign, larger")
        self.assertEqual(report.claim_verdict(st(-0.01, 0.3, -0.03, 0.01), 0.074), "not reproduced")
        self.assertEqual(report.claim_verdict(st(0.02, 0.01, 0.01, 0.03), -0.067), "not reproduced")
        self.assertEqual(report.claim_verdict(st(-0.01, 0.6, -0.09, 0.07), -0.024), "inconclusive")
        self.assertEqual(report.claim_verdict(st(-0.01, 0.6, -0.09, 0.07), None), "no report number")
        self.assertEqual(report.claim_verdict(st(-0.01, float("nan"), 0, 0, n=1), -0.067), "pending")

    def test_index_keeps_its_head_and_reads_the_records(self):
        with tempfile.TemporaryDirectory() as d:
            finals = {(v, s): 3.0 + o + 0.01 * s + 0.003 * ((s + i) % 3)
                      for i, (v, o) in enumerate({"none": 0.8, "flat": 0.0, "engram": -0.01,
                                                  "pagegram_s1": 0.0, "pagegram_s4": -0.06,
                                                  "pagegram_s8": 0.0}.items()) for s in range(3)}
            write_regime_sweep(d, "regime_stage2", STAGE2_SWEEP, finals)
            path = os.path.join(d, "experiments", "README.md")
            with open(path, "w") as f:
                f.write("# Mine\n\nhand-written\n\n" + report.INDEX_MARKER + "\nold table\n")
            r = subprocess.run([sys.executable, REPORT, "--index", path], capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, r.stderr)
            with open(path) as f:
                md = f.read()
            self.assertTrue(md.startswith("# Mine\n\nhand-written\n\n" + report.INDEX_MARKER))
            self.assertNotIn("old table", md)
            d4 = [finals[("pagegram_s4", s)] - finals[("flat", s)] for s in range(3)]
            cells = row(md, "Table 1: PageGram S=4 beats flat")
            self.assertEqual(cells[1:4], ["-0.067", f"{np.mean(d4):+.4f} ({report.fci(report.mean_ci(d4))})", "3"])
            self.assertEqual(row(md, "Table 1 at d 384 (issue 38 A): Engram-style − flat")[5], "pending (no records yet)")
            self.assertEqual(row(md, "Fig. 3: S ≥ 8 and Engram-style stall on seed 1 (regime_stage2)")[2],
                             "0 of 18 runs stall")


class FactorScreening(unittest.TestCase):
    # Final held-out losses {(variant, seed): loss}: seeds 0 and 1 for the base and bf16 pairs, seed 0 for the rest;
    # engram_batch2x has no record (pending), nor flat_batch2x-s1.
    FINALS = {("flat", 0): 3.50, ("engram", 0): 3.51, ("flat", 1): 3.52, ("engram", 1): 3.50,
              ("flat_bf16", 0): 3.48, ("engram_bf16", 0): 3.50, ("flat_bf16", 1): 3.49, ("engram_bf16", 1): 3.48,
              ("engram_r21", 0): 3.55, ("flat_batch2x", 0): 3.60}

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.d = self.tmp.name
        t = os.path.join(self.d, "experiments", "regime_factors")
        os.makedirs(t)
        with open(os.path.join(t, "base.yaml"), "w") as f:
            f.write(RECORD_BASE)
        with open(os.path.join(t, "sweep.yaml"), "w") as f:
            f.write(FACTOR_SWEEP)
        write_expansion(os.path.join(t, "sweep.yaml"))
        for (v, s), x in self.FINALS.items():  # each level's keys come from the expansion (the variants set them)
            write_record(os.path.join(t, "records"), f"{v}-s{s}", v, s, x,
                         add=() if "bf16" in v else (("train", "precision", "fp32"),))
        r = subprocess.run([sys.executable, REPORT, "experiments/regime_factors/sweep.yaml", "--out", "o"], cwd=self.d,
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(os.path.join(self.d, "o", "README.md")) as f:
            self.md = f.read()
        self.rows = screening(self.md)

    def tearDown(self):
        self.tmp.cleanup()

    def diff(self, eng, flat, s):
        return self.FINALS[(eng, s)] - self.FINALS[(flat, s)]

    def test_pairing_rule(self):
        pairs = report.factor_pairs(["flat", "engram", "flat_bf16", "engram_bf16", "engram_r21", "flat_only"])
        self.assertEqual([(p["suffix"], p["engram"], p["flat"], p["vs_base"]) for p in pairs],
                         [("", "engram", "flat", False), ("bf16", "engram_bf16", "flat_bf16", False),
                          ("r21", "engram_r21", "flat", True), ("only", None, "flat_only", False)])
        self.assertEqual(report.factor_pairs(["engram_r21", "engram", "flat"])[0]["suffix"], "")  # base first
        self.assertEqual(self.rows["r 21"][:3], ["W_V compression", "r 21", "engram_r21 − flat (vs base flat)"])
        self.assertEqual(self.rows["bf16"][:3], ["precision", "bf16", "engram_bf16 − flat_bf16"])
        self.assertEqual(self.rows["base"][2], "engram − flat")
        self.assertEqual(list(self.rows), ["base", "bf16", "r 21", "batch 2x"])

    def test_differences_and_change_vs_base(self):
        base = {s: self.diff("engram", "flat", s) for s in (0, 1)}
        bf16 = {s: self.diff("engram_bf16", "flat_bf16", s) for s in (0, 1)}
        r = self.rows["base"]
        self.assertEqual(r[4:11], [f"{np.mean([3.50, 3.52]):.4f}", f"{np.mean([3.51, 3.50]):.4f}",
                                   f"{np.mean(list(base.values())):+.4f}", "2", "(reference)", "no (ahead)", "—"])
        # bf16, 2 seeds: mean difference +0.005, change paired over seeds 0 and 1: +0.010 (below the threshold)
        r = self.rows["bf16"]
        self.assertEqual(r[6:11], [f"{np.mean(list(bf16.values())):+.4f}", "2",
                                   f"{np.mean([bf16[s] - base[s] for s in (0, 1)]):+.4f}", "yes (trails)", "no"])
        self.assertEqual(r[6], "+0.0050")
        self.assertEqual(r[8], "+0.0100")
        # r21, seed 0, against the base flat run: +0.05; change vs base +0.04 (over the threshold: worth seeds 1-2)
        r = self.rows["r 21"]
        d = self.diff("engram_r21", "flat", 0)
        self.assertEqual(r[4:11], ["3.5000", "3.5500", f"{d:+.4f}", "1", f"{d - base[0]:+.4f}", "yes (trails)",
                                   "**yes**"])
        self.assertEqual(r[8], "+0.0400")
        self.assertIn(f"exceeds {report.SCREEN_THRESHOLD:.2f} nats either way", self.md)
        # the regime each factor moves
        self.assertEqual(r[3], "rows/head 24,414 → 74,405; lookups/row/step 0.67 → 0.22; lookups/row/run 307 → 101; "
                               "W_V 8.0 : 1 → 2.6 : 1")
        self.assertEqual(self.rows["bf16"][3], "precision fp32 → bf16")
        # the screening table replaces the every-pair table; the final-loss table and stalls stay
        self.assertNotIn("### Paired differences", self.md)
        self.assertEqual(row(self.md, "engram_bf16")[1], "2")
        self.assertIn("### Stalls", self.md)

    def test_missing_run_is_pending(self):
        r = self.rows["batch 2x"]
        self.assertEqual(r[4:11], ["3.6000", "·", "pending", "0", "pending", "—", "—"])
        # its regime from the base run's config with the sweep file's overrides (no record of engram_batch2x)
        self.assertEqual(r[3], "steps 458 → 229; tokens/step 16,384 → 32,768; lookups/row/step 0.67 → 1.34")
        self.assertIn("engram_batch2x-s0 (no record)", self.md)
        self.assertIn("engram_r21-s1 (no record)", self.md)


class Stalls(unittest.TestCase):
    STEPS = np.arange(12) * 46

    def others(self):
        return [(self.STEPS, 3.0 + o + 3.0 * 0.7 ** np.arange(12)) for o in (0.0, 0.02, -0.01, 0.03)]

    def test_a_run_that_stalls(self):
        loss = 3.0 + 3.0 * 0.7 ** np.arange(12)
        loss[4:] = loss[4]
        st = report.stall_from(self.STEPS, loss, self.others())
        self.assertEqual((st["step"], st["gain"]), (4 * 46, 0.0))

    def test_a_run_that_does_not(self):
        self.assertIsNone(report.stall_from(self.STEPS, 3.01 + 3.0 * 0.7 ** np.arange(12), self.others()))

    def test_noise(self):
        rng = np.random.default_rng(3)
        # noisy (sd 0.01 nats, as large as delta) but improving like the others: not a stall, whatever the noise
        for _ in range(50):
            loss = 3.01 + 3.0 * 0.7 ** np.arange(12) + rng.normal(0, 0.01, 12)
            self.assertIsNone(report.stall_from(self.STEPS, loss, self.others()))
        # a noisy plateau (sd 0.002) from the 5th evaluation is one
        loss = 3.0 + 3.0 * 0.7 ** np.arange(12)
        loss[4:] = loss[4]
        st = report.stall_from(self.STEPS, loss + rng.normal(0, 0.002, 12), self.others())
        self.assertIsNotNone(st)
        self.assertLessEqual(st["step"], 5 * 46)

    def test_every_run_flattening_is_no_stall(self):
        flat_end = [(s, np.minimum(l, l[6])) for s, l in self.others()]
        loss = flat_end[0][1] + 0.01
        self.assertIsNone(report.stall_from(self.STEPS, loss, flat_end[1:]))


class ReportNumbers(unittest.TestCase):
    def test_report_numbers_have_one_home(self):
        """The figures' report values and the tables' report column come from REPORT_NUM."""
        self.assertEqual(report.report_diffs("table1", "flat"), {"pagegram_s4": -0.067, "engram": 0.074})
        self.assertEqual(report.report_diffs("regime_stage1", "flat"), report.report_diffs("table1", "flat"))
        self.assertEqual(report.report_diffs("table2", "flat"), {"pagegram_s4": -0.024, "engram": -0.034})
        self.assertEqual(report.report_diffs("table4_s_sweep", "flat"), {})
        pairs = {(a, b): t for a, b, t in report.REPORT["table1"]["pairs"]}
        self.assertTrue(pairs[("pagegram_s4", "flat")].startswith("−0.067 "))
        self.assertTrue(pairs[("flat", "engram")].startswith("−0.074 "))  # the report's +0.074 the other way round
        self.assertEqual(report.rnum("iobench", ("pagegram", 64)), 119000.0)
        self.assertEqual(report.BUDGET_CONTRASTS[0][3], "0.40 → 0.095")


# ------------------------------------------------------------------------------------------------------------
# Figures: synthetic inputs with known numbers; the axes' data is checked (the figure functions return the figure).


def lines(ax):
    """{label: Line2D} of an axes' labelled lines."""
    return {ln.get_label(): ln for ln in ax.get_lines() if not ln.get_label().startswith("_")}


def has_zero_line(ax):
    return any(len(ln.get_ydata()) and np.all(np.asarray(ln.get_ydata(), float) == 0.0) and ln.get_linestyle() == "-"
               and not ln.get_label().startswith("seed") for ln in ax.get_lines())


def report_lines(ax):
    return {k: v for k, v in lines(ax).items() if k.startswith("report")}


S_VARIANTS = [("pagegram_s1", 1), ("pagegram_s4", 4), ("pagegram_s8", 8), ("pagegram_s15", 15), ("pagegram_s60", 60),
              ("engram", 0)]


def write_s_sweep(root, finals):
    """Table 4's shape: PageGram S in {1, 4, 8, 15, 60} and Engram-style; finals {(variant, seed): loss}."""
    def slots(cfg, v):
        cfg["memory"]["slots"] = dict(S_VARIANTS)[v] or 4
    return write_sweep(root, "table4_s_sweep", 2_500_000, finals, variants=[v for v, _ in S_VARIANTS],
                       configure=slots)


def write_flashsim(path, layouts, sizes, caches, reads):
    """A `pagegram flashsim --out` file: one row per (layout, size, cache); reads(layout, size, cache)."""
    rows = [(lab, sz, cb) for lab in layouts for sz in sizes for cb in caches]
    with h5py.File(path, "w") as f:
        f.attrs["revision"], f.attrs["command"], f.attrs["stream"] = "test", "flashsim --test", "synthetic"
        g = f.create_group("flashsim")
        g.attrs["layouts"] = ",".join(r[0] for r in rows)
        g["target_params"] = np.array([r[1] for r in rows], dtype=float)
        g["cache_bytes"] = np.array([r[2] for r in rows], dtype=np.int64)
        g["reads_per_token"] = np.array([reads(*r) for r in rows], dtype=float)


def write_iobench(path, attrs):
    """A `pagegram iobench --out` file: flat / engram / pagegram(S=4) at depths 1, 4, 16, 64."""
    rows = [(lab, d) for lab in ("flat", "engram", "pagegram(S=4)") for d in (1, 4, 16, 64)]
    with h5py.File(path, "w") as f:
        f.attrs["revision"], f.attrs["command"], f.attrs["stream"] = "test", "iobench --test", "synthetic"
        for k, v in attrs.items():
            f.attrs[k] = v
        g = f.create_group("iobench")
        g.attrs["layouts"] = ",".join(r[0] for r in rows)
        g["depth"] = np.array([r[1] for r in rows], dtype=np.int64)
        g["lookups_per_second"] = np.array([(500.0 if lab == "engram" else 4000.0) * d ** 0.5 for lab, d in rows])
        g["read_p50_us"] = np.array([80.0 + 10 * d for _, d in rows])


class Figures(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.d = self.tmp.name

    def tearDown(self):
        self.tmp.cleanup()

    def test_fig1b_own_axes_zero_line_and_report_markers(self):
        finals = {}
        for s in range(3):
            for v, off in (("none", 0.7), ("flat", 0.0), ("engram", -0.02 - 0.01 * s),
                           ("pagegram_s4", -0.05 + 0.01 * s)):
                finals[(v, s)] = 3.5 + 0.01 * s + off
        sw = report.Sweep(write_sweep(os.path.join(self.d, "t1"), "table1", 2_500_000, finals))
        png = os.path.join(self.d, "fig1b.png")
        fig = report.fig_diff_to(sw, sw.variants, "flat", png, "Fig. 1b", report.report_diffs("table1", "flat"),
                                 "report (60M tokens)")
        self.assertTrue(os.path.getsize(png) > 0)
        axes = {ax.get_title().split(" (")[0]: ax for ax in fig.axes}
        self.assertEqual(sorted(axes), ["engram − flat", "none − flat", "pagegram_s4 − flat"])
        for v, want in (("pagegram_s4", -0.067), ("engram", 0.074)):
            ax = axes[f"{v} − flat"]
            self.assertTrue(has_zero_line(ax), v)
            (label, ln), = report_lines(ax).items()
            self.assertEqual(list(ln.get_ydata()), [want])
            self.assertEqual(ln.get_marker(), "D")
            self.assertEqual(ln.get_markerfacecolor(), "none")  # hollow
            ours = next(l for k, l in lines(ax).items() if k.startswith("ours"))
            want_ours = np.mean([finals[(v, s)] - finals[("flat", s)] for s in range(3)])
            self.assertAlmostEqual(ours.get_ydata()[0], want_ours)
            self.assertEqual(ln.get_xdata()[0], ours.get_xdata()[0])  # the report's final at the end of our run
            lo, hi = ax.get_ylim()
            self.assertTrue(lo < min(want, 0) and hi > max(want, 0) and hi - lo < 0.5)  # a difference scale
        self.assertEqual(report_lines(axes["none − flat"]), {})  # the report gives no number for none − flat
        # the same figure from the command line, with its caption
        subprocess.run([sys.executable, REPORT, os.path.join(self.d, "t1", "sweep.json"), "--out",
                        os.path.join(self.d, "o")], check=True, capture_output=True)
        with open(os.path.join(self.d, "o", "README.md")) as f:
            md = f.read()
        self.assertIn("![Fig. 1b](table1-fig1b-diff-to-flat.png)", md)
        self.assertIn("hollow markers = the report's final difference to flat (60M tokens, 5 seeds)", md)

    def test_fig3_means_spread_and_paired_view(self):
        rng = np.random.default_rng(5)
        finals = {(v, s): 3.5 + 0.003 * S + 0.02 * s + 0.005 * rng.standard_normal() for v, S in S_VARIANTS
                  for s in range(3)}
        del finals[("pagegram_s60", 2)]  # one run missing: seed 2 has no S=60 point
        sw = report.Sweep(write_s_sweep(os.path.join(self.d, "t4"), finals))
        png = os.path.join(self.d, "fig3.png")
        fig = report.fig_s_sweep(sw, png, "Fig. 3")
        self.assertTrue(os.path.getsize(png) > 0)
        ax, axp, ax2 = fig.axes[:3]
        cats = ["pagegram_s1", "pagegram_s4", "pagegram_s8", "pagegram_s15", "pagegram_s60", "engram"]
        self.assertEqual([t.get_text() for t in ax.get_xticklabels()],
                         ["S=1", "S=4", "S=8", "S=15", "S=60", "Engram-\nstyle"])
        # (a) mean and sd per category (errorbar), each seed's points
        eb = ax.containers[0]
        vals = [[finals[(v, s)] for s in range(3) if (v, s) in finals] for v in cats]
        np.testing.assert_allclose(np.asarray(eb.lines[0].get_ydata(), float), [np.mean(x) for x in vals])
        segs = eb.lines[2][0].get_segments()
        np.testing.assert_allclose([seg[1][1] - seg[0][1] for seg in segs], [2 * np.std(x, ddof=1) for x in vals])
        np.testing.assert_allclose(lines(ax)["seed 2"].get_ydata(), [finals[(v, 2)] for v in cats if (v, 2) in finals])
        # (b) per-seed differences to the same seed's S=4, lines per seed, zero line, mean
        self.assertTrue(has_zero_line(axp))
        for s in range(3):
            want = [finals[(v, s)] - finals[("pagegram_s4", s)] for v in cats if (v, s) in finals]
            np.testing.assert_allclose(lines(axp)[f"seed {s}"].get_ydata(), want)
            self.assertNotEqual(lines(axp)[f"seed {s}"].get_linestyle(), "None")
        self.assertEqual(len({(lines(axp)[f"seed {s}"].get_marker(), lines(axp)[f"seed {s}"].get_linestyle())
                              for s in range(3)}), 3)
        mean = lines(axp)["mean difference"].get_ydata()
        self.assertAlmostEqual(mean[4], np.mean([finals[("pagegram_s60", s)] - finals[("pagegram_s4", s)]
                                                 for s in range(2)]))
        self.assertEqual(mean[1], 0.0)
        self.assertTrue(has_zero_line(ax2))

    def test_fig4a_without_colour_and_report_markers(self):
        path = os.path.join(self.d, "fs.h5")
        sizes, caches = (3.2e9, 20e9), (0, 2 ** 28, 2 ** 30)
        write_flashsim(path, ["flat", "engram", "pagegram(S=4)"], sizes, caches,
                       lambda lab, sz, cb: (16.0 if lab == "engram" else 2.0) / (1 + cb / 2 ** 28 * 3.2e9 / sz))
        out = os.path.join(self.d, "o")
        os.makedirs(out)
        md = report.flashsim_section(path, out, "")
        self.assertTrue(os.path.exists(os.path.join(out, "fig4a-reads-per-token.png")))
        self.assertIn("no cache 2 reads/token (PageGram, flat) vs 16 (Engram-style); 20B with a 1 GiB cache: 0.99", md)
        rows = {}
        with h5py.File(path) as f:
            labels, c, n = report._columns(f["flashsim"])
        for i in range(n):
            rows.setdefault((labels[i], float(c["target_params"][i])), []).append(
                (float(c["cache_bytes"][i]), float(c["reads_per_token"][i])))
        fig = report.fig_flash_reads(rows, sorted(map(float, caches)), os.path.join(self.d, "f.png"), "4a")
        ax = fig.axes[0]
        ours = {k: v for k, v in lines(ax).items() if not k.startswith("report")}
        self.assertEqual(len(ours), 6)
        styles = {(ln.get_marker(), ln.get_linestyle()) for ln in ours.values()}
        self.assertEqual(len(styles), 6)  # every series differs in marker or line style, not only in colour
        self.assertEqual(len({ln.get_marker() for ln in ours.values()}), 3)  # one marker per layout
        self.assertEqual(len({ln.get_linestyle() for ln in ours.values()}), 2)  # one line style per size
        rep = report_lines(ax)
        by = {k.split(": ", 1)[1].rsplit(":", 1)[0]:
              ([float(x) for x in v.get_xdata()], [float(y) for y in v.get_ydata()], v) for k, v in rep.items()}
        self.assertEqual(by["engram, 20.0B, 1 GiB"][:2], ([2.0], [9.18]))  # x: the 1 GiB tick
        self.assertEqual(by["pagegram, 20.0B, 1 GiB"][:2], ([2.0], [0.99]))
        self.assertEqual(by["engram, every size, no cache"][:2], ([0.0], [16.0]))
        self.assertEqual(by["flat, every size, no cache"][:2], ([0.0], [2.0]))
        self.assertEqual(by["engram, 20.0B, 1 GiB"][2].get_marker(), ours["engram, 20.0B"].get_marker())
        self.assertEqual(by["engram, 20.0B, 1 GiB"][2].get_markerfacecolor(), "none")

    def test_fig4b_names_table_size_and_disk(self):
        seen = []
        orig = report.fig_iobench

        def spy(rows, path, title):
            fig = orig(rows, path, title)
            seen.append((title, fig))
            return fig
        out = os.path.join(self.d, "o")
        os.makedirs(out)
        report.fig_iobench = spy
        try:
            for attrs, disk, want in (({"table_params": "2B"}, None, "table of 2B params, disk unknown (not recorded "
                                                                      "in the file)"),
                                      ({}, None, "table size unknown, disk unknown"),
                                      ({"table_params": 2e9}, "virtio vda", "table of 2.0B params, disk virtio vda "
                                                                            "(stated with --iobench-disk"),
                                      ({"table_params": "2B", "disk": "nvme0n1"}, "ignored",
                                       "2B params, disk nvme0n1")):
                path = os.path.join(self.d, "io.h5")
                write_iobench(path, attrs)
                md = report.iobench_section(path, out, "", disk)
                self.assertIn(want, seen[-1][0])
                self.assertIn(want, md)
                self.assertTrue(os.path.exists(os.path.join(out, "fig4b-lookups-per-second.png")))
        finally:
            report.fig_iobench = orig
        ax, axl = seen[-1][1].axes[:2]
        rep = report_lines(ax)
        got = sorted((list(v.get_xdata()), list(v.get_ydata())) for v in rep.values())
        self.assertEqual(got, [([64], [17000.0]), ([64], [119000.0])])
        (lat,) = report_lines(axl).values()
        self.assertEqual((list(lat.get_xdata()), list(lat.get_ydata())), ([1], [60.0]))
        ours = [v for k, v in lines(ax).items() if not k.startswith("report")]
        self.assertEqual(len({(ln.get_marker(), ln.get_linestyle()) for ln in ours}), 3)
        # from the command line: --iobench-disk reaches the figure and the text
        r = subprocess.run([sys.executable, REPORT, "--iobench", path, "--iobench-disk", "test disk", "--out", out],
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(os.path.join(out, "README.md")) as f:
            self.assertIn("disk nvme0n1", f.read())  # the file's own record wins

    def test_lr_grid_report_best(self):
        finals = {("flat", "10"): 3.9, ("flat", "70"): 3.7, ("flat", "200"): 3.8, ("pagegram_s4", "10"): 3.6}
        sw = report.Sweep(write_grid_sweep(os.path.join(self.d, "t8"), finals))
        fig = report.fig_lr_grid(sw, os.path.join(self.d, "lr.png"), "lr")
        (ln,) = report_lines(fig.axes[0]).values()
        self.assertEqual(list(ln.get_xdata()), [70.0, 70.0])
        ours = [v for k, v in lines(fig.axes[0]).items() if not k.startswith("report")]
        self.assertEqual(len({(l.get_marker(), l.get_linestyle()) for l in ours}), 2)


class ThroughputTable(unittest.TestCase):
    def test_median_and_fastest_run_so_one_starved_run_does_not_move_it(self):
        runs = [("a", 1000.0), ("a", 1100.0), ("a", 100.0), ("b", 500.0), ("b", 550.0), ("b", float("nan"))]
        sw = types.SimpleNamespace(done=[{"variant": v, "tok_per_s": t} for v, t in runs])
        md = report.throughput_table(sw, ["a", "b", "c"])
        self.assertIn("| a | 3 | 1,000 | 1,100 | +0.0% |", md)
        self.assertIn("| b | 2 | 525 | 550 | -47.5% |", md)
        self.assertNotIn("| c |", md)


if __name__ == "__main__":
    unittest.main()
