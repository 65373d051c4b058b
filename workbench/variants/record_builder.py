"""Build the comparison's DecisionRecord from its rows: the winner (or the most promising
candidate), the numbers behind it, what was rejected and why, and the environment.

A variant built from a catalog fix (``variant.options["fix"]``: ``run.fixes.variants()``, a fix named
in ``wb.compare``, ``%%gpuvariant --fix``) is recorded as that fix: the comparison's
``settings["fixes"]`` (``fix_table``) says which fix each such row is, what it changes and where it
was applied; its record names the fix and where (``change``, ``fix``), and its numerical class with
the tolerance its outputs (and gradients) were judged with; a reduced-precision fix says so in its
remaining risk."""

from __future__ import annotations

import platform
from typing import Any

from workbench.variants.decision import DecisionRecord
from workbench.variants.results import VariantResult
from workbench.variants.tolerances import DEFAULT_TOLERANCES

PRIORITY = {"keep": 0, "keep_guarded": 1, "micro_only": 2, "need_more_evidence": 3, "reject": 4}


def tolerance_table(overrides: dict[str, tuple[float, float]] | None) -> dict[str, dict[str, float]]:
    table = {**DEFAULT_TOLERANCES, **(overrides or {})}
    return {k: {"rtol": float(r), "atol": float(a)} for k, (r, a) in table.items()}


def environment() -> dict[str, Any]:
    import torch

    env = {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "torch": torch.__version__,
        "cpu_threads": torch.get_num_threads(),
        "cuda_available": torch.cuda.is_available(),
        "float32_matmul_precision": torch.get_float32_matmul_precision(),
    }
    if torch.cuda.is_available():
        env["device"] = torch.cuda.get_device_name()
        env["cuda"] = torch.version.cuda or torch.version.hip
    return env


def fix_table(lives: Any, baseline: str = "") -> dict[str, dict[str, Any]]:
    """variant name -> the catalog fix it was built from (name, what it changes, where it was applied,
    why, its declared numerical class and tolerance), for the rows whose variant says so
    (``variant.options["fix"]``); the baseline and plain callables are left out."""
    out: dict[str, dict[str, Any]] = {}
    for lv in lives or ():
        variant = getattr(lv, "variant", None)
        options = dict(getattr(variant, "options", None) or {})
        fix = options.get("fix")
        name = str(getattr(variant, "name", ""))
        if not fix or name == baseline or fix == "eager":
            continue
        entry: dict[str, Any] = {
            "name": str(fix),
            "changes": str(options.get("fix_changes", "") or ""),
            "where": str(options.get("fix_where", "") or ""),
            "reason": str(options.get("fix_reason", "") or ""),
            "declared_class": str(getattr(variant, "numerical_class", "") or ""),
        }
        tolerance = options.get("tolerance")
        if isinstance(tolerance, (tuple, list)) and len(tolerance) == 2:
            entry["declared_tolerance"] = {"rtol": float(tolerance[0]), "atol": float(tolerance[1])}
        out[name] = entry
    return out


def _tolerances_used(win: VariantResult, settings: dict[str, Any]) -> dict[str, dict[str, dict[str, float]]]:
    """What ``win`` was judged with: {"outputs": {dtype: {rtol, atol}}, "gradients": {...}}; a
    reduced-precision row's are its precision's rows; {} where no check ran."""
    reduced = (settings.get("reduced_precision") or {}).get(win.name)
    if isinstance(reduced, dict) and reduced.get("outputs"):
        dtype = str(reduced.get("dtype", "reduced"))
        used = {"outputs": {dtype: dict(reduced["outputs"])}}
        if reduced.get("gradients") and _gradients_compared(win):
            used["gradients"] = {dtype: dict(reduced["gradients"])}
        return used
    outputs: dict[str, dict[str, float]] = {}
    for check in win.correctness.outputs if win.correctness is not None else ():
        t = check.tolerance
        if t is not None and t.dtype not in outputs:
            outputs[t.dtype] = {"rtol": float(t.rtol), "atol": float(t.atol)}
    used = {"outputs": outputs} if outputs else {}
    grads = settings.get("gradient_tolerances") or {}
    if outputs and grads and _gradients_compared(win):
        used["gradients"] = {d: dict(grads[d]) for d in outputs if d in grads}
    return used


