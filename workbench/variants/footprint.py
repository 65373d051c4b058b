"""What a variant changed, not only how fast: one profiled call under torch.profiler.

Counts per call: operators (top-level CPU ops), device kernels, kernel launches (runtime
launch calls), host syncs, allocations and allocated bytes, peak memory;
set against the baseline's as deltas.  On CPU the device counts are None ("not
measured"), never 0.

Allocations come from the profiler's raw ``[memory]`` records (one per allocation or free,
``nbytes`` signed), read from ``prof.profiler.kineto_results``: ``prof.events()`` folds every
record made inside an operator into that operator's memory column and lists only the ones
made outside any operator, so counting its ``[memory]`` rows misses nearly all of them (and
all of a compiled graph's, which allocates inside its one call).
"""

from __future__ import annotations

from typing import Any, Callable

LAUNCH_NAMES = (
    "cudaLaunchKernel",
    "cuLaunchKernel",
    "cudaLaunchKernelExC",
    "hipLaunchKernel",
    "hipExtModuleLaunchKernel",
    "cudaGraphLaunch",
    "hipGraphLaunch",
)
SYNC_NAMES = (
    "cudaDeviceSynchronize",
    "cudaStreamSynchronize",
    "cudaEventSynchronize",
    "hipDeviceSynchronize",
    "hipStreamSynchronize",
)
METRICS = ("op_count", "kernel_count", "launch_count", "sync_count", "alloc_count", "alloc_bytes", "peak_memory_bytes")


# a profiled call with more events than this keeps no trace for the winner's diff (its JSON would be tens of
# MB in a temporary folder for every comparison of the session)
MAX_DIFF_EVENTS = 100_000


def profile_footprint(fn: Callable[..., Any], args: tuple[Any, ...], trace_to: str | None = None) -> dict[str, Any]:
    """Per-call counts from one profiled call (after the variant is warm); ``trace_to``: a path the call's
    Chrome trace is exported to (what the comparison's winner-against-baseline diff reads)."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    from workbench.capture.quiet import captured_native_stderr

    on_cuda = torch.cuda.is_available()
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if on_cuda else [])
    if on_cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base_mem = torch.cuda.memory_allocated()
    # the profiler's native start/stop lines (USDT ... profiler_start) are kept out of the user's output;
    # they are shown only when the call fails
    with captured_native_stderr(), profile(activities=activities, profile_memory=True) as prof:
        fn(*args)
        if on_cuda:
            torch.cuda.synchronize()
    events = prof.events()
    if trace_to is not None and len(events) <= MAX_DIFF_EVENTS:
        try:
            prof.export_chrome_trace(trace_to)
        except Exception:  # noqa: BLE001 - no trace kept: the diff is then not shown, the counts stand
            pass
    fp = summarize_events(events, on_cuda)
    fp.update(summarize_memory(memory_records(prof, "CUDA" if on_cuda else "CPU")))
    if on_cuda:
        fp["peak_memory_bytes"] = int(torch.cuda.max_memory_allocated() - base_mem)
    return fp


def memory_records(prof: Any, device: str = "CPU") -> list[int]:
    """Signed bytes of every allocation (+) and free (-) the profiler recorded on ``device``
    (``"CPU"``, or ``"CUDA"`` for a GPU run: host scalars do not count there), in time order."""
    raw = [
        e
        for e in prof.profiler.kineto_results.events()
        if e.name() == "[memory]" and str(e.device_type()).endswith(device)
    ]
    return [int(e.nbytes()) for e in sorted(raw, key=lambda e: e.start_ns())]


def summarize_memory(deltas_bytes: list[int]) -> dict[str, int]:
    """Allocation count and bytes, and the peak of the running total (frees of memory allocated
    before the call count down from 0, so the peak is what the call added at most)."""
    running = peak = allocs = alloc_bytes = 0
    for delta in deltas_bytes:
        running += delta
        peak = max(peak, running)
        if delta > 0:
            allocs, alloc_bytes = allocs + 1, alloc_bytes + delta
    return {"alloc_count": allocs, "alloc_bytes": alloc_bytes, "peak_memory_bytes": peak}


def summarize_events(events: Any, on_cuda: bool) -> dict[str, Any]:
    """Operator, kernel, launch and sync counts of ``prof.events()``."""
    ops = kernels = launches = syncs = 0
    for e in events:
        name = e.name
        if name == "[memory]":
            continue
        if str(e.device_type).endswith(("CUDA", "HIP", "PrivateUse1")):
            kernels += 1
            continue
        if name in LAUNCH_NAMES:
            launches += 1
        elif name in SYNC_NAMES:
            syncs += 1
        elif e.cpu_parent is None and not name.startswith(("cuda", "hip", "ProfilerStep")):
            ops += 1
    return {
        "op_count": ops,
        "kernel_count": kernels if on_cuda else None,
        "launch_count": launches if on_cuda else None,
        "sync_count": syncs if on_cuda else None,
    }


def footprint_delta(candidate: dict[str, Any], baseline: dict[str, Any]) -> dict[str, Any]:
    """candidate - baseline for every metric both measured (None where either did not)."""
    out = {}
    for m in METRICS:
        a, b = candidate.get(m), baseline.get(m)
        out[m] = None if a is None or b is None else a - b
    return out
