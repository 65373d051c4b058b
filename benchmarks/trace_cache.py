"""First load vs cached load of one trace, each in a fresh process (the columnar cache, issue 14).

    .venv/bin/python benchmarks/trace_cache.py                  # the largest real trace here
    .venv/bin/python benchmarks/trace_cache.py --source PATH    # a file or a folder of rank files
    .venv/bin/python benchmarks/trace_cache.py --repeat 3       # the median of 3 runs of each
    .venv/bin/python benchmarks/trace_cache.py --gb 0.5         # the owlv2 trace repeated to 0.5 GB
                                                                # (built by benchmarks/ingest.py's builder)

The cache goes to a fresh temporary folder (WORKBENCH_CACHE_DIR), so the first load is a true miss:
it decodes the JSON and writes the tables. Every later load is a new Python process that reads the
tables back. Printed per load: the time of ``wb.load_trace`` inside the process (after ``workbench.api.trace``
and so pandas are imported; pyarrow, which only the cache uses, is imported inside it), and the process's
wall time (interpreter start and every import included). ``no cache`` decodes with ``cache=False`` (no write).
The goal: a cached load <= 1/10 of the first.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CANDIDATES = [ROOT / "tests" / "data", Path("/work/shared/traces")]

LOAD = """
import sys, time, json, warnings
warnings.simplefilter("ignore")
t0 = time.perf_counter()
import workbench as wb
import workbench.api.trace  # pandas, numpy and the analyses: imported by either path, not timed as the load
t1 = time.perf_counter()
trace = wb.load_trace(sys.argv[1], cache=sys.argv[2] == "1")
t2 = time.perf_counter()
print(json.dumps({"import_s": t1 - t0, "load_s": t2 - t1, "events": trace.event_count()}))
"""


def largest_trace() -> Path:
    """The largest trace file (by bytes on disk) under tests/data and /work/shared/traces."""
    files = [
        p
        for base in CANDIDATES
        if base.exists()
        for p in base.rglob("*")
        if p.is_file() and p.name.endswith((".json", ".json.gz")) and "bad" not in p.parts
    ]
    return max(files, key=lambda p: p.stat().st_size)


def run_once(source: Path, cache: bool, env: dict) -> dict:
    start = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-c", LOAD, str(source), "1" if cache else "0"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    result = json.loads(out.stdout.strip().splitlines()[-1])
    result["process_s"] = time.perf_counter() - start
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--source", type=Path, default=None, help="trace file or folder (default: the largest here)")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each kind; the median is printed (default: 3)")
    parser.add_argument(
        "--gb",
        type=float,
        default=None,
        help="repeat the real trace to about this many GB first (benchmarks/out/large_<gb>gb)",
    )
    args = parser.parse_args()
    source = args.source or largest_trace()
    if args.gb:
        sys.path.insert(0, str(ROOT / "benchmarks"))
        from ingest import build_trace

        source = build_trace(source, args.gb)
    size = sum(p.stat().st_size for p in source.rglob("*")) if source.is_dir() else source.stat().st_size
    print(f"trace: {source} ({size / 1e6:.1f} MB on disk)")
    rows = {"no cache (decode only)": [], "first load (decode + write)": [], "cached load (read)": []}
    entry_bytes = 0
    for _ in range(args.repeat):
        with tempfile.TemporaryDirectory(prefix="wb-cache-bench-") as folder:
            env = {**os.environ, "WORKBENCH_CACHE_DIR": folder}
            rows["no cache (decode only)"].append(run_once(source, False, env))
            rows["first load (decode + write)"].append(run_once(source, True, env))
            rows["cached load (read)"].append(run_once(source, True, env))
            entry_bytes = sum(p.stat().st_size for p in Path(folder).rglob("*") if p.is_file())
    events = rows["cached load (read)"][0]["events"]
    print(
        f"events: {events:,}; cache entry: {entry_bytes / 1e6:.1f} MB; median of {args.repeat} fresh processes each\n"
    )
    print(f"{'':30s} {'load_trace s':>13s} {'process s':>10s}")
    med = {}
    for name, runs in rows.items():
        med[name] = (statistics.median(r["load_s"] for r in runs), statistics.median(r["process_s"] for r in runs))
        print(f"{name:30s} {med[name][0]:13.3f} {med[name][1]:10.3f}")
    first, cached = med["first load (decode + write)"], med["cached load (read)"]
    print(
        f"\ncached / first: {cached[0] / first[0]:.3f} of the load_trace time "
        f"({first[0] / cached[0]:.1f}x faster), {cached[1] / first[1]:.3f} of the process time"
    )


if __name__ == "__main__":
    main()
