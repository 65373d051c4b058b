"""Rank folders (issue 14): an 8-rank folder against Holistic Trace Analysis, scaling over workers, a Dask
LocalCluster's results against the local load, and the caller's memory over 32 to 256 simulated ranks.

    .venv/bin/python benchmarks/rank_folders.py                 # 8 x ~130 MB of real events, then 256 ranks
    .venv/bin/python benchmarks/rank_folders.py --mb 20         # 8 smaller ranks (a quick look)
    .venv/bin/python benchmarks/rank_folders.py --part ranks    # only the 32..256-rank memory series

The 8 rank files repeat the TraceLens H100 owlv2 trace (timestamps and ids shifted per copy) to about
``--mb`` MB each, each with its ``distributedInfo`` written first (HTA reads a file's rank from its first
bytes). Each load runs in a fresh process (``benchmarks/ingest.py``'s runner), for workers=1 (one process,
no decode processes either), 2 and None (the default: one per core); printed: wall time of the load plus the
kernel, temporal and idle breakdowns, the CPU time of all processes, and the peak RSS of the calling process
alone (``RUSAGE_SELF``; the workers are other processes), also above its RSS once the modules are imported. The reference for the caller's memory: one rank's tables
(their bytes in memory) plus the summaries (their pickled bytes). Files go to benchmarks/out/ (git-ignored).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import ingest  # noqa: E402 (the benchmark's own runner and trace builder)

ROOT = ingest.ROOT
OUT = ingest.OUT
SMALL_SOURCE = ROOT / "tests" / "data" / "gpu" / "h100_bert_small.json.gz"

OURS = """
import sys, time, json, resource, warnings
warnings.simplefilter("ignore")
import workbench as wb
paths = json.loads(sys.argv[1]) if sys.argv[1].startswith("[") else sys.argv[1]
workers = None if sys.argv[2] == "None" else int(sys.argv[2])
import workbench.api.trace, workbench.api.rank_folder, workbench.trace.cache  # what any load imports: the baseline
base_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
t0 = time.perf_counter()
trace = wb.load_trace(paths, workers=workers, cache=False)
t1 = time.perf_counter()
results = [trace.kernel_breakdown(), trace.temporal_breakdown(), trace.idle_breakdown()]
t2 = time.perf_counter()
print(json.dumps({"load_s": t1 - t0, "load_cpu_s": time.process_time(), "analyses_s": t2 - t1,
                  "kind": type(trace).__name__, "ranks": len(trace.ranks),
                  "summary_bytes": trace.summary_bytes() if hasattr(trace, "summary_bytes") else 0,
                  "self_peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, "base_mb": base_mb}))
"""

ONE_RANK_TABLES = """
import sys, json, warnings
warnings.simplefilter("ignore")
from workbench.trace import read_trace
data = read_trace(sys.argv[1])
print(json.dumps({"table_mb": sum(int(t.memory_usage(deep=True).sum()) for t in data._tables.values()) / 2**20}))
"""

DASK = """
import sys, json, warnings
warnings.simplefilter("ignore")
import workbench as wb
from distributed import Client, LocalCluster
folder = sys.argv[1]
local = wb.load_trace(folder, workers=1, cache=False)
with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \\
        Client(cluster) as client:
    import time
    t0 = time.perf_counter()
    remote = wb.load_trace(folder, client=client, cache=False)
    t1 = time.perf_counter()
    same = {m: getattr(local, m)() == getattr(remote, m)() for m in ("temporal_breakdown", "kernel_breakdown", "idle_breakdown")}
print(json.dumps({"same": same, "dask_load_s": t1 - t0}))
"""

HTA = ingest.HTA


def build_folder(source: Path, ranks: int, mb: float, name: str) -> Path:
    """``ranks`` rank files of about ``mb`` MB of ``source``'s events, ``distributedInfo`` first."""
    folder = OUT / name
    done = folder / "done"
    if done.exists():
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    with gzip.open(source) as fh:
        trace = json.load(fh)
    events = trace.pop("traceEvents")
    trace.pop("distributedInfo", None)
    one = len(json.dumps(events).encode())
    copies = max(1, round(mb * 1e6 / one))
    stamps = [e["ts"] for e in events if isinstance(e.get("ts"), (int, float))]
    span = max(stamps) - min(stamps) + 1000
    chunks = [json.dumps([ingest._shift(e, k * span, k * 10**7) for e in events])[1:-1] for k in range(copies)]
    for rank in range(ranks):
        header = {"distributedInfo": {"backend": "nccl", "rank": rank, "world_size": ranks}, **trace}
        with open(folder / f"rank{rank}.json", "w") as out:
            out.write(json.dumps(header)[:-1] + ', "traceEvents": [')
            out.write(",".join(chunks))
            out.write("]}")
    done.write_text("")
    size = sum(p.stat().st_size for p in folder.glob("rank*.json"))
    print(f"built {folder} ({ranks} ranks, {size / 1e6:.0f} MB, {copies} copies of {source.name} per rank)")
    return folder


def run(script: str, *args: str, python: str = sys.executable, timeout: float = 3600) -> dict:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_WAIT_POLICY": "PASSIVE"}
    if python != sys.executable:
        env.pop("PYTHONPATH")
    runner = (
        "import resource, subprocess, sys, json\n"
        "p = subprocess.run(sys.argv[1:], capture_output=True, text=True)\n"
        "use = resource.getrusage(resource.RUSAGE_CHILDREN)\n"
        "print(json.dumps({'rc': p.returncode, 'out': p.stdout, 'err': p.stderr[-2000:],\n"
        "                  'peak_kb': use.ru_maxrss, 'cpu_s': use.ru_utime + use.ru_stime}))\n"
    )
    started = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-c", runner, python, "-c", script, *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
    )
    wall = time.perf_counter() - started
    report = json.loads(proc.stdout)
    if report["rc"] != 0:
        return {"error": (report["err"].strip().splitlines() or ["failed"])[-1]}
    result = json.loads(report["out"].strip().splitlines()[-1])
    return {**result, "wall_s": wall, "peak_mb": report["peak_kb"] / 1024, "cpu_s": report["cpu_s"]}


def eight_ranks(mb: float, with_hta: bool, with_dask: bool) -> None:
    folder = build_folder(
        ingest.DEFAULT_SOURCE if ingest.DEFAULT_SOURCE.exists() else ingest.FALLBACK_SOURCE, 8, mb, f"ranks_8x{mb:g}mb"
    )
    print(f"load average before: {Path('/proc/loadavg').read_text().strip()}")
    tables = run(ONE_RANK_TABLES, str(folder / "rank0.json"))
    print(f"one rank's tables: {tables.get('table_mb', float('nan')):.0f} MB in memory")
    ours: dict[int | None, dict] = {}
    for workers in (1, 2, None):
        r = ours[workers] = run(OURS, str(folder), str(workers))
        if "error" in r:
            print(f"workbench workers={workers}: failed: {r['error']}")
            continue
        print(
            f"workbench workers={workers}: load {r['load_s']:.2f} s, breakdowns {r['analyses_s']:.2f} s "
            f"({r['kind']}, {r['ranks']} ranks), CPU {r['cpu_s']:.1f} s (all processes), calling process peak "
            f"{r['self_peak_mb']:.0f} MB ({r['self_peak_mb'] - r['base_mb']:.0f} MB above its {r['base_mb']:.0f} MB "
            f"after the imports), summaries {r['summary_bytes'] / 2**20:.1f} MB"
        )
    if "error" not in ours[1] and "error" not in ours[2]:
        reference = tables.get("table_mb", float("nan")) + ours[2]["summary_bytes"] / 2**20
        print(
            f"scaling: workers=2 loads {ours[1]['load_s'] / ours[2]['load_s']:.2f}x faster than workers=1 (one "
            f"process); the caller's peak with workers=2 is {ours[2]['self_peak_mb']:.0f} MB, "
            f"{ours[2]['self_peak_mb'] - ours[2]['base_mb']:.0f} MB above the imports, against one rank's tables + "
            f"summaries {reference:.0f} MB"
        )
    if with_dask:
        d = run(DASK, str(folder))
        print(
            "Dask LocalCluster (2 worker processes): "
            + (
                f"failed: {d['error']}"
                if "error" in d
                else f"load {d['dask_load_s']:.2f} s; same as the local load: {d['same']}"
            )
        )
    if with_hta:
        python, why = ingest.hta_python()
        if python is None:
            print(f"Holistic Trace Analysis: not measured: {why}")
            return
        theirs = run(HTA, str(folder / "rank0.json"), python=python)
        if "error" in theirs:
            print(f"Holistic Trace Analysis: failed: {theirs['error']}")
            return
        print(
            f"Holistic Trace Analysis: load {theirs['load_s']:.2f} s wall (its own fork pool), CPU "
            f"{theirs['cpu_s']:.1f} s (all processes), peak RSS (largest process) {theirs['peak_mb']:.0f} MB"
        )
        for workers in (1, 2, None):
            if "error" not in ours[workers]:
                print(
                    f"load time ratio (HTA / ours, workers={workers}): {theirs['load_s'] / ours[workers]['load_s']:.1f}x"
                    f" wall, {theirs['cpu_s'] / ours[workers]['cpu_s']:.1f}x CPU (whole processes)"
                )
    print(f"load average after: {Path('/proc/loadavg').read_text().strip()}")


def many_ranks(counts: list[int]) -> None:
    folder = build_folder(SMALL_SOURCE, max(counts), 0.3, f"ranks_{max(counts)}_small")
    paths = sorted(str(p) for p in folder.glob("rank*.json"))
    paths.sort(key=lambda p: int(Path(p).stem[4:]))
    print(f"load average before: {Path('/proc/loadavg').read_text().strip()}")
    for workers in (2, 1):
        for n in counts:
            r = run(OURS, json.dumps(paths[:n]), str(workers))
            if "error" in r:
                print(f"{n} ranks, workers={workers}: failed: {r['error']}")
                continue
            print(
                f"{n:4d} ranks, workers={workers}: calling process peak {r['self_peak_mb']:.0f} MB, load "
                f"{r['load_s']:.1f} s ({r['kind']}), summaries {r['summary_bytes'] / 2**20:.1f} MB"
            )
    print(f"load average after: {Path('/proc/loadavg').read_text().strip()}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=130, help="MB of JSON per rank of the 8-rank folder (default 130)")
    parser.add_argument("--part", choices=("all", "eight", "ranks"), default="all")
    parser.add_argument("--no-hta", action="store_true")
    parser.add_argument("--no-dask", action="store_true")
    parser.add_argument("--counts", default="32,64,128,256", help="rank counts of the memory series")
    args = parser.parse_args()
    if args.part in ("all", "eight"):
        eight_ranks(args.mb, not args.no_hta, not args.no_dask)
    if args.part in ("all", "ranks"):
        many_ranks([int(c) for c in args.counts.split(",")])


if __name__ == "__main__":
    main()
