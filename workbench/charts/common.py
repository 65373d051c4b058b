"""Helpers shared by the chart builders: tables out of result objects, a chart that explains."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, Protocol, Sequence, Union

import pandas as pd

from workbench.errors import InvalidArgumentError, NotApplicableError, WorkbenchError

if TYPE_CHECKING:
    import altair


class HasTable(Protocol):
    """A result with its rows as a DataFrame (the analysis results: ``OpBreakdown``, ``KernelBreakdown``, ...)."""

    @property
    def table(self) -> pd.DataFrame: ...


# What a builder draws from: a result with ``.table``, the DataFrame itself, or its rows as dicts.
TableLike = Union[HasTable, pd.DataFrame, Sequence[Mapping[str, Any]]]


class TraceTables(Protocol):
    """The event tables a timeline draws (``TraceData``, the ``Trace`` facade); each
    may be None or empty."""

    @property
    def kernels(self) -> pd.DataFrame | None: ...

    @property
    def cpu_ops(self) -> pd.DataFrame | None: ...

    @property
    def runtime(self) -> pd.DataFrame | None: ...

    @property
    def annotations(self) -> pd.DataFrame | None: ...


MAX_CHART_ROWS = 5000  # altair's default limit; every builder stays under it


def as_table(result: TableLike, what: str) -> pd.DataFrame:
    """A DataFrame from a result object (``.table``), a DataFrame, or a list of dicts."""
    if isinstance(result, pd.DataFrame):
        return result
    table = getattr(result, "table", None)
    if isinstance(table, pd.DataFrame):
        return table
    if isinstance(result, (list, tuple)):
        return pd.DataFrame(list(result))
    raise InvalidArgumentError(
        f"{what}: expected a result with a .table DataFrame, a DataFrame or a list of dicts; "
        f"got {type(result).__name__}"
    )


def require_columns(table: pd.DataFrame, columns: Iterable[str], what: str) -> None:
    missing = [c for c in columns if c not in table.columns]
    if missing:
        raise InvalidArgumentError(f"{what}: table lacks column(s) {missing}; it has {list(table.columns)}")


def first_present(table: pd.DataFrame, candidates: Iterable[str], what: str) -> str:
    for name in candidates:
        if name in table.columns:
            return name
    raise InvalidArgumentError(
        f"{what}: none of the columns {list(candidates)} is in the table ({list(table.columns)})"
    )


def message_chart(message: str, *, title: str = "", width: int = 420) -> altair.Chart:
    """A chart that says, in words, why there is nothing to draw."""
    import altair as alt

    data = pd.DataFrame({"message": [message]})
    chart = alt.Chart(data, title=title) if title else alt.Chart(data)  # title=None fails when the chart is saved
    return (
        chart.mark_text(align="left", baseline="middle", fontSize=13, color="#555")
        .encode(text="message:N", x=alt.value(4), y=alt.value(12))
        .properties(width=width, height=24, usermeta={"workbench_empty": message})
    )


def finite_rows(table: pd.DataFrame, columns: Iterable[str]) -> tuple[pd.DataFrame, int]:
    """Rows whose ``columns`` are finite numbers, and how many were dropped."""
    cols = list(columns)
    numeric = table[cols].apply(pd.to_numeric, errors="coerce")
    keep = numeric.notna().all(axis=1) & numeric.abs().lt(float("inf")).all(axis=1)
    return table.loc[keep], int((~keep).sum())


def shorten(name: Any, limit: int = 60) -> str:
    """Any text cut to ``limit`` characters (the one cut, ``labels.cut``). Kernel and op names go through
    ``workbench.analysis.labels.unique_labels`` instead (the function name, never two under one label)."""
    from workbench.analysis.labels import as_text, cut

    return cut(as_text(name), limit)


def guarded_chart(build: Callable[[], altair.TopLevelMixin], title: str) -> altair.TopLevelMixin:
    """Build a chart; what the data cannot give becomes a chart that says why, in words."""
    try:
        return build()
    except NotApplicableError as exc:
        return message_chart(f"not applicable: {exc.reason}", title=title)
    except WorkbenchError as exc:
        return message_chart(f"cannot draw {title.lower()}: {exc}", title=title)
