"""The sections of ``workbench report --trace`` (an offline HTML page of a saved trace), in HTML:
data in, HTML out.

``workbench.report.trace_report`` decides which analyses run, what is computed from them (the
tables folded over ranks, the worst ranks first) and the order of the sections; the functions here
draw what it computed: analysis tables (``pandas.DataFrame``), counts and plain values, never the
trace itself. A table is laid out by ``table_html``: each cell in the unit its column name says
(``*_us`` a time, ``*_pct`` a share, ``bytes``, ``*gbps``...), long names cut with the whole name
as the tooltip, at most ``MAX_ROWS`` rows with the number of hidden ones said, written by
``workbench.render.tables``. Every text from the trace is escaped (``workbench.render.escape``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from workbench.analysis.labels import unique_labels
from workbench.render.escape import html_text
from workbench.render.tables import Cell, html_pairs, html_table
from workbench.units import format_ms

if TYPE_CHECKING:
    import pandas as pd

MAX_TEXT = 72  # characters of a name a cell shows (the whole name is its tooltip)
MAX_ROWS = 24  # rows a folded table shows; the rest are counted, not listed
TABLE_CLASS = "wb-trace-table"
SUMMARY_CLASS = "wb-trace-summary"

PAGE_CSS = """<style>
.wb-trace-table, .wb-trace-summary { border-collapse: collapse; font-size: 12px; margin: 4px 0 8px 0; }
.wb-trace-table th, .wb-trace-table td, .wb-trace-summary th, .wb-trace-summary td {
  padding: 2px 8px; border-bottom: 1px solid #e3e3e3; text-align: left; vertical-align: top; }
.wb-trace-table thead th { background: #f4f4f4; position: sticky; top: 0; }
.wb-trace-table th, .wb-trace-table td, .wb-trace-summary th, .wb-trace-summary td { text-align: left !important; }
.wb-trace-table td.wb-num { text-align: right !important; font-variant-numeric: tabular-nums; white-space: nowrap; }
.wb-trace-table td { max-width: 46em; overflow-wrap: break-word; word-break: normal; }
.wb-note, .wb-hidden { color: #555; font-size: 12px; margin: 2px 0; }
.wb-hidden { font-style: italic; }
.wb-diagnosis table.wb-evidence { font-size: 11px; border-collapse: collapse; }
.wb-diagnosis table.wb-evidence td, .wb-diagnosis table.wb-evidence th { padding: 1px 6px; border-bottom: 1px solid #eee;
  text-align: left !important; max-width: 40em; overflow-wrap: break-word; word-break: normal; }
.wb-diagnosis li.wb-hyp { margin-bottom: 10px; }
.wb-attribution { border-collapse: collapse; font-size: 12px; margin: 4px 0 8px 0; }
.wb-attribution th, .wb-attribution td { padding: 2px 8px; border-bottom: 1px solid #e3e3e3; text-align: left !important; }
.wb-attribution td.wb-num { text-align: right !important; font-variant-numeric: tabular-nums; white-space: nowrap; }
</style>"""

# the columns a section's table shows, in order (a column the table lacks is left out)
OP_COLUMNS = ("name", "count", "self_us", "total_us", "mean_self_us", "pct", "top_input_dims")
KERNEL_RANK_COLUMNS = ("ranks", "worst_rank", "worst_rank_sum_us")  # of a kernel table, shown for 2+ ranks
TEMPORAL_COLUMNS = (
    "rank",
    "kernel_time_us",
    "idle_us",
    "idle_pct",
    "compute_us",
    "compute_pct",
    "non_compute_us",
    "non_compute_pct",
)
OVERLAP_COLUMNS = ("rank", "comm_us", "compute_us", "overlap_us", "overlap_pct", "exposed_comm_us")
STRAGGLER_COLUMNS = ("rank", "is_straggler", "comm_deficit_us", "busy_us", "compute_us", "comm_us", "kernel_time_us")
STEP_COLUMNS = (
    "rank",
    "step",
    "dur_us",
    "gpu_busy_us",
    "gpu_idle_us",
    "compute_us",
    "comm_us",
    "memory_us",
    "n_kernels",
)
ROOF_COLUMNS = ("name", "kernel_type", "family", "placed_by", "work_op", "count", "dur_us", "roof_us", "roof_pct")


def page_style() -> str:
    """The report's table styles (one ``<style>`` block, no external stylesheet)."""
    return PAGE_CSS


# --- values and cells ---------------------------------------------------------------------------
def finite(value: Any) -> bool:
    """A real number (not a bool) that is finite."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def format_bytes(value: float) -> str:
    """``1.5 GB``, ``12 kB``, ``300 B``: a byte count in three significant figures."""
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if abs(value) >= size:
            return f"{value / size:.3g} {unit}"
    return f"{value:.0f} B"


def ranks_text(ranks: Sequence[Any]) -> str:
    """``0-7`` / ``0, 2, 5-6``: a compact list of rank numbers."""
    values = sorted({int(r) for r in ranks})
    runs: list[str] = []
    start = prev = None
    for v in [*values, None]:
        if start is None:
            start = prev = v
        elif v is not None and prev is not None and v == prev + 1:
            prev = v
        else:
            runs.append(str(start) if start == prev else f"{start}-{prev}")
            start = prev = v
    return ", ".join(runs)


def column_cell(column: str, value: Any) -> Cell:
    """One table cell, in the unit its column name says (``*_us`` a time with the exact µs as the
    tooltip, ``*_pct`` a share, ``bytes``, ``*gbps``, ``ratio``...); a long text cut to ``MAX_TEXT``
    characters, the whole text its tooltip."""
    if isinstance(value, bool) or (hasattr(value, "dtype") and str(getattr(value, "dtype", "")) == "bool"):
        return Cell("yes" if bool(value) else "no")
    if isinstance(value, (int, float)):
        v = float(value)
        if not math.isfinite(v):
            return Cell("n/a", numeric=True)
        if column.endswith("_us"):
            return Cell(format_ms(v / 1000), title=f"{v:,.1f} µs", numeric=True)
        if column.endswith("_pct") or column == "pct":
            return Cell(f"{v:.1f} %", numeric=True)
        if column == "bytes":
            return Cell(format_bytes(v), title=f"{v:,.0f} B", numeric=True)
        if column.endswith("gbps"):
            return Cell(f"{v:.3g} GB/s", numeric=True)
        if column == "ratio":
            return Cell(f"{100 * v:.1f} %", numeric=True)
        return Cell(f"{int(v):,}" if v.is_integer() else f"{v:.3g}", numeric=True)
    text = str(value) if value is not None else ""
    short = text if len(text) <= MAX_TEXT else text[: MAX_TEXT - 1] + "…"
    return Cell(short, title=text if short != text else None)


def name_cell(name: Any, label: str) -> Cell:
    """A kernel or op name shown as ``label`` (``workbench.analysis.labels``), the whole name its tooltip."""
    text = str(name) if name is not None else ""
    return Cell(label, title=text) if label != text else Cell(text)


def column_header(column: str) -> str:
    """``idle_pct`` -> ``idle %``, ``sum_us`` -> ``sum`` (the cells say the unit)."""
    name = column
    for suffix, unit in (("_us", ""), ("_pct", " %")):
        if name.endswith(suffix):
            name = name[: -len(suffix)] + unit
    return name.replace("_", " ")


def table_html(
    table: pd.DataFrame,
    *,
    columns: Sequence[str] | None = None,
    max_rows: int = MAX_ROWS,
    css: str = TABLE_CLASS,
    hidden_what: str = "rows",
) -> str:
    """An HTML table of the first ``max_rows`` rows (in the given order) and, below it, how many more
    there are."""
    cols = [c for c in (columns or list(table.columns)) if c in table.columns]
    shown = table.head(max_rows)
    records = shown[cols].to_dict("records")
    if "name" in cols:  # kernel and op names as the charts and the CLI show them (the full name on hover)
        labels = unique_labels([row["name"] for row in records], MAX_TEXT)
        rows = [
            [name_cell(row[c], label) if c == "name" else column_cell(c, row[c]) for c in cols]
            for row, label in zip(records, labels)
        ]
    else:
        rows = [[column_cell(c, row[c]) for c in cols] for row in records]
    hidden = len(table) - len(shown)
    note = (
        f"<p class='wb-hidden'>{hidden:,} more {html_text(hidden_what)} not shown (of {len(table):,}).</p>"
        if hidden > 0
        else ""
    )
    return html_table([column_header(c) for c in cols], rows, css, quote="'") + note


# --- small pieces -------------------------------------------------------------------------------
def note_html(text: object) -> str:
    """A grey note (what a table holds, why a section is empty)."""
    return f"<p class='wb-note'>{html_text(text)}</p>"


def sentence_html(text: object) -> str:
    """One sentence as a paragraph (a section with nothing to show says so)."""
    return f"<p>{html_text(text)}</p>"


def not_available_html(reason: object) -> str:
    """A section the trace's format cannot fill, in one sentence ("not available from nsys-sqlite ...")."""
    return note_html(f"{reason}.")


def _heading(text: str) -> str:
    return f"<h4>{html_text(text)}</h4>"


# --- the summary --------------------------------------------------------------------------------
def fidelity_html(source: str, fidelity: Mapping[str, Any]) -> str:
    """The format the trace was read from and what that format does not provide ("" for Kineto)."""
    if source == "kineto" and not fidelity:
        return ""
    items = "".join(f"<li><code>{html_text(k)}</code>: {html_text(v)}</li>" for k, v in fidelity.items())
    return (
        f"<p><b>Read from {html_text(source)}.</b> What this format does not provide (the sections that need it "
        f"say so):</p><ul class='wb-warnings'>{items}</ul>"
    )


def summary_html(
    rows: Sequence[tuple[str, str]],
    warnings: Sequence[str],
    *,
    source: str = "kineto",
    fidelity: Mapping[str, Any] | None = None,
    max_warnings: int = MAX_ROWS,
) -> str:
    """The summary table (one row per (label, value)), what the format lacks, the loader's warnings."""
    shown = "".join(f"<li>{html_text(w)}</li>" for w in warnings[:max_warnings])
    more = len(warnings) - max_warnings
    warn = (
        f"<p><b>Loader warnings ({len(warnings)})</b></p><ul class='wb-warnings'>{shown}</ul>"
        + (f"<p class='wb-hidden'>{more} more warnings not shown.</p>" if more > 0 else "")
        if warnings
        else sentence_html("No loader warning: every event was read as recorded.")
    )
    return html_pairs(list(rows), SUMMARY_CLASS) + fidelity_html(source, fidelity or {}) + warn


# --- the sections -------------------------------------------------------------------------------
def kernels_html(kernels: pd.DataFrame | None, types: pd.DataFrame | None = None, *, n_ranks: int = 1) -> str:
    """Kernels folded over ranks (the rank columns only for 2+ ranks) and the time per kernel type per
    rank; ``kernels`` None: a CPU-only trace."""
    if kernels is None:
        return sentence_html(
            "No GPU kernels in this trace (a CPU-only trace): the op breakdown below is where the time is."
        )
    columns = [c for c in kernels.columns if n_ranks > 1 or c not in KERNEL_RANK_COLUMNS]
    parts = [
        note_html(
            f"Kernels summed over {n_ranks} rank(s); 'worst rank' is the rank that spent the most time in the kernel."
            if n_ranks > 1
            else "Time per kernel name, most first."
        ),
        table_html(kernels, columns=columns, hidden_what="kernels"),
    ]
    if types is not None and not types.empty:
        parts.append(_heading("Kernel time by type, per rank (busiest first)") + table_html(types, hidden_what="ranks"))
    return "".join(parts)


def ops_html(ops: pd.DataFrame, *, n_ranks: int = 1) -> str:
    """CPU ops by self time."""
    if ops.empty:
        return sentence_html("No CPU ops in this trace.")
    return note_html(
        f"CPU ops by self time, over all {n_ranks} rank(s)." if n_ranks > 1 else "CPU ops by self time."
    ) + table_html(ops, columns=OP_COLUMNS, hidden_what="ops")


def temporal_html(table: pd.DataFrame) -> str:
    """Per rank: kernel time, idle, compute and non-compute time (the most idle rank first)."""
    if table.empty:
        return sentence_html("No GPU activity: no temporal breakdown.")
    return note_html("Per rank over its span of GPU activity, the most idle rank first.") + table_html(
        table, columns=TEMPORAL_COLUMNS, hidden_what="ranks"
    )


def idle_html(table: pd.DataFrame, *, n_ranks: int = 1, charted_ranks: int | None = None) -> str:
    """Idle per (rank, stream) split by cause; ``charted_ranks``: how many of the ``n_ranks`` the
    idle chart draws."""
    if table.empty:
        return sentence_html("No idle gaps between kernels.")
    charted = (
        f" The chart above draws the {charted_ranks} most idle of the {n_ranks} ranks; this table lists them all."
        if charted_ranks is not None and n_ranks > charted_ranks
        else ""
    )
    return note_html(
        "Idle time between kernels on each stream, split by cause (host wait: the next launch had not "
        "been issued; kernel wait: back-to-back launch latency), the most idle rank first." + charted
    ) + table_html(table, hidden_what="streams")


def overlap_html(table: pd.DataFrame | None) -> str:
    """Per rank: communication time, how much of it overlaps compute, what is exposed; None: no
    communication in the trace."""
    if table is None or table.empty:
        return sentence_html("No communication kernels in this trace: nothing to overlap.")
    reason = "reason" in table.columns and bool(table["reason"].astype(str).str.strip().any())
    return note_html(
        "Per rank: communication kernel time, how much of it runs under computation, and what is "
        "exposed (on the critical path); the most exposed rank first."
    ) + table_html(table, columns=[*OVERLAP_COLUMNS, *(["reason"] if reason else [])], hidden_what="ranks")


def stragglers_html(
    table: pd.DataFrame | None,
    *,
    stragglers: Sequence[int] = (),
    wait_caused_us: float = math.nan,
    reason: str | None = None,
) -> str:
    """The straggling ranks and the time the others waited for them, the per-rank table (stragglers
    first); ``table`` None: one rank, no rank to wait for."""
    if table is None:
        return sentence_html("One rank: no rank to wait for.")
    if table.empty:
        return sentence_html(f"No straggler analysis: {reason or 'no communication'}.")
    if stragglers:
        caused = f" ({format_ms(wait_caused_us / 1000)} of waiting caused)" if finite(wait_caused_us) else ""
        head = (
            f"<p><b>Straggler rank(s): {html_text(ranks_text(stragglers))}</b>: the others wait for them in "
            f"collectives{html_text(caused)}.</p>"
        )
    else:
        head = sentence_html(f"No straggler{': ' + reason if reason else ''}.")
    return (
        head
        + note_html(
            "comm deficit: how much less communication time the rank has than the others' median "
            "(a rank that arrives last at a collective waits least); stragglers first."
        )
        + table_html(table, columns=STRAGGLER_COLUMNS, hidden_what="ranks")
    )


def launch_html(
    by_api: pd.DataFrame | None,
    per_rank: pd.DataFrame | None = None,
    *,
    n_launches: int = 0,
    n_shorter_than_launch: int = 0,
) -> str:
    """Launches per runtime API and, for 2+ ranks, per rank (``per_rank``); ``by_api`` None: no launch."""
    if by_api is None:
        return sentence_html("No launches in this trace (no runtime call that put work on a GPU).")
    return (
        sentence_html(
            f"{n_launches:,} launches, {n_shorter_than_launch:,} of them ran on the GPU for less time "
            "than their launch call took on the CPU."
        )
        + table_html(by_api, hidden_what="APIs")
        + (
            _heading("Per rank (longest launch delays first)") + table_html(per_rank, hidden_what="ranks")
            if per_rank is not None
            else ""
        )
    )


def copies_html(table: pd.DataFrame, *, total_copy_us: float = 0.0, pageable_bytes: float = 0.0) -> str:
    """Memory copies and sets: the time, the bytes through pageable host memory, the table."""
    if table.empty:
        return sentence_html("No memory copies or sets in this trace.")
    return sentence_html(
        f"{format_ms(total_copy_us / 1000)} in copies; {format_bytes(pageable_bytes)} from or to "
        "pageable host memory (a copy from pageable memory cannot overlap compute)."
    ) + table_html(table, hidden_what="rows")


def syncs_html(
    by_cause: pd.DataFrame | None,
    per_rank: pd.DataFrame | None = None,
    *,
    blocked_us: float = 0.0,
    calls: int = 0,
) -> str:
    """Host-device synchronisation: the time the host blocked, by cause and (2+ ranks) per rank;
    ``by_cause`` None: none in the trace."""
    if by_cause is None:
        return sentence_html("No host-device synchronisation in this trace.")
    parts = [
        sentence_html(
            f"The host blocked on the device for {format_ms(blocked_us / 1000)} in {calls:,} calls (all ranks)."
        ),
        _heading("By cause"),
        table_html(by_cause, hidden_what="causes"),
    ]
    if per_rank is not None:
        parts += [_heading("Per rank (most blocked first)"), table_html(per_rank, hidden_what="ranks")]
    return "".join(parts)


def steps_html(table: pd.DataFrame, *, median_step_us: float = math.nan) -> str:
    """Per (rank, step): its time, GPU busy and idle, compute, communication and memory time."""
    if table.empty:
        return sentence_html("No ProfilerStep# annotations in this trace.")
    return note_html(
        f"median step {format_ms(median_step_us / 1000)}; the ranks with the longest steps first."
    ) + table_html(table, columns=STEP_COLUMNS, hidden_what="steps")


def attribution_reasons_html(reasons: Sequence[str]) -> str:
    """Why there is no time by module or source line: one sentence per distinct reason."""
    return "".join(sentence_html(f"No time by module or source line: {reason}.") for reason in dict.fromkeys(reasons))


def kernel_roofline_html(by_family: pd.DataFrame | None, per_name: pd.DataFrame | None = None) -> str:
    """Computation kernels against the device's roofline: time per (family, placed_by) and per kernel
    name its roof time as a share of its measured time; ``by_family`` None: no GPU kernel (the
    roofline chart places the CPU ops)."""
    if by_family is None:
        return sentence_html("No GPU kernels: the roofline above places the CPU ops.")
    if by_family.empty or per_name is None:
        return sentence_html("No kernel to place on the roofline.")
    return (
        _heading("Kernels against the roofline")
        + note_html(
            "Each kernel is memory- or compute-bound ('memory' / 'matrix') from the analytic work of the op "
            "that launched it where its input shapes are known ('analytic work'), else from its name "
            "('kernel name'); 'uncertain' kernels sit near the ridge. roof %: the least time the work can "
            "take at the device's peaks, as a share of the time the kernel took (100 % is on the roof)."
        )
        + table_html(by_family, hidden_what="groups")
        + table_html(per_name, columns=ROOF_COLUMNS, max_rows=15, hidden_what="kernels")
    )


def environment_html(devices: pd.DataFrame, distributed: pd.DataFrame) -> str:
    """Device properties (one column per distinct device) and distributedInfo (ranks with the same
    entries share a row), each folded over ranks."""
    parts = []
    if devices.empty:
        parts.append(sentence_html("The trace carries no device properties."))
    else:
        parts.append(
            _heading("Device properties")
            + note_html("One column per distinct device, with the ranks whose trace lists it and its device ids.")
            + table_html(devices, max_rows=60, hidden_what="properties")
        )
    if distributed.empty:
        parts.append(sentence_html("The trace carries no distributedInfo (a single-process trace)."))
    else:
        parts.append(_heading("distributedInfo") + table_html(distributed, hidden_what="groups"))
    return "".join(parts)
