"""Time by ``nn.Module`` and by the user's source line (``workbench.analysis.attribution``), as
HTML, plain text and Markdown: the run card's and the report's attribution section.

Two compact tables from the same rows in every format: the module tree (each module indented
under its parent, per-call inclusive and self time, share, its top ops or kernels) and the
user's source lines (``file.py:123 in fn``, per-call self and inclusive time, share, top ops or
kernels). A result that was not recorded says so, with its reason. Every name passes through
``workbench.render.escape`` (via ``workbench.render.tables``): a module or kernel named
``<script>`` shows as text.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd

from workbench.analysis.attribution import Attribution, ModuleBreakdown, SourceBreakdown
from workbench.analysis.labels import unique_labels
from workbench.render.escape import html_text, markdown_text, plain
from workbench.render.tables import Cell, Row, html_table, markdown_table, text_table
from workbench.units import format_ms

MAX_MODULE_ROWS = 25  # module rows shown (in tree order, the largest kept)
MAX_SOURCE_ROWS = 10  # source lines shown (by self time)
MIN_SHARE_PCT = 0.5  # a module or line with less inclusive share is left out (counted below)
CALLER_MIN_PCT = 5.0  # a line that runs little itself is still shown when its callees take this share
MAX_CALLER_ROWS = 3  # such calling lines shown (``loss = loss_fn()``: the way from a step to its parts)
ENTRY_PCT = 99.5  # a calling line holding all the time (the line that started the profile) tells nothing
ITEM_CHARS = 48  # an op or kernel name in the "top" column is cut to this
INDENT = "\u00a0\u00a0"  # one tree level (a no-break space pair: HTML keeps it)
CSS_CLASS = "wb-attribution"

AttributionResult = Attribution | ModuleBreakdown | SourceBreakdown
_MODULE_HEADERS = ("module", "per call", "self per call", "share", "top ops / kernels")
_BACKWARD_HEADER = "backward per call"  # shown where some module's backward was linked to it
_OPTIMIZER_HEADER = "optimizer per call"  # shown where the optimizer's step was split by module
_SOURCE_HEADERS = ("source line", "self per call", "with callees", "share", "top ops / kernels")


# --- the public renderings -----------------------------------------------------------------------


def module_name(row: Any) -> str:
    """A module row's name: its name in its model (``blocks.1.mlp.fc``) where the run recorded it, else
    the profiler's label (``Linear_6``); a table saved before names were recorded has only the label."""
    return str(getattr(row, "name", "") or row.module)


def html(result: AttributionResult) -> str:
    """The attribution section as an HTML fragment (headings, notes and tables)."""
    parts = ["<div class='wb-attribution-section'>"]
    for title, section in _sections(result):
        parts.append(f"<h5>{html_text(title)}</h5>")
        if section.reason:
            parts.append(f"<p><i>{html_text('not recorded: ' + section.reason)}</i></p>")
            continue
        parts.append(f"<p>{html_text(section.caption)}</p>")
        parts.append(html_table(section.headers, section.rows, CSS_CLASS))
        if section.footer:
            parts.append(f"<p><small>{html_text(section.footer)}</small></p>")
    parts.append("</div>")
    return "".join(parts)


def text(result: AttributionResult) -> str:
    """The attribution section as plain text (the CLI)."""
    lines: list[str] = []
    for title, section in _sections(result):
        lines.append(plain(title))
        if section.reason:
            lines.append("  " + plain("not recorded: " + section.reason))
            continue
        lines.append("  " + plain(section.caption))
        lines.append(text_table(section.headers, section.rows))
        if section.footer:
            lines.append("  " + plain(section.footer))
    return "\n".join(lines)


def markdown(result: AttributionResult) -> str:
    """The attribution section as Markdown (the report)."""
    blocks: list[str] = []
    for title, section in _sections(result):
        blocks.append(f"##### {markdown_text(title)}")
        if section.reason:
            blocks.append(f"*{markdown_text('not recorded: ' + section.reason)}*")
            continue
        blocks.append(markdown_text(section.caption))
        blocks.append(markdown_table(section.headers, section.rows))
        if section.footer:
            blocks.append(markdown_text(section.footer))
    return "\n\n".join(blocks)


# --- the rows, once for every format -----------------------------------------------------------