def _gradients_compared(win: VariantResult) -> bool:
    c = win.compared or {}
    return bool(int(c.get("input_gradients", 0) or 0) + int(c.get("parameter_gradients", 0) or 0))


def tolerance_text(used: dict[str, dict[str, dict[str, float]]]) -> str:
    """``{"outputs": {"float32": {"rtol": 1e-4, "atol": 1e-5}}}`` in words."""

    def rows(table: dict[str, dict[str, float]]) -> str:
        return ", ".join(f"{dtype} rtol {t['rtol']:g}, atol {t['atol']:g}" for dtype, t in table.items())

    if not used.get("outputs"):
        return ""
    text = f"outputs judged with {rows(used['outputs'])}"
    if used.get("gradients"):
        text += f"; gradients with {rows(used['gradients'])}"
    return text


def fix_record(win: VariantResult, info: dict[str, Any] | None, settings: dict[str, Any]) -> dict[str, Any]:
    """The record's ``fix`` field for a row built from a catalog fix ({} for any other row): the fix,
    what it changes, where it was applied and why, its numerical class (as measured, and as the fix
    declares it) and the tolerance it was judged with."""
    if not info:
        return {}
    used = _tolerances_used(win, settings)
    out = {
        "name": info.get("name", win.name),
        "changes": info.get("changes", ""),
        "where": info.get("where") or "the whole call",
        "reason": info.get("reason", ""),
        "numerical_class": win.numerical_class,
        "declared_class": info.get("declared_class") or win.numerical_class,
        "tolerance": tolerance_text(used) or _unchecked(win),
        "tolerances": used,
    }
    if info.get("declared_tolerance"):
        out["declared_tolerance"] = dict(info["declared_tolerance"])
    out["reduced_precision"] = "reduced precision" in (out["numerical_class"], out["declared_class"])
    return out


def _unchecked(win: VariantResult) -> str:
    return f"no correctness check ran ({win.status}" + (f": {win.reason}" if win.reason else "") + ")"


def _fix_change(win: VariantResult, fix: dict[str, Any]) -> str:
    named = f"the fix `{fix['name']}`" + (f" ({fix['changes']})" if fix.get("changes") else "")
    return f"{win.name}: {named}, applied at {fix['where']}"


def _pick(candidates: list[VariantResult]) -> VariantResult | None:
    def key(r: VariantResult) -> tuple[int, float]:
        return PRIORITY.get(r.decision, 9), -(r.speedup.point if r.speedup else 0.0)

    return min(candidates, key=key) if candidates else None


def _ms(r: VariantResult) -> str:
    if r.timing is None:
        return "not timed"
    lo, hi = r.timing.median_ci_ms()
    return f"{r.timing.median_ms:.4g} ms [95% CI {lo:.4g}-{hi:.4g}], p95 {r.timing.p95_ms:.4g} ms, n={r.timing.n}"


