"""One prepared check of the GPU paths, for a session that has a CUDA device (under ~5 minutes).

    .venv/bin/python benchmarks/gpu_check.py            # prints one JSON document
    OUT=/some/dir .venv/bin/python benchmarks/gpu_check.py   # also writes gpu_check.json + the profile bundle

Sections (each runs even if an earlier one failed; the exit status is 1 if any failed):
  timing      CUDA-event timing with an L2 flush: the variants' CudaTimer (a write of 2x L2 between
              samples) against back-to-back events on a small tensor that fits in L2; wb.profile's
              CUDA-event median against its host timer (which sees only the launch).
  profile     wb.profile with CUDA activity: kernels, launches, memory; the run bundle under $OUT.
  cuda_graph  a launch-bound loop of tiny ops, eager vs wb.variants.cuda_graph through wb.compare.
  compiled    the demo's memory-bound chain on 16M floats, eager vs torch.compile (default and
              reduce-overhead) through wb.compare: decisions, speedups, bandwidth share, kernels.
On a machine without CUDA it exits 2 with "not applicable: no CUDA device" once its imports are done
(torch, workbench, the variants' CUDA timer): the dry run (benchmarks/gpu/dry_run.sh) proves those.
benchmarks/gpu/run.sh runs it as its first section; with OUT set, gpu_check.json is rewritten after
each section, so a run cut short still shows the sections it finished.
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import torch  # noqa: E402

import workbench as wb  # noqa: E402
import workbench.variants  # noqa: E402,F401 - wb.variants.cuda_graph / compiled
from workbench import demo  # noqa: E402
from workbench.variants.timing import CudaTimer, Timed  # noqa: E402

if not torch.cuda.is_available():
    print(
        "not applicable: no CUDA device (torch.cuda.is_available() is False); "
        "run this on a machine with an NVIDIA or AMD GPU",
        file=sys.stderr,
    )
    sys.exit(2)

OUT = os.environ.get("OUT")


def _events_ms(fn, reps: int = 50) -> float:
    """Median of back-to-back CUDA-event samples, no flush (the cache stays warm)."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    samples = []
    for _ in range(reps):
        start.record()
        fn()
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end))
    return sorted(samples)[len(samples) // 2]


def check_timing() -> dict:
    timer = CudaTimer()
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    x = torch.randn(l2 // 8, device="cuda")  # half the L2: hot when not flushed
    item = Timed("small", lambda t: t * 2.0, (x,))
    item.fn(*item.args)
    flushed = sorted(timer.sample_ms(item) for _ in range(50))[25]
    warm = _events_ms(lambda: x * 2.0)
    big = torch.randn(4096, 4096, device="cuda")
    dev = wb.profile(lambda: big @ big, warmup=2, repeat=10, trace=False, device="cuda")
    host = wb.profile(lambda: big @ big, warmup=2, repeat=10, trace=False, device="cpu")
    return {
        "l2_bytes": l2,
        "flush_buffer_bytes": timer.flush_buf.numel() * 4,
        "small_read_flushed_ms": flushed,
        "small_read_warm_ms": warm,
        "flushed_over_warm": flushed / warm if warm > 0 else None,
        "matmul_4096_cuda_event_median_ms": dev.timing.median_ms,
        "timer": dev.timing.timer,
        "matmul_4096_host_timer_median_ms": host.timing.median_ms,
        "ok": dev.timing.timer == "cuda_event" and dev.timing.median_ms > host.timing.median_ms,
    }


def check_profile() -> dict:
    x, w = demo.make_inputs(device="cuda")
    run = wb.profile(demo.workload, x, w, warmup=3, repeat=10, name="demo on cuda")
    trace = run.trace
    out = {
        "median_ms": run.timing.median_ms,
        "p95_ms": run.timing.p95_ms,
        "cold_ms": run.cold_ms,
        "timer": run.timing.timer,
        "device": run.device,
        "trace_note": run.trace_note,
        "has_gpu": bool(trace is not None and trace.has_gpu),
        "kernel_count": int(len(trace.kernels)) if trace is not None else 0,
        "runtime_calls": int(len(trace.runtime)) if trace is not None else 0,
        "peak_allocated_bytes": run.memory.get("peak_allocated_bytes"),
        "hypotheses": [getattr(h, "category", "?") for h in (run.hypotheses or [])][:8],
    }
    if OUT:
        out["bundle"] = str(run.save(os.path.join(OUT, "demo_cuda_run")))
    out["ok"] = out["has_gpu"] and out["kernel_count"] > 0 and out["timer"] == "cuda_event"
    return out


def tiny_loop(x):
    """200 tiny elementwise ops: launch overhead dominates on a GPU."""
    for _ in range(100):
        x = x * 1.0001
        x = x + 0.0001
    return x


def _rows(cmp) -> dict:
    rows = {}
    for r in cmp.results:
        rows[r.name] = {
            "status": r.status,
            "reason": r.reason,
            "decision": r.decision,
            "decision_reason": r.decision_reason,
            "median_ms": r.timing.median_ms if r.timing else None,
            "p95_ms": r.timing.p95_ms if r.timing else None,
            "timer": r.timing.timer if r.timing else None,
            "speedup": r.speedup.point if r.speedup else None,
            "speedup_ci": [r.speedup.ci_low, r.speedup.ci_high] if r.speedup else None,
            "setup_ms": r.setup_ms,
            "achieved_gbps": r.achieved_gbps,
            "bandwidth_share": r.bandwidth_share,
            "flags": list(r.flags),
            "kernel_count": r.footprint.get("kernel_count"),
            "launch_count": r.footprint.get("launch_count"),
            "correct": r.correctness.passed if r.correctness else None,
        }
    return rows


def check_cuda_graph() -> dict:
    cmp = wb.compare(
        {"eager": tiny_loop, "cuda_graph": wb.variants.cuda_graph(tiny_loop)},
        inputs=lambda: (torch.randn(4096, device="cuda"),),
        checks=2,
        budget_s=3.0,
    )
    rows = _rows(cmp)
    g = rows["cuda_graph"]
    return {
        "variants": rows,
        "decision": cmp.decision.decision,
        "ok": g["status"] == "ok"
        and g["correct"]
        and g["timer"] == "cuda_event"
        and (g["launch_count"] or 0) < (rows["eager"]["launch_count"] or 0),
    }


def check_compiled() -> dict:
    chain = demo.elementwise_chain
    variants = {
        "eager": chain,
        "compiled": wb.variants.compiled(chain),
        "compiled[reduce-overhead]": wb.variants.compiled(chain, mode="reduce-overhead"),
    }
    cmp = wb.compare(variants, inputs=lambda: (torch.randn(1 << 24, device="cuda"),), checks=2, budget_s=4.0)
    rows = _rows(cmp)
    c = rows["compiled"]
    return {
        "variants": rows,
        "decision": cmp.decision.decision,
        "decided_variant": cmp.decision.variant,
        "working_set_copy_gbps": cmp.working_set_copy_gbps,
        "large_copy_gbps": cmp.copy_gbps,
        "ok": c["status"] == "ok" and c["correct"] and c["decision"] in ("keep", "keep_guarded"),
    }


def main() -> int:
    report = {
        "device": torch.cuda.get_device_name(0),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "hip": getattr(torch.version, "hip", None),
        "sections": {},
    }
    failed = []
    for name, check in (
        ("timing", check_timing),
        ("profile", check_profile),
        ("cuda_graph", check_cuda_graph),
        ("compiled", check_compiled),
    ):
        start = time.perf_counter()
        try:
            result = check()
        except Exception as exc:  # noqa: BLE001 - reported in the document, the next section runs
            result = {"ok": False, "error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc(limit=8)}
        result["seconds"] = round(time.perf_counter() - start, 2)
        report["sections"][name] = result
        if not result.get("ok"):
            failed.append(name)
        report["failed"] = failed
        _write(report)
    text = json.dumps(report, indent=2, default=str)
    print(text)
    return 1 if failed else 0


def _write(report: dict) -> None:
    if OUT:
        os.makedirs(OUT, exist_ok=True)
        path = os.path.join(OUT, "gpu_check.json")
        with open(path + ".tmp", "w", encoding="utf-8") as f:
            f.write(json.dumps(report, indent=2, default=str))
        os.replace(path + ".tmp", path)


if __name__ == "__main__":
    sys.exit(main())
