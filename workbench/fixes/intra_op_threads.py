"""``intra_op_threads``: ``torch.set_num_threads(cores)`` during the call (CPU runs only), where the run
used another thread count than the cores it may run on.

* more threads than usable cores (the process's CPU affinity; or than physical cores, where the kernel's
  topology says): oversubscription, threads take turns on a core and every parallel region waits for the
  slowest;
* fewer threads than physical cores, and most of the op time in ops large enough to run in parallel (ATen
  splits an op across threads from 32,768 elements, ``GRAIN_SIZE``; a GEMM or convolution from a few
  thousand): idle cores.

The count is set at the start of the call and the previous one put back in a ``finally`` (per thread, as
OpenMP's is), so nothing outlives the call.  Numerics: reordered (a parallel reduction sums in another
order).
"""

from __future__ import annotations

import numpy as np

from workbench.fixes import _patterns as P
from workbench.fixes.fix import Fix, Site, absent, applies

NAME = "intra_op_threads"
GRAIN_SIZE = 32768  # at::internal::GRAIN_SIZE: elements below which ATen runs an op on one thread
MATRIX_MIN_ELEMENTS = 4096  # GEMM/convolution libraries split work from about this size
MIN_PARALLEL_SHARE_PCT = 50.0


def _machine(context):
    """(threads the run used, usable cores, physical cores or None) for ``context``."""
    import torch

    run = context.run
    cpus = P.usable_cpus()
    if run is None:
        return torch.get_num_threads(), len(cpus), P.physical_cores(cpus)
    machine = getattr(getattr(run, "health", None), "machine", None)
    threads = P.run_setting(context, "num_threads", None) or getattr(machine, "torch_threads", None)
    usable = getattr(machine, "usable_cores", None) or len(cpus)
    # the topology is this machine's: used where the run's usable cores are this process's
    physical = P.physical_cores(cpus) if usable == len(cpus) else None
    return (int(threads) if threads else None), int(usable), physical


def target_threads(context) -> int:
    _, usable, physical = _machine(context)
    return max(1, min(usable, physical or usable))


def _parallel_share(context) -> float | None:
    """The share (%) of the top-level op time in ops large enough to run on several threads; None without
    traced ops."""
    trace = context.trace
    if trace is None:
        return None
    ops = trace.cpu_ops
    if ops is None or not len(ops) or "depth" not in ops:
        return None
    top = ops[ops["depth"] == 0]
    total = float(top["dur_us"].sum())
    if total <= 0:
        return None
    names = top["name"].astype(str).to_numpy()
    dims = top["input_dims"].astype(str).to_numpy() if "input_dims" in top else np.full(len(top), "")
    dur = top["dur_us"].to_numpy(np.float64)
    big = 0.0
    cache: dict[tuple[str, str], bool] = {}
    for name, d, us in zip(names, dims, dur):
        key = (name, d)
        if key not in cache:
            sizes = [int(np.prod(x)) for x in P.parse_dims(d) if x]
            largest = max(sizes, default=0)
            cache[key] = largest >= (MATRIX_MIN_ELEMENTS if P.is_matrix_op(name) else GRAIN_SIZE)
        if cache[key]:
            big += us
    return 100.0 * big / total


def _transform(fn, context, name):
    import torch

    from workbench.variants.spec import Variant

    target = target_threads(context)

    def with_threads(*args, **kwargs):
        saved = torch.get_num_threads()
        if saved != target:
            torch.set_num_threads(target)
        try:
            return fn(*args, **kwargs)
        finally:
            if torch.get_num_threads() != saved:
                torch.set_num_threads(saved)

    with_threads.__wrapped__ = fn  # type: ignore[attr-defined]
    return Variant(
        name=name,
        fn=with_threads,
        kind="setting",
        numerical_class="reordered",
        description=f"torch.set_num_threads({target}) during the call (restored after)",
        options={"threads": target},
    )


def recognise(context):
    if context.cuda:
        return absent(NAME, "a CUDA run: the intra-op thread count is a CPU setting")
    threads, usable, physical = _machine(context)
    if not threads:
        return absent(NAME, "the run did not record its thread count")
    target = max(1, min(usable, physical or usable))
    cores = f"{usable} usable core{'s' if usable != 1 else ''}" + (
        f" ({physical} physical)" if physical and physical != usable else ""
    )
    site = (Site("torch.set_num_threads", "setting", f"{threads} -> {target} during the call"),)
    if threads > usable:
        return applies(
            NAME,
            f"oversubscribed: the run used {threads} threads on {cores}; threads beyond the cores take turns and "
            "each parallel region waits for the slowest",
            site,
        )
    if physical and threads > physical:
        return applies(
            NAME,
            f"the run used {threads} threads on {physical} physical cores: two threads on one core share its "
            "vector units and caches",
            site,
        )
    if threads >= target:
        return absent(NAME, f"the run used {threads} thread{'s' if threads != 1 else ''} on {cores}: one per core")
    share = _parallel_share(context)
    if share is None:
        return applies(
            NAME,
            f"the run used {threads} thread{'s' if threads != 1 else ''} of {cores} (no trace: the ops' sizes were "
            "not read)",
            site,
        )
    if share < MIN_PARALLEL_SHARE_PCT:
        return absent(
            NAME,
            f"the run used {threads} of {cores}, but only {share:.0f}% of its op time is in ops large enough to "
            "run on several threads",
        )
    return applies(
        NAME,
        f"the run used {threads} thread{'s' if threads != 1 else ''} of {cores}; {share:.0f}% of its op time is "
        f"in ops large enough to split across threads",
        site,
    )


FIXES = (
    Fix(
        NAME,
        "torch.set_num_threads(one per physical core of the process's CPUs) during the call, restored after",
        "setting",
        "reordered",
        _transform,
        recognise=recognise,
        needs_live_code=False,
    ),
)
