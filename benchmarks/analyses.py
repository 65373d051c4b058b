"""Speed of every analysis on a ~4M-event trace (the loader is not timed here; see ingest.py).

    .venv/bin/python benchmarks/analyses.py                 # owlv2 trace x32 (4.2 M events)
    .venv/bin/python benchmarks/analyses.py --copies 8      # smaller
    .venv/bin/python benchmarks/analyses.py --semantics hta

The large trace is a real one (the H100 owlv2 trace from ../shared/traces, else tests/data's MI300X trace)
loaded once and its tables repeated in memory: per copy, times are shifted past the previous copy and
correlation / op ids offset, so links stay one-to-one. Prints the median seconds of ``--repeat`` runs.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
SOURCE = (
    ROOT.parent / "shared" / "traces" / "tracelens_h100_owlv2" / "google_owlv2-large-patch14-ensemble__1016001.json.gz"
)
FALLBACK = ROOT / "tests" / "data" / "gpu" / "mi300x_sglang.json.gz"
FUNCS = (
    "op_breakdown",
    "kernel_breakdown",
    "temporal_breakdown",
    "idle_breakdown",
    "launch_stats",
    "comm_overlap",
    "copy_stats",
    "sync_audit",
    "stragglers",
    "step_breakdown",
    "analytic_work",
)
TIME_COLS = ("ts_us", "end_us", "launch_ts_us")
ID_COLS = ("correlation", "external_id")
INDEX_COLS = {"parent": "cpu_ops", "op_index": "cpu_ops", "runtime_index": "runtime"}


def repeat_trace(trace, copies: int):
    from workbench.api.trace import Trace

    span = trace.span_us() + 1000.0
    max_id = (
        max(
            int(pd.to_numeric(t[c], errors="coerce").max())
            for t in trace._tables.values()
            for c in ID_COLS
            if c in t.columns and len(t)
        )
        + 1
    )
    sizes = {name: len(t) for name, t in trace._tables.items()}
    tables = {name: _repeat(t, copies, span, max_id, sizes) for name, t in trace._tables.items()}
    return Trace(tables, trace.meta)


def _repeat(t: pd.DataFrame, copies: int, span: float, max_id: int, sizes: dict) -> pd.DataFrame:
    parts = []
    for i in range(copies):
        p = t.copy()
        for c in TIME_COLS:
            if c in p.columns:
                p[c] = p[c] + i * span
        for c in ID_COLS:
            if c in p.columns:
                p[c] = np.where(p[c] >= 0, p[c] + i * max_id, p[c])
        for c, target in INDEX_COLS.items():
            if c in p.columns:
                p[c] = np.where(p[c] >= 0, p[c] + i * sizes[target], p[c])
        if "step" in p.columns and "name" in p.columns:  # ProfilerStep#N -> a new N per copy
            names = p["name"].astype(str)
            is_step = names.str.startswith("ProfilerStep#")
            p["name"] = np.where(is_step, "ProfilerStep#" + (p["step"] + i * 1000).astype(str), names)
        parts.append(p)
    out = pd.concat(parts, ignore_index=True)
    for c in t.columns:  # keep categoricals categorical (concat of differing categories gives object)
        if isinstance(t[c].dtype, pd.CategoricalDtype) and not isinstance(out[c].dtype, pd.CategoricalDtype):
            out[c] = out[c].astype("category")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--copies", type=int, default=32)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--semantics", default="workbench")
    args = parser.parse_args()
    import workbench as wb
    import workbench.analysis as wb_analysis

    source = SOURCE if SOURCE.exists() else FALLBACK
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        base = wb.load_trace(source)
    t0 = time.perf_counter()
    trace = repeat_trace(base, args.copies)
    print(
        f"{source.name} x{args.copies}: {trace.event_count():,} events ({len(trace.kernels):,} GPU, "
        f"{len(trace.cpu_ops):,} CPU ops, {len(trace.runtime):,} runtime); built in "
        f"{time.perf_counter() - t0:.1f} s; semantics={args.semantics}"
    )
    total = 0.0
    for name in FUNCS:
        times = []
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            getattr(wb_analysis, name)(trace, args.semantics)
            times.append(time.perf_counter() - t0)
        median = statistics.median(times)
        total += median
        print(f"  {name:20s} median {median:6.2f} s  (min {min(times):.2f}, n={len(times)})")
    print(f"  {'all analyses':20s} {total:6.2f} s")


if __name__ == "__main__":
    main()
