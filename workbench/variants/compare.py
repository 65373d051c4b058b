"""``compare(variants, inputs=...)``: correctness first, then fair interleaved timing (extended
while undecided), then what changed, then a decision per variant and a DecisionRecord.

How it runs is one frozen value, ``CompareSettings`` (settings.py); the keyword arguments of
``compare`` are a convenience that builds it.  The phases themselves are in engine.py.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Mapping

import workbench.variants.engine as engine
import workbench.variants.record_builder as record_builder
from workbench.measurement import Measurement
from workbench.variants.engine import ComparisonInterrupted, Progress
from workbench.variants.isolation import stop_worker
from workbench.variants.results import Comparison, VariantResult
from workbench.variants.settings import CompareSettings, settings_from
from workbench.variants.tolerances import gradient_tolerance_overrides

if TYPE_CHECKING:
    from workbench.variants.spec import VariantLike
    from workbench.variants.sweep import ShapeSweep

__all__ = ["compare", "CompareSettings", "ComparisonInterrupted"]


def compare(
    variants: Mapping[str, VariantLike],
    inputs: Any = None,
    *,
    baseline: str | None = None,
    settings: CompareSettings | None = None,
    reference: Callable[..., Any] | None = None,
    hypothesis: Any = None,
    sweep: ShapeSweep | None = None,
    progress: Progress | None = None,
    mode: str | None = None,
    sweep_kept_only: bool = False,
    model: Any = None,
    optimizer: Any = None,
    params: Any = None,
    **options: Any,
) -> Comparison:
    """Compare variants of one computation; see the package docstring for every step.

    ``variants``: name -> callable, ``Variant`` or registry name (built from the baseline's
    function).  ``inputs``: a zero-argument callable returning the argument tuple (fresh random
    values each call: preferred), or a fixed tuple/tensor, or None for no arguments.
    ``baseline``: the reference variant (default "eager" if present, else the first).
    ``settings``: a ``CompareSettings``; any of its fields may also be given as keyword arguments
    (``checks=``, ``time_limit_s=``, ``budget_s=``, ``max_budget_s=``, ``min_rounds=``,
    ``max_rounds=``, ``confidence=``, ``min_effect=``, ``tolerances=``, ``profile=``,
    ``end_to_end_ms=``, ``seed=``, ``problem=``, ``timer=``), which override it.
    ``end_to_end_ms``: the whole program's (a profiled cell's) median time when the variants
    replace only part of it; a variant whose saving is under 2% of it is ``micro_only``.
    ``mode``: "training" checks the gradients of every input that requires grad and every
    parameter the callable reaches (a module, a bound method, a closure or lambda over a model: see
    ``reach.py``), as well as the outputs (``tolerances.GRADIENT_TOLERANCES``), and times each variant
    as a training step (forward and backward), so a forward-only speedup is never a keep; a call
    that runs its own backward (and optimizer step) is not backwarded again: what it changes (its
    gradients, parameters, optimizer state, buffers) is compared instead; "inference" checks outputs
    only; None (default): training when the baseline's output requires grad or its call computes
    gradients. With no gradient to compare on a training path every candidate is "cannot judge".
    The DecisionRecord states the mode and how many gradients and states were compared.
    ``model``, ``optimizer``, ``params``: an ``nn.Module`` / ``Optimizer`` (or a list) / an iterable
    or dict of tensors to snapshot, restore and compare besides what the callables reach.  Reached
    state is snapshotted once and restored before every checked call and every timed sample (outside
    the timed region), and put back at the end: the user's objects are left as they were.
    Raises ``NothingToCompareError`` when the baseline returns None and reaches nothing it changes.
    ``sweep``: a ``ShapeSweep`` run before the decisions (its failures become failure cases
    and a guard); ``sweep_kept_only``: sweep only the variants the main inputs decided keep.

    A KeyboardInterrupt stops the comparison: ``ComparisonInterrupted`` (a KeyboardInterrupt)
    says which phases had finished.
    """
    spec = settings_from(settings, options)
    phases = engine.Phases()
    try:
        return _compare(
            variants,
            inputs,
            spec,
            baseline=baseline,
            reference=reference,
            hypothesis=hypothesis,
            sweep=sweep,
            progress=progress,
            phases=phases,
            mode=mode,
            sweep_kept_only=sweep_kept_only,
            state_objects={"model": model, "optimizer": optimizer, "params": params},
        )
    except ComparisonInterrupted:
        raise
    except KeyboardInterrupt as exc:
        raise phases.interrupted() from exc
    finally:
        stop_worker()  # leave no thread of ours behind


def _compare(
    variants,
    inputs,
    spec: CompareSettings,
    *,
    baseline,
    reference,
    hypothesis,
    sweep,
    progress,
    phases,
    mode=None,
    sweep_kept_only=False,
    state_objects=None,
) -> Comparison:
    say = progress or (lambda stage, name: None)
    out = engine.run(
        variants,
        inputs,
        spec,
        baseline=baseline,
        reference=reference,
        progress=progress,
        phases=phases,
        mode=mode,
        **(state_objects or {}),
    )
    results, base = out.results, out.base
    if sweep is not None:
        from workbench.variants.sweep import apply_sweep

        phases.start("the shape sweep")
        only = {r.name for r in results if r.decision == "keep"} if sweep_kept_only else None
        results = apply_sweep(
            results,
            out.lives,
            base,
            sweep,
            tolerances=spec.tolerance_overrides,
            time_limit_s=spec.time_limit_s,
            end_to_end_ms=spec.end_to_end_ms,
            say=say,
            only=only,
            timer=spec.timer,
            min_effect=spec.min_effect,
        )
        phases.finish("the shape sweep")
    verdict, updated = (None, hypothesis)
    if hypothesis is not None:
        from workbench.variants.hypothesis_check import judge

        verdict, updated = judge(hypothesis, results, base.name)
    settings = {
        **spec.to_dict(),
        "reference_precision": out.precision,
        "tolerances": record_builder.tolerance_table(spec.tolerance_overrides),
        "notes": out.notes,
        "fresh_inputs": out.fresh,
        "timing": out.timing,
        "mode": out.mode,
        "state": out.state,
        "reach": out.reach,
    }
    if inputs is None:
        settings["inputs"] = "none"
    if out.reduced:
        settings["reduced_precision"] = out.reduced
    fixes = record_builder.fix_table(out.lives, base.name)
    if fixes:  # the rows built from catalog fixes: which fix, where it was applied (their records name it)
        settings["fixes"] = fixes
    if out.mode == "training":
        settings["gradient_tolerances"] = record_builder.tolerance_table(
            gradient_tolerance_overrides(spec.tolerance_overrides)
        )
    decision = record_builder.build_record(
        results,
        base.name,
        hypothesis=updated,
        problem=spec.problem,
        notes=out.notes,
        settings=settings,
        verdict=verdict,
    )
    say("done", "")
    return Comparison(
        base.name,
        tuple(results),
        decision,
        verdict,
        updated,
        out.roofs.get("machine_gbps"),
        settings,
        working_set_copy_gbps=out.roofs.get("same_size_gbps"),
        trace_paths=dict(out.trace_paths),
    )


def decide(res: VariantResult, base_timing: Measurement | None, e2e_ms: float | None) -> VariantResult:
    """Kept for callers of the old location; see ``engine.decide``."""
    return engine.decide(res, base_timing, e2e_ms)
