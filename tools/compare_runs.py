#!/usr/bin/python3
"""Bit-for-bit comparison of two runs' checkpoint.h5 and log.h5 (a refactor must leave both unchanged).

    tools/compare_runs.py RUN_DIR_A RUN_DIR_B

Every dataset of both files is compared byte for byte, except the timing columns (train/elapsed_s,
train/tok_per_s); file attributes are compared except those naming the build or the time (revision, kernels, cpu,
command, elapsed_s, threads, pinned, cpus, ranks, started, hostname), the config's out_dir and table_sharding, and the
summary group's timing fractions. A table sharded by rows is compared through its checkpoint's virtual datasets (the
shard files beside it); its bookkeeping (memory/table/shard_bounds) is not compared. Prints one line
per file and exits 1 on any difference, naming it.
"""
import re
import sys

import h5py
import numpy as np

TIMING = {"train/elapsed_s", "train/tok_per_s"}
SHARDING = {"memory/table/shard_bounds"}  # how the ranks held the table (the same bits either way)
VOLATILE_ATTRS = {"revision", "kernels", "cpu", "command", "elapsed_s", "threads", "pinned", "cpus", "started",
                  "hostname", "host", "updated", "build_type", "compiler_flags", "revisions", "ranks"}


def datasets(f):
    out = {}
    f.visititems(lambda n, o: out.__setitem__(n, o) if isinstance(o, h5py.Dataset) else None)
    return out


def compare(pa, pb):
    diffs = []
    with h5py.File(pa, "r") as a, h5py.File(pb, "r") as b:
        da, db = datasets(a), datasets(b)
        for n in sorted(set(da) | set(db)):
            if n in TIMING or n in SHARDING:
                continue
            if n not in da or n not in db:
                diffs.append(f"{n}: only in {'A' if n in da else 'B'}")
                continue
            x, y = da[n][()], db[n][()]
            if x.dtype != y.dtype or x.shape != y.shape or np.asarray(x).tobytes() != np.asarray(y).tobytes():
                diffs.append(f"{n}: differs ({x.dtype}{x.shape} vs {y.dtype}{y.shape})")
        for k in sorted(set(a.attrs) | set(b.attrs)):
            if k in VOLATILE_ATTRS:
                continue
            va, vb = (str(x.attrs.get(k)) for x in (a, b))
            if k == "config":  # the run directory and how ranks hold the table (same bits) may differ
                va, vb = (re.sub(r"(?m)^  (out_dir|table_sharding): .*$", "", v) for v in (va, vb))
            if k not in a.attrs or k not in b.attrs or va != vb:
                diffs.append(f"attribute {k} differs")
        n_compared = len(set(da) & set(db) - TIMING - SHARDING)
    return diffs, n_compared


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: compare_runs.py RUN_DIR_A RUN_DIR_B")
    bad = False
    for name in ("checkpoint.h5", "log.h5"):
        diffs, n = compare(f"{sys.argv[1]}/{name}", f"{sys.argv[2]}/{name}")
        print(f"{name}: {n} datasets compared, {'identical' if not diffs else str(len(diffs)) + ' differ'}")
        for d in diffs:
            print("  " + d)
        bad |= bool(diffs)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
