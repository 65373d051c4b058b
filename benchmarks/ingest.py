"""Load + analyses speed and peak memory: workbench vs Holistic Trace Analysis, same file, one run.

    .venv/bin/python benchmarks/ingest.py              # ~0.1 GB trace (about a minute)
    .venv/bin/python benchmarks/ingest.py --gb 1       # the real goal: >= 10x faster, <= 1/3 memory
    .venv/bin/python benchmarks/ingest.py --stages --no-hta  # our load's CPU time per stage

The large trace is a real one (the TraceLens H100 owlv2 trace in /work/shared/traces, else
tests/data/gpu/mi300x_sglang, or --source) repeated until it reaches the size asked for,
timestamps and ids shifted per copy. Each side runs in its own subprocess; its peak RSS and its
CPU time (user + system) come from resource.getrusage(RUSAGE_CHILDREN) in a dedicated parent.
CPU time is printed beside wall time because the build machines are shared: wall time there
depends on what else runs, CPU time much less.
HTA is installed into its own venv under benchmarks/out/ (pip install HolisticTraceAnalysis);
if that fails the reason is printed and our numbers still are.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "out"
DEFAULT_SOURCE = Path("/work/shared/traces/tracelens_h100_owlv2/google_owlv2-large-patch14-ensemble__1016001.json.gz")
FALLBACK_SOURCE = ROOT / "tests" / "data" / "gpu" / "mi300x_sglang.json.gz"
HTA_VENV = OUT / "hta-venv"

OURS = """
import os, sys, time, json, warnings
warnings.simplefilter("ignore")
cpu = lambda: sum(os.times()[:4])  # this process and its waited-for workers
t0, c0 = time.perf_counter(), cpu()
from workbench.trace import read_trace
trace = read_trace(sys.argv[1])
t1, c1 = time.perf_counter(), cpu()
import workbench.analysis as analysis
for name in ("kernel_breakdown", "temporal_breakdown", "idle_breakdown", "launch_stats", "comm_overlap",
             "copy_stats", "sync_audit", "op_breakdown"):
    getattr(analysis, name)(trace)
t2 = time.perf_counter()
print(json.dumps({"load_s": t1 - t0, "load_cpu_s": c1 - c0, "analyses_s": t2 - t1, "events": trace.event_count()}))
"""

STAGES = """
import sys, time, json, warnings
warnings.simplefilter("ignore")
from workbench.trace import read_trace
from workbench.trace.build import LoadOptions, build_file
from workbench.trace.decode import decode_file
from workbench.trace.issues import Issues
import workbench.trace.split_decode as split_decode
split_decode.PARALLEL_MIN_BYTES = 1 << 62  # stages of the single-process path
path = sys.argv[1]
c0 = time.process_time()
header, chunks = decode_file(path)
events = sum(len(chunk.events) for chunk in chunks)
c1 = time.process_time()
header, chunks = decode_file(path)
build_file(header, chunks, LoadOptions(), Issues(path))
c2 = time.process_time()
read_trace(path)
c3 = time.process_time()
print(json.dumps({"decode_cpu_s": c1 - c0, "columns_cpu_s": (c2 - c1) - (c1 - c0),
                  "tables_cpu_s": (c3 - c2) - (c2 - c1), "events": events}))
"""

HTA = """
import sys, time, json, os, warnings, logging
warnings.simplefilter("ignore"); logging.disable(logging.WARNING)
cpu = lambda: sum(os.times()[:4])  # this process and its waited-for workers
t0, c0 = time.perf_counter(), cpu()
from hta.trace_analysis import TraceAnalysis
analyzer = TraceAnalysis(trace_dir=os.path.dirname(sys.argv[1]))
t1, c1 = time.perf_counter(), cpu()
done = []
for name in ("get_gpu_kernel_breakdown", "get_temporal_breakdown", "get_idle_time_breakdown",
             "get_cuda_kernel_launch_stats", "get_comm_comp_overlap", "get_memory_bw_summary",
             "get_queue_length_summary", "get_profiler_steps"):
    try:
        getattr(analyzer, name)(**({"visualize": False} if name != "get_profiler_steps" else {}))
        done.append(name)
    except Exception as exc:
        done.append(f"{name} failed: {type(exc).__name__}")
