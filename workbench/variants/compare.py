"""``compare(variants, inputs=...)``: correctness first, then fair interleaved timing, then what
changed, then a decision per variant and a DecisionRecord for the comparison.
"""
from __future__ import annotations

from typing import Any, Callable, Mapping

from workbench.errors import InvalidArgumentError
from workbench.variants import cheats, record, registry
from workbench.variants.bandwidth import copy_gbps, machine_copy_gbps
from workbench.variants.checking import Live, run_checks
from workbench.variants.decision import classify
from workbench.variants.footprint import footprint_delta, profile_footprint
from workbench.variants.isolation import StateGuard, stop_worker
from workbench.variants.results import Comparison, VariantResult
from workbench.variants.spec import Variant, as_variant
from workbench.variants.stats import paired_speedup
from workbench.variants.timing import Timed, calibrate, pick_timer, run_interleaved, shared_calls_per_sample
from workbench.variants.tree import clone_tensors, tensor_leaves

Progress = Callable[[str, str], None]   # (stage, variant name) -> None


def compare(
    variants: Mapping[str, Any], inputs: Any = None, *, baseline: str | None = None,
    checks: int = 3, time_limit_s: float = 120.0, budget_s: float = 5.0, min_rounds: int = 10,
    max_rounds: int = 60, tolerances: dict[str, tuple[float, float]] | None = None,
    reference: Callable[..., Any] | None = None, hypothesis: Any = None, sweep: Any = None,
    profile: bool = True, end_to_end_ms: float | None = None, problem: str = "", seed: int = 0,
    progress: Progress | None = None,
) -> Comparison:
    """Compare variants of one computation; see the package docstring for every step.

    ``variants``: name -> callable, ``Variant`` or registry name (built from the baseline's
    function).  ``inputs``: a zero-argument callable returning the argument tuple (fresh random
    values each call: preferred), or a fixed tuple/tensor, or None for no arguments.
    ``baseline``: the reference variant (default "eager" if present, else the first).
    ``end_to_end_ms``: the whole program's (a profiled cell's) median time when the variants
    replace only part of it; a variant whose saving is under 2% of it is ``micro_only``.
    """
    try:
        return _compare(variants, inputs, baseline=baseline, checks=checks, time_limit_s=time_limit_s,
                        budget_s=budget_s, min_rounds=min_rounds, max_rounds=max_rounds, tolerances=tolerances,
                        reference=reference, hypothesis=hypothesis, sweep=sweep, profile=profile,
                        end_to_end_ms=end_to_end_ms, problem=problem, seed=seed, progress=progress)
    finally:
        stop_worker()          # leave no thread of ours behind


def _compare(variants, inputs, *, baseline, checks, time_limit_s, budget_s, min_rounds, max_rounds,
             tolerances, reference, hypothesis, sweep, profile, end_to_end_ms, problem, seed, progress):
    lives, base = _prepare(variants, baseline)
    make_inputs, fresh = _input_factory(inputs)
    say = progress or (lambda stage, name: None)
    say("correctness", "")
    precision, notes = run_checks(lives, base, make_inputs, checks=checks, limit_s=time_limit_s,
                                  tolerances=tolerances, reference=reference)
    if not fresh:
        notes.append("fixed inputs: every check used the same values; pass a callable for fresh ones")
    _mark_incorrect(lives, precision, checks)
    say("timing", "")
    timing_args = make_inputs()
    timed, bytes_moved, roofs = _time_all(lives, base, timing_args, budget_s, min_rounds, max_rounds, seed)
    footprints = _footprints(lives, timing_args, say) if profile else {}
    results = [_result(lv, base, timed, footprints, bytes_moved, roofs, precision, checks, end_to_end_ms)
               for lv in lives]
    if sweep is not None:
        from workbench.variants.sweep import apply_sweep

        results = apply_sweep(results, lives, base, sweep, tolerances=tolerances, time_limit_s=time_limit_s,
                              end_to_end_ms=end_to_end_ms, say=say)
    verdict, updated = (None, hypothesis)
    if hypothesis is not None:
        from workbench.variants.hypothesis_check import judge

        verdict, updated = judge(hypothesis, results, base.name)
    settings = {"checks": checks, "budget_s": budget_s, "min_rounds": min_rounds, "max_rounds": max_rounds,
                "time_limit_s": time_limit_s, "seed": seed, "reference_precision": precision,
                "end_to_end_ms": end_to_end_ms,
                "tolerances": record.tolerance_table(tolerances), "notes": notes}
    decision = record.build_record(results, base.name, hypothesis=updated, problem=problem, notes=notes,
                                   settings=settings, verdict=verdict)
    say("done", "")
    return Comparison(base.name, tuple(results), decision, verdict, updated, roofs.get("machine_gbps"), settings,
                      working_set_copy_gbps=roofs.get("same_size_gbps"))


def _prepare(variants: Mapping[str, Any], baseline: str | None) -> tuple[list[Live], Live]:
    if not isinstance(variants, Mapping) or not variants:
        raise InvalidArgumentError("compare() needs a non-empty dict of name -> callable, e.g. "
                                   "{'eager': f, 'compiled': wb.variants.compiled(f)}")
    names = list(variants)
    base_name = baseline or ("eager" if "eager" in variants else names[0])
    if base_name not in variants:
        raise InvalidArgumentError(f"baseline {base_name!r} is not among the variants {names}")
    base_obj = variants[base_name]
    if isinstance(base_obj, str):
        raise InvalidArgumentError(f"the baseline {base_name!r} must be a callable, not a registry name")
    base_variant = as_variant(base_name, base_obj)
    built: dict[str, Variant] = {}
    for name, obj in variants.items():
        if isinstance(obj, str):
            built[name] = registry.build(obj, base_variant.fn, name=name)
        else:
            built[name] = base_variant if name == base_name else as_variant(name, obj)
    lives = [Live(built[base_name])] + [Live(v) for n, v in built.items() if n != base_name]
    for live in lives:
        reason = live.variant.applicability()
        if reason:
            live.fail("not_applicable", reason)
    if not lives[0].runnable:
        raise InvalidArgumentError(f"the baseline {base_name!r} cannot run here ({lives[0].reason}); "
                                   f"choose a baseline that runs on this machine")
    return lives, lives[0]