def _evidence(
    base: VariantResult, win: VariantResult, verdict: dict | None, notes: list[str], timing_text: str = ""
) -> list[str]:
    ev = [f"{base.name}: {_ms(base)}", f"{win.name}: {_ms(win)}"]
    if win.speedup:
        s = win.speedup
        family = f", Holm-adjusted over {s.family_size} candidates" if s.family_size > 1 else ""
        slower = f", {1 / s.point:.3g}x slower" if s.slower else ""
        ev.append(
            f"speedup x{s.point:.3g}{slower} (paired {s.confidence:.3g} CI {s.ci_low:.3g}-{s.ci_high:.3g}"
            f"{family}; bootstrap {s.bootstrap_low:.3g}-{s.bootstrap_high:.3g}; p95 ratio x{s.p95_ratio:.3g}; "
            f"smallest detectable change about {s.min_detectable:.1%})"
        )
    if win.setup_ms is not None:
        ev.append(f"setup (compile/capture, first call minus a warm call): {win.setup_ms:.4g} ms")
    if win.achieved_gbps:
        ev.append(
            f"{win.bytes_moved / 1e6:.3g} MB compulsory traffic at {win.achieved_gbps:.3g} GB/s = "
            f"{win.bandwidth_share:.0%} of the measured bandwidth of a copy of the same working set"
        )
    delta = win.footprint.get("delta") if win.footprint else None
    if delta:
        moved = ", ".join(describe_delta(k, v) for k, v in delta.items() if v)
        ev.append(f"what changed per call vs {base.name}: {moved or 'no counted metric moved'}")
    if timing_text:
        ev.append(f"timing: {timing_text}")
    if verdict:
        ev.append(f"hypothesis {verdict.get('status')}: {verdict.get('explanation')}")
    return ev + [f"note: {n}" for n in notes]


METRIC_WORDS = {  # metric -> (unit noun, "fewer"/"less" word, "more" word)
    "op_count": ("operator", "fewer", "more"),
    "kernel_count": ("kernel", "fewer", "more"),
    "launch_count": ("kernel launch", "fewer", "more"),
    "sync_count": ("host sync", "fewer", "more"),
    "alloc_count": ("allocation", "fewer", "more"),
}
BYTE_METRICS = {"alloc_bytes": "allocated", "peak_memory_bytes": "peak memory"}


def readable_bytes(n: float) -> str:
    """Decimal units, three significant digits: 151455744 -> '151 MB'."""
    n = abs(float(n))
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{n:.0f} B"


def describe_delta(metric: str, value: float) -> str:
    """One footprint change in words: '7 fewer operators', '151 MB less allocated'."""
    if metric in BYTE_METRICS:
        return f"{readable_bytes(value)} {'less' if value < 0 else 'more'} {BYTE_METRICS[metric]}"
    noun, fewer, more = METRIC_WORDS.get(metric, (metric.replace("_", " "), "fewer", "more"))
    count = abs(int(value))
    return f"{count} {fewer if value < 0 else more} {noun}{'' if count == 1 else 's'}"


def build_record(
    results: list[VariantResult],
    baseline: str,
    *,
    hypothesis: Any = None,
    problem: str = "",
    notes: list[str] | None = None,
    settings: dict[str, Any] | None = None,
    verdict: dict | None = None,
) -> DecisionRecord:
    base = next(r for r in results if r.name == baseline)
    candidates = [r for r in results if r.name != baseline]
    win = _pick(candidates)
    notes = list(notes or [])
    settings = dict(settings or {})
    timing_text = (settings.get("timing") or {}).get("text", "")
    shown = _record_settings(settings)
    if win is None:
        return DecisionRecord(
            "need_more_evidence",
            baseline,
            "no candidate variant to compare",
            problem or "",
            "",
            "none",
            base.numerical_class,
            "",
            "",
            baseline,
            tuple(_evidence(base, base, verdict, notes, timing_text)),
            _ms(base),
            (),
            (),
            (),
            environment(),
            shown,
            mode=_mode(settings),
        )
    good = win.decision in ("keep", "keep_guarded", "micro_only")
    fix = fix_record(win, (settings.get("fixes") or {}).get(win.name), settings)
    return DecisionRecord(
        decision=win.decision,
        variant=win.name,
        reason=win.decision_reason,
        problem=problem or _problem(base, hypothesis),
        bottleneck=_bottleneck(hypothesis),
        change=_fix_change(win, fix) if fix else f"{win.name} ({win.kind})",
        numerical_class=_numerical_text(win, base),
        why_safe=_why_safe(win, base, settings) + (_fix_safety(fix) if fix and _passed(win) else ""),
        guard=_guard(win) if good else "",
        fallback=f"{baseline}, the original code",
        evidence=tuple(_evidence(base, win, verdict, notes, timing_text)),
        result=_result_line(base, win),
        rejected_alternatives=tuple(
            f"{r.name}: {r.decision} — {r.decision_reason}" for r in candidates if r is not win
        ),
        remaining_risk=tuple(_risks(win, settings) + _fix_risks(fix)),
        failure_cases=win.failure_cases,
        environment=environment(),
        settings=shown,
        mode=_mode(settings),
        fix=fix,
    )