t2 = time.perf_counter()
print(json.dumps({"load_s": t1 - t0, "load_cpu_s": c1 - c0, "analyses_s": t2 - t1, "done": done}))
"""


def build_trace(source: Path, gb: float) -> Path:
    """Repeat ``source`` until the file is about ``gb`` GB; shift ts by the span, ids by their range."""
    target = OUT / f"large_{gb:g}gb" / "rank0.json"
    if target.exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(source) as fh:
        trace = json.load(fh)
    events = trace.pop("traceEvents")
    one = len(json.dumps(events).encode())
    copies = max(1, round(gb * 1e9 / one))
    stamps = [e["ts"] for e in events if isinstance(e.get("ts"), (int, float))]
    span = max(stamps) - min(stamps) + 1000
    id_step = 10**7
    with open(target, "w") as out:
        out.write(json.dumps(trace)[:-1] + ', "traceEvents": [')
        for k in range(copies):
            shifted = [_shift(e, k * span, k * id_step) for e in events]
            text = json.dumps(shifted)[1:-1]
            out.write(("," if k else "") + text)
        out.write("]}")
    print(f"built {target} ({target.stat().st_size / 1e9:.2f} GB, {copies} copies of {source.name})")
    return target


def _shift(event: dict, dt: float, did: int) -> dict:
    event = dict(event)
    if isinstance(event.get("ts"), (int, float)) and event.get("ph") != "M":
        event["ts"] = round(event["ts"] + dt, 3)
    if isinstance(event.get("id"), int):
        event["id"] += did
    args = event.get("args")
    if isinstance(args, dict):
        args = dict(args)
        for key in ("correlation", "External id", "external id"):
            if isinstance(args.get(key), int):
                args[key] += did
        event["args"] = args
    return event


def measure(python: str, script: str, path: Path, env: dict) -> dict:
    """Run one side in a dedicated parent so RUSAGE_CHILDREN is that side's peak alone."""
    # peak_kb: the largest process's peak RSS; tree_pss_kb: the peak of the PSS summed over the process
    # and its workers (sampled every 20 ms; forked workers share pages, PSS splits them fairly)
    runner = (
        "import resource, subprocess, sys, json, time\n"
        "def pss(pid):\n"
        "    try:\n"
        "        with open(f'/proc/{pid}/smaps_rollup') as fh:\n"
        "            own = next(int(l.split()[1]) for l in fh if l.startswith('Pss:'))\n"
        "        with open(f'/proc/{pid}/task/{pid}/children') as fh:\n"
        "            kids = [int(k) for k in fh.read().split()]\n"
        "    except (OSError, StopIteration, ValueError):\n"
        "        return 0\n"
        "    return own + sum(pss(k) for k in kids)\n"
        "p = subprocess.Popen(sys.argv[1:], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)\n"
        "tree = 0\n"
        "while p.poll() is None:\n"
        "    tree = max(tree, pss(p.pid)); time.sleep(0.02)\n"
        "out, err = p.communicate()\n"
        "use = resource.getrusage(resource.RUSAGE_CHILDREN)\n"
        "print(json.dumps({'rc': p.returncode, 'out': out, 'err': err[-2000:], 'tree_pss_kb': tree,\n"
        "                  'peak_kb': use.ru_maxrss, 'cpu_s': use.ru_utime + use.ru_stime}))\n"
    )
    started = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-c", runner, python, "-c", script, str(path)], capture_output=True, text=True, env=env
    )
    wall = time.perf_counter() - started
    report = json.loads(proc.stdout)
    if report["rc"] != 0:
        return {"error": report["err"].strip().splitlines()[-1] if report["err"].strip() else "failed"}
    result = json.loads(report["out"].strip().splitlines()[-1])
    return {
        **result,
        "wall_s": wall,
        "peak_mb": report["peak_kb"] / 1024,
        "cpu_s": report["cpu_s"],
        "tree_mb": report["tree_pss_kb"] / 1024,
    }


