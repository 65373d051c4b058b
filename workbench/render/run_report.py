"""The sections of ``workbench report`` (a run bundle's offline HTML page) that the run card does
not hold as they are: data in, HTML out.

Most sections of the report are the card's own (``workbench.render.run``: timing, top ops,
hypotheses, environment); here are the report's sentences where the card shows nothing (a run
without a trace, a bundle without a history) and the experiments section (the comparison the
report ran, its decision record, the agreement with the headline). ``workbench.report.sections``
decides which to show; every text from the run or the experiments is escaped here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import workbench.render.history as history_render
import workbench.render.run_attribution as run_attribution
from workbench.render.escape import html_text
from workbench.units import format_ms

if TYPE_CHECKING:
    from workbench.api.run import ProfileRun
    from workbench.variants.results import Comparison

NO_MEMORY = "No memory: the run has no trace with allocator events (profile with memory=True)."
NO_HISTORY = (
    "No history in this run bundle: a run from wb.profile or %%gpuprofile carries the history of "
    "its code (unless WORKBENCH_HISTORY=off); a workload profiled by `workbench report --workload` "
    "is not added to one."
)
NO_BUNDLE_EXPERIMENTS = (
    "No experiments: this report was made from a saved run bundle, which holds no "
    "code to run variants of; make the report with --workload to run them."
)


def attribution_html(run: ProfileRun) -> str:
    """Time by nn.Module and by source line (``run.attribution``, as the card shows it): the
    tables where the trace recorded Python events, else one line saying why not; a sentence for a
    run without a trace."""
    body = run_attribution.html(run)  # the card's section body (the template gives the heading)
    if body:
        return body
    return f"<p>No attribution: {html_text(run.trace_note or 'the run has no trace')}.</p>"


def memory_html(run: ProfileRun) -> str:
    """The memory section of the run (``workbench.render.memory``, as the card shows it); a sentence
    where the trace has no allocator events."""
    import workbench.render.memory as memory_render

    body = memory_render.html(run) if run.trace is not None and len(run.trace.memory) else ""
    return body or f"<p>{html_text(NO_MEMORY)}</p>"


def history_html(run: ProfileRun) -> str:
    """The history of the profiled code (``run.history``, as the card shows it): with 2+ runs its
    summary, the trend chart (offline) with the change points marked, and the latest runs; a
    sentence where the run has no history."""
    if run.history is not None:  # the card's section body (the template gives the heading)
        return history_render.html(run.history)
    return f"<p>{html_text(NO_HISTORY)}</p>"


def agreement_html(agreement: Mapping[str, Any] | None, tolerance: float) -> str:
    """One line: the experiments' eager median against the headline (within ``tolerance``, a
    fraction), or why they disagree; "" where nothing was compared."""
    if not agreement or agreement.get("agree") is None:
        return ""
    if agreement["agree"]:
        text = (
            f"The baseline here ({format_ms(agreement['eager_ms'])}, median) agrees with the headline "
            f"({format_ms(agreement['headline_ms'])}) within {tolerance:.0%}: the same code timed "
            "twice in one process."
        )
        return f"<p class='wb-agreement'>{html_text(text)}</p>"
    return f"<p class='wb-agreement wb-caution'><b>Caution:</b> {html_text(agreement['note'])}</p>"


def experiments_html(doc: Mapping[str, Any], comparison: Comparison | None, *, tolerance: float) -> str:
    """The experiments section: the agreement line and the comparison (table, decision, charts,
    decision record), or, in words, why there are none (a bundle report, an error, no suggested
    variant). ``doc`` is experiments.json; ``comparison`` its comparison, read back."""
    if not doc:
        return f"<p class='wb-experiments'>{html_text(NO_BUNDLE_EXPERIMENTS)}</p>"
    if "error" in doc:
        return f"<p class='wb-experiments-error'>The experiments could not run: {html_text(doc['error'])}</p>"
    if comparison is None:
        return f"<p class='wb-experiments'>No experiments: {html_text(doc.get('none', 'nothing to run'))}.</p>"
    from workbench.render.dispatch import html

    return agreement_html(doc.get("agreement"), tolerance) + html(comparison)