def _input_factory(inputs: Any) -> tuple[Callable[[], tuple[Any, ...]], bool]:
    def as_args(value: Any) -> tuple[Any, ...]:
        return value if isinstance(value, tuple) else (value,)

    if inputs is None:
        return (lambda: ()), True
    if callable(inputs):
        return (lambda: as_args(inputs())), True
    fixed = as_args(tuple(inputs) if isinstance(inputs, list) else inputs)
    return (lambda: clone_tensors(fixed)), False


def _mark_incorrect(lives: list[Live], precision: str, checks: int) -> None:
    for live in lives[1:]:
        result = live.correctness(checks, precision)
        if live.runnable and result is not None and not result.passed:
            live.fail("incorrect", result.reason)


def _time_all(lives, base, args, budget_s, min_rounds, max_rounds, seed):
    runnable = [lv for lv in lives if lv.runnable]
    on_cuda = any(t.device.type == "cuda" for _, t in tensor_leaves(args))
    timer = pick_timer(on_cuda)
    items = [Timed(lv.name, lv.variant.fn, clone_tensors(args)) for lv in runnable]
    with StateGuard() as guard:         # calibration calls the variants too
        for lv, item in zip(runnable, items):
            calibrate(item, timer, lv.warm_call_ms or lv.first_call_ms or 1.0)
        shared_k = shared_calls_per_sample(items)   # the same for all: back-to-back calls
        for item in items:                          # warm caches alike
            item.calls_per_sample = shared_k
        out = base.variant.fn(*clone_tensors(args))
        result = run_interleaved(items, timer, min_rounds=min_rounds, max_rounds=max_rounds,
                                 budget_s=budget_s, seed=seed)
    patched = cheats.timer_patches(guard.changed)   # restored; our timer never used them anyway
    for lv in runnable:
        if patched and any(f.startswith("patched timer") for f in lv.flags):
            lv.add_flags([f"{p} (again while timed)" for p in patched])
    nbytes = cheats.compulsory_bytes(args, out)
    device = "cuda" if on_cuda else "cpu"
    roofs = {"machine_gbps": machine_copy_gbps(device), "same_size_gbps": copy_gbps(max(nbytes, 1), device)}
    return result, nbytes, roofs


def _footprints(lives: list[Live], args: tuple[Any, ...], say: Progress) -> dict[str, dict[str, Any]]:
    out = {}
    for lv in lives:
        if lv.runnable:
            say("profile", lv.name)
            with StateGuard():
                out[lv.name] = profile_footprint(lv.variant.fn, clone_tensors(args))
    return out


def _result(lv: Live, base: Live, timed, footprints, nbytes, roofs, precision, checks, e2e_ms) -> VariantResult:
    v = lv.variant
    timing = timed.measurements.get(lv.name) if lv.runnable else None
    speedup = None
    flags = list(lv.flags)
    if timing is not None:
        flags += list(timing.warnings)
        if lv is not base:
            speedup = paired_speedup(timed.measurements[base.name].samples_ms, timing.samples_ms)
            if speedup.noisy:
                flags.append(f"noisy: the speedup interval spans {speedup.ci_high - speedup.ci_low:.2g}")
            roof = cheats.roofline_flag(nbytes, timing.median_ms, max(roofs.values()))
            base_ms = timed.measurements[base.name].median_ms
            base_over = cheats.roofline_flag(nbytes, base_ms, max(roofs.values()))  # views: no compulsory work
            if roof and v.timing_meaningful and not base_over:
                flags.append(roof)
    fp = footprints.get(lv.name, {})
    if fp and lv is not base and base.name in footprints:
        fp = {**fp, "delta": footprint_delta(fp, footprints[base.name])}
    gbps = nbytes / (timing.median_ms * 1e-3) / 1e9 if timing is not None and timing.median_ms > 0 else None
    res = VariantResult(
        name=lv.name, kind=v.kind, status=lv.status, reason=lv.reason, numerical_class=v.numerical_class,
        requires=v.requires, correctness=lv.correctness(checks, precision), timing=timing,
        setup_ms=lv.setup_ms, speedup=speedup, flags=tuple(flags), footprint=fp, bytes_moved=nbytes,
        achieved_gbps=gbps, bandwidth_share=(gbps / roofs["same_size_gbps"]) if gbps else None,
        timing_meaningful=v.timing_meaningful)
    if lv is base:
        return res.with_(decision="baseline", decision_reason="the reference the others are measured against")
    return decide(res, timed.measurements.get(base.name), e2e_ms)


def decide(res: VariantResult, base_timing: Any, e2e_ms: float | None) -> VariantResult:
    saving = (base_timing.median_ms - res.timing.median_ms) if (base_timing and res.timing) else 0.0
    verdict = classify(status=res.status, reason=res.reason, flags=res.flags, speedup=res.speedup,
                       timing_meaningful=res.timing_meaningful, failure_cases=res.failure_cases,
                       saving_ms=saving, setup_ms=res.setup_ms or 0.0, end_to_end_ms=e2e_ms)
    return res.with_(decision=verdict.decision, decision_reason=verdict.reason)