def median_run(python: str, script: str, path: Path, env: dict, repeat: int) -> dict:
    """``repeat`` runs of one side: the one with the median load time, with the largest peak."""
    runs = [measure(python, script, path, env) for _ in range(max(1, repeat))]
    if any("error" in r for r in runs):
        return next(r for r in runs if "error" in r)
    runs.sort(key=lambda r: r["load_s"])
    return {
        **runs[len(runs) // 2],
        "peak_mb": max(r["peak_mb"] for r in runs),
        "tree_mb": max(r["tree_mb"] for r in runs),
        "runs": len(runs),
    }


def hta_python() -> tuple[str | None, str]:
    python = HTA_VENV / "bin" / "python"
    if python.exists():
        return str(python), ""
    try:
        subprocess.run([sys.executable, "-m", "venv", str(HTA_VENV)], check=True, capture_output=True)
        pip = subprocess.run(
            [str(python), "-m", "pip", "install", "-q", "HolisticTraceAnalysis"],
            capture_output=True,
            text=True,
            timeout=900,
        )
    except (subprocess.SubprocessError, OSError) as exc:
        return None, f"could not create its venv: {exc}"
    if pip.returncode != 0:
        return None, "pip install HolisticTraceAnalysis failed: " + pip.stderr.strip()[-500:]
    return str(python), ""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gb", type=float, default=0.1, help="size of the trace built (default 0.1)")
    parser.add_argument("--source", type=Path, default=DEFAULT_SOURCE if DEFAULT_SOURCE.exists() else FALLBACK_SOURCE)
    parser.add_argument("--no-hta", action="store_true", help="time only workbench")
    parser.add_argument(
        "--repeat", type=int, default=1, help="runs per side; the run with the median load time is printed (default 1)"
    )
    parser.add_argument(
        "--stages",
        action="store_true",
        help="also print our load's CPU time per stage (decode, columns, tables), one more run",
    )
    args = parser.parse_args()
    path = build_trace(args.source, args.gb)
    size_mb = path.stat().st_size / 1e6
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_WAIT_POLICY": "PASSIVE"}
    if args.stages:
        _print_stages(measure(sys.executable, STAGES, path, env), size_mb)
    ours = median_run(sys.executable, OURS, path, env, args.repeat)
    _print("workbench", ours, size_mb)
    if args.no_hta:
        return
    python, why = hta_python()
    if python is None:
        print(f"Holistic Trace Analysis: not measured: {why}")
        return
    theirs = median_run(python, HTA, path, {k: v for k, v in env.items() if k != "PYTHONPATH"}, args.repeat)
    _print("Holistic Trace Analysis", theirs, size_mb)
    if "error" not in ours and "error" not in theirs:
        print(
            f"load time ratio (HTA / ours): {theirs['load_s'] / ours['load_s']:.1f}x wall, "
            f"{theirs['load_cpu_s'] / ours['load_cpu_s']:.1f}x CPU   "
            f"load+analyses: {(theirs['load_s'] + theirs['analyses_s']) / (ours['load_s'] + ours['analyses_s']):.1f}x wall, "
            f"{theirs['cpu_s'] / ours['cpu_s']:.1f}x CPU (whole process)   "
            f"peak memory ratio (ours / HTA): {ours['peak_mb'] / theirs['peak_mb']:.2f} largest process, "
            f"{ours['tree_mb'] / theirs['tree_mb']:.2f} summed over workers (PSS)"
        )


def _print_stages(r: dict, size_mb: float) -> None:
    """CPU time of our load per stage: the msgspec decode of the chunks (file read included), turning
    the decoded events into column arrays (build_file less the decode), and the tables (read_trace
    less build_file: joining, nesting, frames)."""
    if "error" in r:
        print(f"workbench stages: failed: {r['error']}")
        return
    total = r["decode_cpu_s"] + r["columns_cpu_s"] + r["tables_cpu_s"]
    print(
        "workbench stages (CPU): "
        + ", ".join(
            f"{name} {r[f'{name}_cpu_s']:.2f} s ({r[f'{name}_cpu_s'] / total:.0%}, "
            f"{r[f'{name}_cpu_s'] * 1e9 / max(1, r['events']):.0f} ns/event)"
            for name in ("decode", "columns", "tables")
        )
        + f"; {size_mb / total:.0f} MB/s CPU in all"
    )


def _print(label: str, r: dict, size_mb: float) -> None:
    if "error" in r:
        print(f"{label}: failed: {r['error']}")
        return
    print(
        f"{label}: load {r['load_s']:.2f} s wall / {r['load_cpu_s']:.2f} s CPU "
        f"({size_mb / r['load_s']:.0f} MB/s wall, {size_mb / r['load_cpu_s']:.0f} MB/s CPU), analyses "
        f"{r['analyses_s']:.2f} s, process CPU {r['cpu_s']:.1f} s, peak RSS {r['peak_mb']:.0f} MB "
        f"(workers included: {r['tree_mb']:.0f} MB PSS)"
        + (f", median of {r['runs']} runs" if r.get("runs", 1) > 1 else "")
        + (f", {r['events']:,} events" if "events" in r else "")
        + (f"; {r['done']}" if "done" in r else "")
    )


if __name__ == "__main__":
    main()