class _Section:
    def __init__(
        self, headers: Sequence[str], rows: list[Row], caption: str, footer: str = "", reason: str = ""
    ) -> None:
        self.headers, self.rows, self.caption, self.footer, self.reason = headers, rows, caption, footer, reason


def _sections(result: AttributionResult) -> list[tuple[str, _Section]]:
    if isinstance(result, Attribution):
        return [("Time by nn.Module", _modules(result.modules)), ("Time by source line", _sources(result.sources))]
    if isinstance(result, ModuleBreakdown):
        return [("Time by nn.Module", _modules(result))]
    if isinstance(result, SourceBreakdown):
        return [("Time by source line", _sources(result))]
    from workbench.errors import InvalidArgumentError

    raise InvalidArgumentError(
        f"workbench.render.attribution renders an Attribution, ModuleBreakdown or "
        f"SourceBreakdown; got {type(result).__name__}"
    )


def _basis(basis: str) -> str:
    return "GPU kernel time (each kernel through its launch)" if basis == "kernel" else "CPU op self time"


def _per_call(result: ModuleBreakdown | SourceBreakdown) -> str:
    calls = f"{result.calls} traced call{'s' if result.calls != 1 else ''}"
    scaled = f", scaled to the clean time (x{result.scale:.2f})" if abs(result.scale - 1.0) > 1e-9 else ""
    return f"per call over {calls}{scaled}"


def _share(pct: float) -> Cell:
    return Cell(f"{pct:.1f} %", numeric=True)


def _time(ms: float, us: float) -> Cell:
    return Cell(format_ms(ms), title=f"{us:.3f} µs in the trace", numeric=True)


def _labels(items: pd.DataFrame) -> dict[str, str]:
    """One short label per op or kernel name of a section, two names never under one label."""
    names = list(dict.fromkeys(str(n) for n in items["name"]))
    return dict(zip(names, unique_labels(names, ITEM_CHARS)))


def _top(items: pd.DataFrame, labels: dict[str, str]) -> Cell:
    if not len(items):
        return Cell("")
    shown = ", ".join(
        f"{labels.get(str(name), str(name))} {pct:.0f} %" for name, pct in zip(items["name"], items["pct_of_key"])
    )
    return Cell(shown, title="; ".join(str(n) for n in items["name"]))


def _modules(result: ModuleBreakdown) -> _Section:
    if result.not_recorded:
        return _Section(_MODULE_HEADERS, [], "", reason=result.not_recorded)
    table = result.table
    backward = table["backward_us"] if "backward_us" in table else pd.Series(0.0, index=table.index)
    with_backward = bool((backward > 0).any())  # a table saved before backward was linked has no column
    optimizer = table["optimizer_us"] if "optimizer_us" in table else pd.Series(0.0, index=table.index)
    with_optimizer = bool((optimizer > 0).any())
    outside = backward + optimizer
    share = table["inclusive_pct"] + (100.0 * outside / result.total_us if result.total_us > 0 else 0.0)
    kept = table[share >= MIN_SHARE_PCT]
    if len(kept) > MAX_MODULE_ROWS:  # the largest, still in tree order
        kept = kept.loc[(kept["inclusive_us"] + outside[kept.index]).nlargest(MAX_MODULE_ROWS).index].sort_index()
    rows: list[Row] = []
    labels = _labels(result.items)
    per_call = result.scale / result.calls / 1e3
    for row in kept.itertuples(index=False):
        cells = [
            Cell(INDENT * int(row.depth) + module_name(row), title=str(row.path)),
            _time(row.inclusive_ms_per_call, row.inclusive_us),
            _time(row.self_ms_per_call, row.self_us),
        ]
        if with_backward:
            cells.append(_time(float(row.backward_us) * per_call, float(row.backward_us)))
        if with_optimizer:
            cells.append(_time(float(row.optimizer_us) * per_call, float(row.optimizer_us)))
        cells += [_share(row.inclusive_pct), _top(result.top_items(str(row.path)), labels)]
        rows.append(tuple(cells))
    caption = (
        f"{_basis(result.basis)}, {_per_call(result)}; a module includes the time of its children, "
        f"share is of all {format_ms(result.total_us / 1e3, total=True)} in the trace."
    )
    if with_backward:
        caption += (
            " Backward: the gradient functions of the module's forward ops and its children's (linked by "
            "autograd's sequence numbers), which run outside its scope."
        )
    if with_optimizer:
        caption += (
            " Optimizer: the optimizer's step while it updated the module's parameters and its children's "
            "(a step that updates one parameter at a time, cut into one stretch per parameter)."
        )
    footer = []
    if len(table) > len(kept):
        footer.append(f"{len(table) - len(kept)} smaller module(s) not shown")
    if result.outside_us > 0 and result.total_us > 0:
        footer.append(_outside(result))
    if result.unlinked_us > 0:
        footer.append(f"GPU time with no launch in the trace: {format_ms(result.unlinked_us / 1e3, total=True)}")
    extra = ((_BACKWARD_HEADER,) if with_backward else ()) + ((_OPTIMIZER_HEADER,) if with_optimizer else ())
    headers = _MODULE_HEADERS[:3] + extra + _MODULE_HEADERS[3:]
    return _Section(headers, rows, caption, "; ".join(f for f in footer if f))