def _passed(win: VariantResult) -> bool:
    return win.correctness is not None and win.correctness.passed


def _fix_safety(fix: dict[str, Any]) -> str:
    """What the fix's numerical class meant for the check: the tolerance it was judged with."""
    return f"; the fix is '{fix['numerical_class']}': {fix['tolerance']}" if fix.get("tolerances") else ""


def _fix_risks(fix: dict[str, Any]) -> list[str]:
    if not fix:
        return []
    risks = []
    if fix.get("reduced_precision"):
        risks.append(
            f"the fix `{fix['name']}` computes in reduced precision ({fix['tolerance']}): its results differ "
            "from the original's beyond rounding; check the accuracy your use needs (a loss curve, an "
            "evaluation metric) before keeping it"
        )
    declared = fix.get("declared_tolerance")
    used = (fix.get("tolerances") or {}).get("outputs", {}).get("float32")
    if declared and used and (declared["rtol"], declared["atol"]) != (used["rtol"], used["atol"]):
        risks.append(
            f"the fix `{fix['name']}` declares float32 tolerances rtol {declared['rtol']:g}, atol "
            f"{declared['atol']:g}; this comparison judged it with rtol {used['rtol']:g}, atol {used['atol']:g}"
        )
    return risks


def _mode(settings: dict[str, Any]) -> str:
    return "training" if settings.get("mode") == "training" else "inference"


def _record_settings(settings: dict[str, Any]) -> dict[str, Any]:
    """The CompareSettings fields (and the reference precision) as the record states them."""
    keep = (
        "checks",
        "time_limit_s",
        "budget_s",
        "max_budget_s",
        "timing_cap_s",
        "min_rounds",
        "max_rounds",
        "confidence",
        "interim_confidence",
        "min_effect",
        "profile",
        "end_to_end_ms",
        "seed",
        "timer",
        "reference_precision",
        "fresh_inputs",
        "inputs",
        "mode",
        "state",
        "reach",
        "reduced_precision",
    )
    out = {k: settings[k] for k in keep if k in settings}
    if settings.get("tolerances"):
        out["tolerances"] = settings["tolerances"]
    if settings.get("gradient_tolerances"):
        out["gradient_tolerances"] = settings["gradient_tolerances"]
    return out


def _numerical_text(win: VariantResult, base: VariantResult) -> str:
    """The measured numerical class: "exact" is said only of outputs bit-identical to the baseline's."""
    return win.numerical_class


def _problem(base: VariantResult, hypothesis: Any) -> str:
    if hypothesis is not None:
        return f"{getattr(hypothesis, 'title', '')}: {getattr(hypothesis, 'observed', '')}".strip(": ")
    return f"{base.name} takes {base.timing.median_ms:.4g} ms per call" if base.timing else base.name


def _bottleneck(hypothesis: Any) -> str:
    if hypothesis is None:
        return "not diagnosed here (no hypothesis was given to compare())"
    return f"{getattr(hypothesis, 'category', '?')}: {getattr(hypothesis, 'mechanism', '')}".strip(": ")


