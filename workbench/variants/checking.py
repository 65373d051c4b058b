"""The correctness phase of a comparison: fresh inputs per check, a float64 reference, poisoned
outputs, every variant's call guarded (time limit, exceptions, global state), cheat checks.

Works on ``Live`` records, the mutable working state of each variant during one comparison.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable

from workbench.errors import InvalidArgumentError
from workbench.variants import cheats
from workbench.variants.correctness import CorrectnessResult, OutputCheck, check_outputs
from workbench.variants.isolation import StateGuard, VariantTimeout, call_with_limit
from workbench.variants.spec import Variant
from workbench.variants.tree import (clone_tensors, poison_allocator, poison_tensors, tensor_leaves,
                                     to_reference_precision)


@dataclass
class Live:
    variant: Variant
    status: str = "ok"
    reason: str = ""
    first_call_ms: float | None = None
    warm_call_ms: float | None = None
    checks: list[OutputCheck] = field(default_factory=list)
    flags: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.variant.name

    @property
    def runnable(self) -> bool:
        return self.status == "ok"

    def fail(self, status: str, reason: str) -> None:
        self.status, self.reason = status, reason

    def add_flags(self, flags: list[str]) -> None:
        self.flags += [f for f in flags if f not in self.flags]

    def correctness(self, n_checks: int, ref_precision: str) -> CorrectnessResult | None:
        if not self.checks:
            return None
        passed = all(c.passed for c in self.checks)
        return CorrectnessResult(passed, tuple(_worst_per_path(self.checks)), n_checks, ref_precision,
                                 tuple(self.flags))

    @property
    def setup_ms(self) -> float | None:
        if self.first_call_ms is None or self.warm_call_ms is None:
            return None
        return max(0.0, self.first_call_ms - self.warm_call_ms)


def _worst_per_path(checks: list[OutputCheck]) -> list[OutputCheck]:
    worst: dict[str, OutputCheck] = {}
    for c in checks:
        cur = worst.get(c.path)
        if cur is None or _badness(c) > _badness(cur):
            worst[c.path] = c
    return list(worst.values())


def _badness(c: OutputCheck) -> tuple:
    return (not c.passed, c.nonfinite_mismatch, c.frac_outside_tol, c.max_abs_err)


def guarded_call(live: Live, args: tuple[Any, ...], limit_s: float, poison_like: Any = None) -> tuple[bool, Any]:
    """Call the variant on its own copy of the inputs; record failures and state changes.

    Its own output buffers (``Variant.poison``) and freed blocks of the expected output sizes
    (``poison_like``) are filled with NaN first, so elements it forgets to write show."""
    own = clone_tensors(args)
    fn = live.variant.fn

    def poisoned_call(*a: Any) -> Any:
        if live.variant.poison is not None:
            live.variant.poison()
        keeper = poison_allocator(poison_like) if poison_like is not None else None  # per-thread arenas
        out = fn(*a)
        del keeper
        return out

    start = time.perf_counter()
    try:
        with StateGuard() as guard:
            out = call_with_limit(poisoned_call, own, limit_s)
    except VariantTimeout as exc:
        live.fail("timeout", str(exc))
        return False, None
    except Exception as exc:  # noqa: BLE001 - the variant's own error goes into its row
        from workbench.errors import NotApplicableError

        if isinstance(exc, NotApplicableError):
            live.fail("not_applicable", exc.reason)
        else:
            live.fail("error", f"raised {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")
        return False, None
    finally:
        _record_state_changes(live, locals().get("guard"))
    ms = (time.perf_counter() - start) * 1e3
    if live.first_call_ms is None:
        live.first_call_ms = ms
    else:
        live.warm_call_ms = ms if live.warm_call_ms is None else min(live.warm_call_ms, ms)
    return True, out


def _record_state_changes(live: Live, guard: StateGuard | None) -> None:
    if guard is None or not getattr(guard, "changed", None):
        return
    live.add_flags(cheats.timer_patches(guard.changed))
    lowered = [c for c in guard.changed if "matmul_precision" in c or "allow_tf32" in c]
    if lowered:
        live.add_flags([f"precision lowered: the call switched matmul precision ({lowered[0]}; restored)"])
    other = [c for c in guard.changed if not c.startswith("time.") and c not in lowered]
    if other:
        live.add_flags([f"changed global state (restored): {', '.join(other)}"])


def reference_output(baseline: Variant, reference: Callable[..., Any] | None, args: tuple[Any, ...],
                     limit_s: float) -> tuple[Any, str, str]:
    """(output, precision, note): the baseline (or ``reference``) run on float64 copies of the inputs."""
    fn = reference or baseline.fn
    try:
        with StateGuard():
            return call_with_limit(fn, to_reference_precision(args), limit_s), "float64", ""
    except Exception as exc:  # noqa: BLE001
        note = (f"reference in the baseline's own precision: it failed in float64 ({type(exc).__name__}: "
                f"{str(exc).splitlines()[0][:120] if str(exc) else ''}); pass reference= a float64 version")
        return None, "native", note


def run_checks(lives: list[Live], baseline: Live, make_inputs: Callable[[], tuple[Any, ...]], *,
               checks: int, limit_s: float, tolerances: dict | None,
               reference: Callable[..., Any] | None = None) -> tuple[str, list[str]]:
    """Run every check; returns the reference precision used and comparison-wide notes."""
    notes: list[str] = []
    precision = "float64"
    previous_args = None
    for i in range(checks):
        args = make_inputs()
        same = ("inputs were identical in two checks: pass a make_inputs that draws fresh "
                "random values each call")
        if previous_args is not None and same not in notes and _same_inputs(previous_args, args):
            notes.append(same)
        ref, precision, note = reference_output(baseline.variant, reference, args, limit_s)
        if note and note not in notes:
            notes.append(note)
        _one_check(lives, baseline, args, ref, limit_s, tolerances, last=(i == checks - 1))
        previous_args = args
    return precision, notes


def _one_check(lives: list[Live], baseline: Live, args: tuple[Any, ...], ref: Any, limit_s: float,
               tolerances: dict | None, last: bool) -> None:
    ok, native = guarded_call(baseline, args, limit_s)
    if not ok:
        raise InvalidArgumentError(f"the baseline {baseline.name!r} failed ({baseline.status}: "
                                   f"{baseline.reason}); fix it or choose another baseline= variant")
    native_raw, native = native, clone_tensors(native)
    poison_tensors(native_raw)
    ref = native if ref is None else ref
    baseline.checks += check_outputs(native, ref, native, tolerances)
    for live in lives:
        if live is baseline or not live.runnable:
            continue
        ok, out = guarded_call(live, args, limit_s, poison_like=native)
        if not ok:
            continue
        live.checks += check_outputs(out, ref, native, tolerances)
        live.add_flags(cheats.lowered_precision_flags(out, ref, native))
        poison_tensors(out)          # poison-on-free: a later run reusing this memory shows gaps
        if last:
            _async_checks(live, args, limit_s)
    poison_tensors(native)


def _async_checks(live: Live, args: tuple[Any, ...], limit_s: float) -> None:
    try:
        with StateGuard():
            flags = call_with_limit(cheats.async_work_flags, (live.variant.fn, clone_tensors(args)), limit_s)
        live.add_flags(flags)
    except Exception as exc:  # noqa: BLE001
        live.fail("error", f"raised {type(exc).__name__} on a repeated call: {exc}")


def _same_inputs(a: tuple[Any, ...], b: tuple[Any, ...]) -> bool:
    import torch

    ta, tb = tensor_leaves(a), tensor_leaves(b)
    floats = [(x, y) for (_, x), (_, y) in zip(ta, tb) if x.is_floating_point() and x.numel() > 1]
    return bool(floats) and all(x.shape == y.shape and torch.equal(x, y) for x, y in floats)