def _outside(result: ModuleBreakdown) -> str:
    """``outside any module: 65.0 %``, split where the trace tells: the modules' backward, the optimizer step."""
    pct = 100.0 / result.total_us
    parts = []
    backward_us, optimizer_us = getattr(result, "backward_us", 0.0), getattr(result, "optimizer_us", 0.0)
    if backward_us > 0:
        parts.append(f"the modules' backward {pct * backward_us:.1f} % (in '{_BACKWARD_HEADER}')")
    if optimizer_us > 0:
        split_us = getattr(result, "optimizer_split_us", 0.0)
        split = f" ({pct * split_us:.1f} % in '{_OPTIMIZER_HEADER}')" if split_us > 0 else ""
        not_split = getattr(result, "optimizer_not_split", ())
        why = f" (not split by module: {'; '.join(not_split)})" if not_split and split_us <= 0 else ""
        parts.append(f"the optimizer step {pct * optimizer_us:.1f} %{split}{why}")
    if parts:
        parts.append(f"other {pct * result.other_outside_us:.1f} %")
        return f"outside any module's scope: {pct * result.outside_us:.1f} %, of which {', '.join(parts)}"
    return f"outside any module: {pct * result.outside_us:.1f} %"


def _line_title(row: Any) -> str:
    """Where a source row is: the statement's line (``def_line``: the function's first line, a
    column older saved results lack), or the function's first line where no statement was recorded."""
    def_line = getattr(row, "def_line", row.line)
    if def_line == row.line:
        return f"{row.file}, line {row.line} (the function's first line)"
    return f"{row.file}, line {row.line} (the statement; the function starts at line {def_line})"


def _sources(result: SourceBreakdown) -> _Section:
    if result.not_recorded:
        return _Section(_SOURCE_HEADERS, [], "", reason=result.not_recorded)
    table = result.table
    own = table[table["self_pct"] >= MIN_SHARE_PCT].head(MAX_SOURCE_ROWS)
    inclusive_pct = table["inclusive_pct"]
    callers = table[
        (table["self_pct"] < MIN_SHARE_PCT) & (inclusive_pct >= CALLER_MIN_PCT) & (inclusive_pct < ENTRY_PCT)
    ]
    callers = callers.sort_values("inclusive_us", ascending=False, kind="stable").head(MAX_CALLER_ROWS)
    kept = pd.concat([own, callers]) if len(callers) else own  # the calling lines after the lines that run
    rows: list[Row] = []
    labels = _labels(result.items)
    for row in kept.itertuples(index=False):
        rows.append(
            (
                Cell(str(row.location), title=_line_title(row)),
                _time(row.self_ms_per_call, row.self_us),
                _time(row.inclusive_ms_per_call, row.inclusive_us),
                _share(row.self_pct),
                _top(result.top_items(str(row.location)), labels),
            )
        )
    caption = (
        f"{_basis(result.basis)} by the innermost frame in your files, {_per_call(result)}; "
        "with callees: the time of the lines it called added."
    )
    footer = []
    if len(table) > len(kept):
        footer.append(f"{len(table) - len(kept)} other line(s) not shown")
    if result.outside_us > 0 and result.total_us > 0:
        footer.append(f"with no frame of yours on the stack: {100 * result.outside_us / result.total_us:.1f} %")
    return _Section(_SOURCE_HEADERS, rows, caption, "; ".join(footer))
