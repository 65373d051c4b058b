"""The attribution section of a run (``run.attribution``: time by ``nn.Module`` and by the user's
source line) as the run's renderings show it.

The HTML card and the report show ``workbench.render.attribution``'s full tables (the module tree
with each module's top ops or kernels, the source lines). The run's text and Markdown renderings
show a compact form of the same numbers: the largest modules (still in tree order) and source
lines, their per-call time and share, without the top-kernel column; ``run.attribution`` shows
all of it. A breakdown that was not recorded (no Python events in the trace, say) is one line
saying why; where both miss for one reason it is said once.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import workbench.render.attribution as attribution_render
from workbench.render.escape import html_text, markdown_text, plain
from workbench.render.tables import Cell, Row, markdown_table, text_table
from workbench.units import format_ms

if TYPE_CHECKING:
    from workbench.analysis.attribution import Attribution, ModuleBreakdown, SourceBreakdown
    from workbench.api.run import ProfileRun

COMPACT_ROWS = 5  # modules and source lines in the text and Markdown renderings
TITLE = "Time by module and source line"
MODULE_TITLE = "time by module"
SOURCE_TITLE = "time by source line"
MODULE_HEADERS = ("module", "per call", "self per call", "share")
SOURCE_HEADERS = ("source line", "self per call", "with callees", "share")


def run_attribution(run: ProfileRun) -> tuple[Attribution | None, str]:
    """``run.attribution`` and "", or (None, why) where computing it failed (a view never raises);
    (None, "") for a run without a trace."""
    try:
        return run.attribution, ""
    except Exception as exc:  # show the gap, not a broken card
        return None, f"not available: {type(exc).__name__}: {exc}"


def gaps(result: Attribution) -> list[str]:
    """ "<what>: not recorded: <why>" for each breakdown missing, one line per distinct reason."""
    reasons: dict[str, list[str]] = {}
    for what, part in ((MODULE_TITLE, result.modules), (SOURCE_TITLE, result.sources)):
        if part.not_recorded:
            reasons.setdefault(part.not_recorded, []).append(what)
    return [f"{' and '.join(whats)}: not recorded: {reason}" for reason, whats in reasons.items()]


def _ms(value: float) -> Cell:
    return Cell(format_ms(value), title=f"{value:.4f} ms", numeric=True)


def _share(pct: float) -> Cell:
    return Cell(f"{pct:.1f} %", numeric=True)


def _basis(basis: str) -> str:
    return "GPU kernel time" if basis == "kernel" else "CPU op self time"


def _caption(result: ModuleBreakdown | SourceBreakdown, shown: int, of: int, what: str) -> str:
    scaled = ", scaled to the clean time" if abs(result.scale - 1.0) > 1e-9 else ""
    more = f"; {of - shown} more {what} in run.attribution" if of > shown else ""
    return (
        f"{_basis(result.basis)} per call over {result.calls} traced call(s){scaled}; share of "
        f"{format_ms(result.total_us / 1e3, total=True)} in the trace{more}"
    )


def module_rows(result: ModuleBreakdown, top: int = COMPACT_ROWS) -> tuple[list[Row], str]:
    """The ``top`` modules by inclusive time, in tree order (each indented under its parent), and
    their caption."""
    table = result.table
    kept = table[table["inclusive_pct"] >= attribution_render.MIN_SHARE_PCT]
    kept = kept.loc[kept["inclusive_us"].nlargest(top).index].sort_index()
    rows: list[Row] = [
        (
            Cell(attribution_render.INDENT * int(r.depth) + attribution_render.module_name(r), title=str(r.path)),
            _ms(r.inclusive_ms_per_call),
            _ms(r.self_ms_per_call),
            _share(r.inclusive_pct),
        )
        for r in kept.itertuples(index=False)
    ]
    return rows, _caption(result, len(rows), len(table), "module(s)")


def source_rows(result: SourceBreakdown, top: int = COMPACT_ROWS) -> tuple[list[Row], str]:
    """The ``top`` source lines by self time, and their caption."""
    table = result.table
    kept = table[table["self_pct"] >= attribution_render.MIN_SHARE_PCT].head(top)
    rows: list[Row] = [
        (
            Cell(str(r.location), title=f"{r.file}, line {r.line}"),
            _ms(r.self_ms_per_call),
            _ms(r.inclusive_ms_per_call),
            _share(r.self_pct),
        )
        for r in kept.itertuples(index=False)
    ]
    return rows, _caption(result, len(rows), len(table), "line(s)")


def _compact(result: Attribution, top: int) -> list[tuple[str, list[str], list[Row], str]]:
    """(title, headers, rows, caption) of each recorded breakdown."""
    out = []
    parts: tuple[
        tuple[str, tuple[str, ...], ModuleBreakdown | SourceBreakdown, Callable[..., tuple[list[Row], str]]], ...
    ] = (
        (MODULE_TITLE, MODULE_HEADERS, result.modules, module_rows),
        (SOURCE_TITLE, SOURCE_HEADERS, result.sources, source_rows),
    )
    for title, headers, part, rows_of in parts:
        if part.recorded:
            rows, caption = rows_of(part, top)
            out.append((title, list(headers), rows, caption))
    return out


# --- the run's renderings ------------------------------------------------------------------


def html(run: ProfileRun) -> str:
    """The card's and the report's section body: ``workbench.render.attribution``'s tables where
    something was recorded, else why not; "" for a run without a trace."""
    result, failed = run_attribution(run)
    if failed:
        return f"<p>{html_text(failed)}</p>"
    if result is None:
        return ""
    if not result.recorded:
        return "".join(f"<p><i>{html_text(line)}</i></p>" for line in gaps(result))
    return attribution_render.html(result)


def text_lines(run: ProfileRun, top: int = COMPACT_ROWS) -> list[str]:
    """The compact section as text lines ([] for a run without a trace)."""
    result, failed = run_attribution(run)
    if failed:
        return [f"{TITLE.lower()}: {plain(failed)}"]
    if result is None:
        return []
    lines = []
    for title, headers, rows, caption in _compact(result, top):
        lines += [
            f"{title} ({plain(caption)}):",
            text_table(headers, rows) if rows else f"  (nothing above {attribution_render.MIN_SHARE_PCT} %)",
        ]
    return lines + [plain(line) for line in gaps(result)]


def markdown_lines(run: ProfileRun, top: int = COMPACT_ROWS) -> list[str]:
    """The compact section as Markdown blocks ([] for a run without a trace)."""
    result, failed = run_attribution(run)
    if failed:
        return [f"_{markdown_text(failed)}_"]
    if result is None:
        return []
    blocks = []
    for title, headers, rows, caption in _compact(result, top):
        blocks += [
            f"**{markdown_text(title.capitalize())}** ({markdown_text(caption)})",
            "",
            markdown_table(headers, rows),
            "",
        ]
    return blocks + [f"_{markdown_text(line)}_" for line in gaps(result)]