def _why_safe(win: VariantResult, base: VariantResult, settings: dict[str, Any]) -> str:
    c = win.correctness
    if c is None or not c.passed:
        return "not shown: " + (c.reason if c else "no correctness check ran")
    fresh = settings.get("fresh_inputs", True)
    inputs = "with fresh random inputs each check" if fresh else "on the same fixed inputs each check"
    if settings.get("inputs") == "none":
        inputs = "with no inputs (the callable takes none: it runs on the data it closes over)"
    ref = (
        "the float64 reference"
        if c.reference_precision == "float64"
        else f"the baseline's own output ({c.reference_precision} precision: no float64 reference ran)"
    )
    errors = f"max abs err {c.max_abs_err:.3g}, max rel err {c.max_rel_err:.3g} against it"
    if win.numerical_class == "exact" and c.reference_precision == "float64" and c.max_abs_err > 0:
        errors = (
            f"bit-identical to {base.name}'s output; both differ from float64 by at most "
            f"{c.max_abs_err:.3g} abs, {c.max_rel_err:.3g} rel (the dtype's own rounding)"
        )
    grads = _gradient_text(win, settings)
    return f"matches {ref} on {c.checks} checks {inputs} ({errors}; tolerances by dtype in settings){grads}"


def _gradient_text(win: VariantResult, settings: dict[str, Any]) -> str:
    """Exactly what else was compared: how many gradients, parameter values, optimizer states, buffers."""
    c = win.compared or {}
    parts = []
    for key, word in (
        ("input_gradients", "input gradient"),
        ("parameter_gradients", "parameter gradient"),
        ("parameter_values", "updated parameter value"),
        ("optimizer_states", "optimizer state"),
        ("buffers", "buffer"),
    ):
        n = int(c.get(key, 0) or 0)
        if n:
            parts.append(f"{n} {word}{'s' if n != 1 else ''}")
    training = settings.get("mode") == "training"
    reduced = f"; {win.precision}, judged with its precision's tolerances" if win.precision else ""
    if parts:
        worst = (
            f", largest gradient error {win.max_grad_rel_err:.3g} of the gradient's largest value"
            if win.max_grad_rel_err is not None
            else ""
        )
        return f"; {', '.join(parts)} match the baseline's too (gradient tolerances in settings{worst}){reduced}"
    if training:
        return f"; no gradient was compared on this training path{reduced}"
    return reduced


def _guard(win: VariantResult) -> str:
    if win.failure_cases:
        ok = [s["case"] for s in win.sweep if s.get("ok")]
        return f"use only on the swept cases where it won: {', '.join(ok) or 'none'}; else the fallback"
    if win.kind == "cuda_graph":
        return "input shapes, dtypes and devices equal to the captured ones"
    if "over the memory budget" in (win.decision_reason or ""):
        peak = (win.footprint or {}).get("peak_memory_bytes") or 0
        return (
            f"only where {int(peak):,} bytes of peak memory are free (it is over the memory budget); else the fallback"
        )
    return "none needed for the measured inputs"


def _result_line(base: VariantResult, win: VariantResult) -> str:
    s = win.speedup
    if base.timing is None or win.timing is None or s is None:
        return f"not timed ({win.status}: {win.reason})"
    slower = f", {1 / s.point:.3g}x slower" if s.slower else ""
    return (
        f"{base.timing.median_ms:.4g} ms -> {win.timing.median_ms:.4g} ms per call "
        f"(x{s.point:.3g}{slower}, {s.confidence:.3g} CI {s.ci_low:.3g}-{s.ci_high:.3g})"
    )


def _risks(win: VariantResult, settings: dict[str, Any] | None = None) -> list[str]:
    risks = list(win.flags)
    if win.numerical_class == "reordered":
        risks.append("numerics are 'reordered': results differ from the original's in the last bits")
    elif win.numerical_class != "exact":
        risks.append(f"numerics are '{win.numerical_class}': results differ from the original's beyond rounding")
    if win.correctness is not None:
        checks = win.correctness.checks
        settings = settings or {}
        if settings.get("inputs") == "none":  # a cell, a step taking no arguments: the data it closes over
            risks.append(f"correctness shown on {checks} call{'s' if checks != 1 else ''} on the same data only")
        elif settings.get("fresh_inputs") is False:
            risks.append(f"correctness shown on the same fixed inputs only ({checks} checks)")
        else:
            risks.append(f"correctness shown on {checks} random input{'s' if checks != 1 else ''} only")
    return risks
