"""The timeline's rows as the page carries them: columns, with each text once.

A million-event timeline carries tens of thousands of rows (every level of the pyramid). As JSON
records each row would repeat its twelve keys and its lane, kind, name and shapes texts (about
340 bytes a row); here the data is one datum holding a list per numeric column plus a dictionary
per text column (``wb_lanes``, ``wb_kinds``, ``wb_names``, ``wb_shapes``) and an index per row
into it (about 70 bytes a row). The chart expands it in the page: a vega-lite ``flatten`` turns
the lists into rows, and after the level filter a ``calculate`` looks the texts up, so the rows
that are drawn (and their tooltips) are the same as with records. :func:`chart_rows` decodes a
spec the same way, for tests and tools that read the spec rather than the page.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from workbench.charts.common import shorten
from workbench.charts.timeline_lod import NAME_CHARS, bin_label

ROW_FIELDS = ["ts_us", "end_us", "dur_us", "count", "opacity", "lvl", "ind", "fine", "li", "ki", "ni", "si"]
DICTIONARIES = {"lane": ("wb_lanes", "li"), "kind": ("wb_kinds", "ki"), "shapes": ("wb_shapes", "si")}
NAMES = ("wb_names", "ni")
BIN_NAME_EXPR = (
    "datum.ind == 1 ? datum.wb_names[datum.ni] : "
    "format(datum.count, ',') + ' events; longest: ' + datum.wb_names[datum.ni]"
)


def _codes(values: Any) -> tuple[list[int], list[str]]:
    codes, uniques = pd.factorize(pd.Series(values, dtype=object).fillna(""), sort=False)
    return codes.tolist(), [str(u) for u in uniques]


def compact_data(table: pd.DataFrame) -> dict[str, Any]:
    """One datum: a list per row field and a dictionary per text column (see the module doc)."""
    data: dict[str, Any] = {
        "ts_us": table["ts_us"].round(3).tolist(),
        "end_us": table["end_us"].round(3).tolist(),
        "dur_us": table["dur_us"].round(3).tolist(),
        "count": table["count"].astype(int).tolist(),
        "opacity": table["opacity"].round(2).tolist(),
        "lvl": table["lvl"].astype(int).tolist(),
        "ind": table["ind"].astype(int).tolist(),
        "fine": table["fine"].astype(int).tolist(),
    }
    for column, (dictionary, index) in DICTIONARIES.items():
        values = (
            table[column]
            if column != "shapes"
            else [shorten(v, NAME_CHARS) if isinstance(v, str) else "" for v in table["shapes"]]
        )
        data[index], data[dictionary] = _codes(values)
    data[NAMES[1]], data[NAMES[0]] = _codes([shorten(str(n), NAME_CHARS) for n in table["longest"]])
    return data


def calculate_fields() -> dict[str, str]:
    """Vega expressions that give each expanded row its texts back (as altair calculate kwargs)."""
    fields = {column: f"datum.{dictionary}[datum.{index}]" for column, (dictionary, index) in DICTIONARIES.items()}
    fields["name"] = BIN_NAME_EXPR
    return fields


def chart_rows(spec: dict[str, Any]) -> list[dict[str, Any]]:
    """Every row a timeline spec carries, decoded as the page decodes it (all levels, no filter)."""
    rows = []
    for datum in (d for values in spec.get("datasets", {}).values() for d in values):
        if not isinstance(datum, dict) or "wb_names" not in datum:
            continue
        for i in range(len(datum["ts_us"])):
            row = {f: datum[f][i] for f in ROW_FIELDS}
            for column, (dictionary, index) in DICTIONARIES.items():
                row[column] = datum[dictionary][row[index]]
            longest = datum[NAMES[0]][row[NAMES[1]]]
            row["name"] = longest if row["ind"] == 1 else bin_label(row["count"], longest)
            rows.append(row)
    return rows


def rows_frame(spec: dict[str, Any]) -> pd.DataFrame:
    """:func:`chart_rows` as a DataFrame."""
    rows = chart_rows(spec)
    return pd.DataFrame(rows) if rows else pd.DataFrame(columns=ROW_FIELDS + ["lane", "kind", "shapes", "name"])


__all__ = ["chart_rows", "compact_data", "calculate_fields", "rows_frame", "ROW_FIELDS"]
