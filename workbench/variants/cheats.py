"""Checks against variants that look fast or correct for the wrong reason.

* timers patched: the variant replaced ``time.perf_counter`` & co. (seen by ``StateGuard``);
  the timer in ``timing.py`` holds its own references, so the numbers stay honest anyway;
* work left running after return: a thread the call started is still alive, or the output
  still changes after the call returned (on a GPU: after the current stream is synchronised,
  a full device synchronise changes it, i.e. work was put on a side stream and not joined);
* precision silently lowered: the output dtype is lower than the baseline's, or its error
  against float64 looks like a lower precision's rounding error while the baseline's does not;
* faster than the roofline allows: reading the inputs and writing the outputs once at the
  machine's measured copy bandwidth takes longer than the measured time.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Callable

import numpy as np

from workbench.variants.tolerances import LOWER_PRECISIONS, UNIT_ROUNDOFF, dtype_name
from workbench.variants.tree import clone_tensors, leaves_with_paths, tensor_leaves

SETTLE_S = 0.05  # how long to watch an output after return
PRECISION_MATCH_FACTOR = 0.25  # median rel. error >= this x a lower precision's rounding error
ROUNDING_CEILING = 2.0  # ... and at most this x its unit roundoff (else: just wrong)
BASELINE_CLEAN_FACTOR = 0.05  # ... while the baseline's stays under this x that error
ROOFLINE_MARGIN = 1.5  # implied bandwidth above this x the measured copy bandwidth


def timer_patches(state_changes: list[str]) -> list[str]:
    return [f"patched timer: {c}" for c in state_changes if c.startswith("time.")]


def async_work_flags(fn: Callable[..., Any], args: tuple[Any, ...], settle_s: float = SETTLE_S) -> list[str]:
    """Call once; flag threads still running after return and outputs that change afterwards."""
    before = set(threading.enumerate())
    out = fn(*args)
    _sync_current_stream(out)
    snapshot = clone_tensors(out)
    new_threads = [t for t in threading.enumerate() if t not in before and t.is_alive()]
    time.sleep(settle_s)
    _sync_device(out)
    flags = []
    if new_threads:
        flags.append(
            f"work moved to threads: {len(new_threads)} thread(s) started by the call still "
            f"running after it returned ({', '.join(t.name for t in new_threads[:3])})"
        )
    changed = [
        p for (p, a), (_, b) in zip(tensor_leaves(snapshot, "out"), tensor_leaves(out, "out")) if not _same(a, b)
    ]
    if changed:
        flags.append(
            f"output changed after return ({', '.join(changed[:3])}): work continues after the "
            f"call returns (a side stream or thread not joined); its timing is not the work's"
        )
    for t in new_threads:
        t.join(settle_s)
    return flags


def same_values(a: Any, b: Any) -> bool:
    """Equal shapes and values, NaN equal to NaN."""
    return tuple(a.shape) == tuple(b.shape) and _same(a, b)


def _same(a: Any, b: Any) -> bool:
    import torch

    return (
        bool(torch.equal(a.nan_to_num(), b.nan_to_num())) and bool(torch.equal(a.isnan(), b.isnan()))
        if a.is_floating_point()
        else bool(torch.equal(a, b))
    )


def _sync_current_stream(out: Any) -> None:
    import torch

    if any(t.device.type == "cuda" for _, t in tensor_leaves(out)):
        torch.cuda.current_stream().synchronize()


def _sync_device(out: Any) -> None:
    import torch

    if any(t.device.type == "cuda" for _, t in tensor_leaves(out)):
        torch.cuda.synchronize()


def lowered_precision_flags(got: Any, ref: Any, native: Any) -> list[str]:
    """Flag outputs whose dtype, or error profile, matches a lower precision than the baseline's."""
    flags = []
    leaves = zip(leaves_with_paths(got), leaves_with_paths(ref), leaves_with_paths(native))
    for (path, g), (_, r), (_, n) in leaves:
        if not (hasattr(g, "dtype") and hasattr(n, "dtype")) or not n.is_floating_point():
            continue
        declared = dtype_name(n)
        if g.dtype != n.dtype and dtype_name(g) in LOWER_PRECISIONS.get(declared, ()):
            flags.append(f"precision lowered: {path} is {dtype_name(g)}, the baseline returns {declared}")
            continue
        if g.shape != n.shape or g.dtype != n.dtype:
            continue
        matched = _error_profile_match(g, r, n, declared)
        if matched:
            flags.append(
                f"precision lowered: {path}'s error against float64 matches {matched} rounding, "
                f"the baseline's matches {declared}"
            )
    return flags


def _median_rel_err(x: Any, r: np.ndarray) -> float:
    a = x.detach().cpu().double().numpy()
    ok = np.isfinite(a) & np.isfinite(r) & (np.abs(r) > 1e-30)
    return float(np.median(np.abs(a[ok] - r[ok]) / np.abs(r[ok]))) if ok.any() else 0.0


def _error_profile_match(g: Any, r: Any, n: Any, declared: str) -> str | None:
    """The lower precision whose rounding the error looks like: median relative error between
    PRECISION_MATCH_FACTOR x u/2 and ROUNDING_CEILING x u (a wrong formula errs beyond), while
    the baseline's error stays far below that level."""
    ref = r.detach().cpu().double().numpy()
    if ref.size == 0:
        return None
    got_err, base_err = _median_rel_err(g, ref), _median_rel_err(n, ref)
    for lower in sorted(LOWER_PRECISIONS.get(declared, ()), key=lambda d: UNIT_ROUNDOFF[d]):
        u = UNIT_ROUNDOFF[lower]
        rounding_like = PRECISION_MATCH_FACTOR * u / 2 <= got_err <= ROUNDING_CEILING * u
        if rounding_like and base_err < BASELINE_CLEAN_FACTOR * u / 2:
            return "float16/TF32" if lower == "float16" else lower
    return None


def compulsory_bytes(args: tuple[Any, ...], out: Any) -> int:
    """Bytes any implementation must move: read every input tensor, write every output once."""
    total = 0
    for _, t in tensor_leaves(args) + tensor_leaves(out):
        total += t.numel() * t.element_size()
    return total


def roofline_flag(bytes_moved: int, median_ms: float, copy_gbps: float | None) -> str | None:
    if not copy_gbps or median_ms <= 0 or bytes_moved <= 0:
        return None
    implied_gbps = bytes_moved / (median_ms * 1e-3) / 1e9
    if implied_gbps > ROOFLINE_MARGIN * copy_gbps:
        return (
            f"faster than the roofline allows: moving its {bytes_moved / 1e6:.3g} MB of inputs and "
            f"outputs in {median_ms:.4g} ms implies {implied_gbps:.3g} GB/s, over {ROOFLINE_MARGIN}x the "
            f"measured copy bandwidth ({copy_gbps:.3g} GB/s): it skips work or caches results"
        )
    return None
