"""Where a variant stops helping: a sweep over shapes and dtypes, run on request.

``ShapeSweep(make_inputs, shapes, dtypes)``: ``make_inputs(shape, dtype)`` builds the arguments
for one case.  ``sweep_shapes(target)`` proposes small, target and large sizes, non-powers of
two and awkward ones (1, primes).  Each case is a short comparison of its own (correctness,
then timing); the cases where a variant is slower or wrong become its failure cases and its
guard, and move a ``keep`` to ``keep_guarded``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Collection, Mapping, Sequence

from workbench.errors import InvalidArgumentError
from workbench.variants.results import VariantResult

if TYPE_CHECKING:
    from workbench.variants.correctness_phase import Live
    from workbench.variants.engine import Progress
    from workbench.variants.timing import Timer


def sweep_shapes(target: int | Sequence[int]) -> tuple[tuple[int, ...], ...]:
    """Small, target and large sizes of the leading dimension, plus awkward ones, in order."""
    shape = (int(target),) if isinstance(target, int) else tuple(int(s) for s in target)
    if not shape or shape[0] < 1:
        raise InvalidArgumentError(f"sweep_shapes needs a target shape with a positive first size, got {target!r}")
    lead, rest = shape[0], shape[1:]
    sizes = [1, 17, max(2, lead // 64), max(2, lead // 8), lead, lead + 1, 4 * lead]
    if lead > 1000:
        sizes.append(1000)  # a round decimal, not a power of two
    out = []
    for n in sizes:
        if (n,) + rest not in out:
            out.append((n,) + rest)
    return tuple(out)


# ``make(shape, dtype) -> the argument tuple``: the user's factory of a sweep's inputs (dtype a torch dtype).
SweepFactory = Callable[[tuple[int, ...], Any], Any]


@dataclass(frozen=True)
class ShapeSweep:
    make_inputs: SweepFactory
    shapes: tuple[tuple[int, ...], ...]
    dtypes: tuple[str, ...] = ("float32",)
    budget_s: float = 0.5
    checks: int = 1

    def cases(self) -> list[tuple[tuple[int, ...], str]]:
        return [(tuple(s), d) for d in self.dtypes for s in self.shapes]


def _case_inputs(sweep: ShapeSweep, shape: tuple[int, ...], dtype: str) -> Callable[[], Any]:
    import torch

    torch_dtype = getattr(torch, dtype)
    return lambda: sweep.make_inputs(shape, torch_dtype)


def run_case(variants: dict[str, Any], baseline: str, sweep: ShapeSweep, shape, dtype, **kw: Any) -> dict[str, dict]:
    """One case: {variant: {"case", "ok", "status", "speedup", "reason"}} for each candidate;
    ``kw``: CompareSettings fields (tolerances, time_limit_s)."""
    import workbench.variants.engine as engine
    from workbench.variants.settings import CompareSettings

    label = f"{shape} {dtype}"
    spec = CompareSettings(
        checks=sweep.checks, budget_s=sweep.budget_s, min_rounds=8, max_rounds=200, profile=False, **kw
    )
    results = engine.run(variants, _case_inputs(sweep, shape, dtype), spec, baseline=baseline).results
    out = {}
    for r in results:
        if r.name == baseline:
            continue
        s = r.speedup
        slower = s is not None and s.slower
        ok = r.status == "ok" and not slower
        why = r.reason if r.status != "ok" else (f"slower {s.describe()}" if s is not None and slower else "")
        out[r.name] = {
            "case": label,
            "ok": ok,
            "status": r.status,
            "speedup": r.speedup.point if r.speedup else None,
            "reason": why,
        }
    return out


def apply_sweep(
    results: list[VariantResult],
    lives: list[Live],
    base: Live,
    sweep: ShapeSweep,
    *,
    tolerances: Mapping[str, tuple[float, float]] | None,
    time_limit_s: float,
    end_to_end_ms: float | None,
    say: Progress,
    only: Collection[str] | None = None,
    timer: Timer | None = None,
    min_effect: float = 0.0,
) -> list[VariantResult]:
    """Run every case for the candidates that passed (``only``: those names among them, e.g. the
    ones decided keep); fold failures into their decisions. ``timer``: the comparison's timer."""
    from workbench.variants.engine import decide

    if not isinstance(sweep, ShapeSweep):
        raise InvalidArgumentError("sweep= takes a wb.variants.ShapeSweep(make_inputs, shapes, dtypes)")
    live_ok = {lv.name: lv.variant for lv in lives[1:] if lv.runnable and (only is None or lv.name in only)}
    if not live_ok:
        return results
    variants = {base.name: base.variant, **live_ok}
    per_variant: dict[str, list[dict]] = {name: [] for name in live_ok}
    for shape, dtype in sweep.cases():
        say("sweep", f"{shape} {dtype}")
        try:
            found = run_case(
                variants, base.name, sweep, shape, dtype, tolerances=tolerances, time_limit_s=time_limit_s, timer=timer
            )
        except InvalidArgumentError as exc:  # the baseline itself cannot run this case
            found = {
                name: {
                    "case": f"{shape} {dtype}",
                    "ok": True,
                    "status": "not_applicable",
                    "speedup": None,
                    "reason": f"the baseline cannot run this case ({exc})",
                }
                for name in live_ok
            }
        for name, entry in found.items():
            per_variant[name].append(entry)
    base_timing = next(r.timing for r in results if r.name == base.name)
    out = []
    for r in results:
        entries = per_variant.get(r.name)
        if entries is None:
            out.append(r)
            continue
        failures = tuple(f"{e['case']}: {e['reason']}" for e in entries if not e["ok"])
        out.append(
            decide(r.with_(sweep=tuple(entries), failure_cases=failures), base_timing, end_to_end_ms, min_effect)
        )
    return out
