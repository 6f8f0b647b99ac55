#!/usr/bin/python3
"""Tests of experiments/report.py on synthetic sweeps (run by ctest as `report_py`; or directly:
`/usr/bin/python3 experiments/test_report.py`). The logs follow README.md "Run log" with known final losses, so every
number the report prints can be checked against arithmetic done here."""
import json
import os
import re
import subprocess
import sys
import tempfile
import unittest

import h5py
import numpy as np
import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
REPORT = os.path.join(HERE, "report.py")
sys.path.insert(0, HERE)
import report  # noqa: E402

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


def write_sweep(root, name, tokens, finals, unfinished=()):
    """A sweep manifest + one log.h5 per (variant, seed) with the given final held-out loss."""
    os.makedirs(root, exist_ok=True)
    variants = sorted({v for v, _ in finals}, key=lambda v: ["none", "flat", "engram", "pagegram_s4"].index(v))
    seeds = sorted({s for _, s in finals})
    runs = []
    for (v, s), loss in finals.items():
        d = f"{v}-s{s}-0000abcd"
        runs.append(dict(name=f"{v}-s{s}", variant=v, seed=s, grid={}, dir=d, hash="0000abcd", overrides=[]))
        os.makedirs(os.path.join(root, d))
        cfg = json.loads(json.dumps(CONFIG))
        cfg["memory"]["layout"] = "none" if v == "none" else v.split("_")[0]
        cfg["train"]["tokens"], cfg["train"]["seed"] = tokens, s
        write_log(os.path.join(root, d), cfg, loss, "running" if (v, s) in unfinished else "finished")
    with open(os.path.join(root, "sweep.json"), "w") as f:
        json.dump(dict(format="pagegram-sweep", format_version=1, name=name, description="", spec=name + ".yaml",
                       base="base.yaml", seeds=seeds, variants=variants, grid={}, runs=runs), f)
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


if __name__ == "__main__":
    unittest.main()
