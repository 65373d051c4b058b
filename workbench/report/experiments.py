"""The report's experiments: the variants the run's hypotheses suggest, run on the workload.

``run_experiments(spec, run)`` takes the registry variants that the ranked hypotheses name (in
rank order, at most ``MAX_VARIANTS``; ``triton`` needs the user's kernel and is left out),
compares them with the workload as written through ``wb.compare`` (correctness against a
float64 reference, interleaved timing, footprint, the decision record), and holds the first
suggesting hypothesis against what was measured. CUDA-only variants stay in the table as not
applicable, with the reason, on a machine without a GPU. The result is saved as JSON beside the
report (``experiments.json``) for the template to show.
"""

from __future__ import annotations

import json
import os
import statistics
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable

import workbench.units as units

if TYPE_CHECKING:
    from workbench.capture.run import RunRecord
    from workbench.hypotheses.hypothesis import Hypothesis
    from workbench.variants.results import Comparison

EXPERIMENTS_FILE = "experiments.json"
MAX_VARIANTS = 4
NOT_FROM_FUNCTION = {"eager", "triton"}  # the baseline itself; a Triton variant needs the user's kernel
BUDGET_S = 4.0


def suggested_variants(
    hypotheses: Iterable[Hypothesis], limit: int = MAX_VARIANTS
) -> tuple[list[str], Hypothesis | None]:
    """Registry names the hypotheses suggest, in rank order, and the first hypothesis suggesting one."""
    import workbench.variants.registry as registry

    known, names = set(registry.names()) - NOT_FROM_FUNCTION, []
    first: Hypothesis | None = None
    for h in hypotheses:
        for name in h.suggested_variants or ():
            if name in known and name not in names:
                names.append(name)
                first = first or h
    return names[:limit], first


def run_experiments(
    spec: str,
    run: RunRecord,
    *,
    budget_s: float = BUDGET_S,
    resolved: tuple[Callable[..., Any], tuple[Any, ...]] | None = None,
) -> Comparison | None:
    """The comparison of the suggested variants with ``spec`` as written; None when no hypothesis
    suggests a variant that can be built from the function alone. ``resolved``: the (function,
    arguments) ``spec`` was already resolved to (``workload_inputs``)."""
    from workbench.hypotheses import diagnose
    from workbench.report.workload import workload_inputs
    from workbench.variants.compare import compare

    # the public ProfileRun carries its ranked hypotheses; the report's RunRecord is diagnosed here
    ranked = run.hypotheses if hasattr(run, "hypotheses") else diagnose(run).hypotheses
    names, hypothesis = suggested_variants(ranked)
    if not names:
        return None
    func, inputs = workload_inputs(spec, resolved)
    problem = f"{spec}: {hypothesis.title if hypothesis is not None else ''}".rstrip(": ")
    return compare(
        {"eager": func, **{n: n for n in names}},
        inputs=inputs,
        hypothesis=hypothesis,
        budget_s=budget_s,
        problem=problem,
    )


def write_experiments(
    out_dir: Path,
    spec: str,
    run: RunRecord,
    *,
    enabled: bool = True,
    resolved: tuple[Callable[..., Any], tuple[Any, ...]] | None = None,
) -> tuple[Path, dict[str, Any]]:
    """Run the experiments and write ``experiments.json`` (the comparison, or why there is none);
    returns its path and a short summary (``resolved``: as ``run_experiments``). A failure is written down, not raised: the report
    still shows the profile, and says what went wrong with the experiments."""
    path = out_dir / EXPERIMENTS_FILE
    if not enabled:
        doc: dict[str, Any] = {"none": "they were turned off (workbench report --no-experiments)"}
        path.write_text(json.dumps(doc, indent=1), encoding="utf-8")
        return path, doc
    load_before = _load_average()
    try:
        cmp = run_experiments(spec, run, resolved=resolved)
    except Exception as exc:  # noqa: BLE001 - reported in the page and the summary instead
        doc = {"error": f"{type(exc).__name__}: {exc}"}
    else:
        doc = (
            {"comparison": cmp.to_dict()}
            if cmp is not None
            else {"none": "no hypothesis suggests a variant that can be built from the function alone"}
        )
        if cmp is not None:
            doc["agreement"] = headline_agreement(
                run.timing.median_ms,
                doc["comparison"],
                run.health.machine.load_avg_1m,
                _max_load(load_before, _load_average()),
            )
    path.write_text(json.dumps(doc, indent=1, default=str), encoding="utf-8")
    return path, experiments_summary(doc)


AGREEMENT_TOLERANCE = 0.25  # the headline and the experiments' eager median agree within this


def _load_average() -> float | None:
    try:
        return float(os.getloadavg()[0])
    except (AttributeError, OSError):
        return None


def _max_load(*values: float | None) -> float | None:
    known = [v for v in values if v is not None]
    return max(known) if known else None


def headline_agreement(
    headline_ms: float, comparison: dict[str, Any], headline_load: float | None, experiments_load: float | None
) -> dict[str, Any]:
    """Whether the report's headline (the clean timing) and the experiments' eager median, the same
    code timed twice in one process and one allocator mode, agree within ``AGREEMENT_TOLERANCE``;
    when they do not, a sentence that says so with the machine's load at each (1-minute average)."""
    eager = next((r for r in comparison.get("results", []) if r.get("name") == comparison.get("baseline")), None)
    samples = [float(x) for x in ((eager or {}).get("timing") or {}).get("samples_ms") or ()]
    if not samples or not headline_ms > 0:
        return {"agree": None, "note": "the experiments have no timed baseline to hold against the headline"}
    eager_ms = statistics.median(samples)
    ratio = eager_ms / headline_ms
    out: dict[str, Any] = {
        "headline_ms": headline_ms,
        "eager_ms": eager_ms,
        "ratio": ratio,
        "headline_load_avg_1m": headline_load,
        "experiments_load_avg_1m": experiments_load,
        "agree": abs(ratio - 1.0) <= AGREEMENT_TOLERANCE,
        "note": "",
    }
    if not out["agree"]:
        loads = (
            f" (load average {headline_load:.2f} while timing, {experiments_load:.2f} during the comparison)"
            if headline_load is not None and experiments_load is not None
            else ""
        )
        out["note"] = (
            f"the experiments' eager median ({units.format_ms(eager_ms)}) is {ratio:.2f}x the headline "
            f"({units.format_ms(headline_ms)}) for the same code in the same process{loads}: the machine "
            "changed between the two; the comparison's ratios hold (its variants were interleaved), its "
            "absolute times do not - rerun on a quieter machine to have both agree"
        )
    return out


def experiments_summary(doc: dict[str, Any]) -> dict[str, Any]:
    """The decision, its variant and speedup (or the error / why there were none), and whether
    the experiments' eager time agrees with the headline."""
    if "comparison" not in doc:
        return dict(doc)
    d = doc["comparison"]["decision"]
    out = {
        "decision": d.get("decision"),
        "variant": d.get("variant"),
        "reason": d.get("reason"),
        "variants": [r["name"] for r in doc["comparison"]["results"]],
    }
    if "agreement" in doc:
        out["agreement"] = doc["agreement"]
    return out


def load_experiments(path: str | Path) -> dict[str, Any]:
    """``experiments.json`` as written by :func:`write_experiments`; {} for an empty path."""
    if not path:
        return {}
    return json.loads(Path(path).read_text(encoding="utf-8"))
