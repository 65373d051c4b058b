"""Base of every analysis result: a frozen dataclass holding a ``table`` DataFrame plus derived
statistics, with ``to_dict()`` / ``from_dict()`` that round-trip (tables keep their dtypes).

A result draws nothing itself: ``workbench.render.html(result)`` / ``text`` / ``markdown`` draw it
(its own renderer where its type has one, else ``workbench.render.analysis_result``: its name and
table), and a notebook shows it through IPython's display formatter (``workbench.render.ipython``)."""

from __future__ import annotations

import dataclasses
import math
from typing import Any, ClassVar

import numpy as np
import pandas as pd

from workbench.errors import InvalidArgumentError

_FRAME_TAG = "__frame__"


def frame_to_dict(df: pd.DataFrame) -> dict:
    """A DataFrame as plain Python values: column names, dtypes, and column lists."""
    data = []
    for col in df.columns:
        values = df[col].tolist()
        data.append([None if _is_missing(v) else _plain(v) for v in values] if df[col].dtype == object else values)
    return {
        _FRAME_TAG: True,
        "columns": [str(c) for c in df.columns],
        "dtypes": [str(df[c].dtype) for c in df.columns],
        "data": data,
    }


def frame_from_dict(d: dict) -> pd.DataFrame:
    cols = {}
    for name, dtype, values in zip(d["columns"], d["dtypes"], d["data"]):
        cols[name] = pd.Series(values, dtype=dtype if dtype != "object" else object)
    return pd.DataFrame(cols, columns=d["columns"])


def _is_missing(v: Any) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v))


def _plain(v: Any) -> Any:
    if isinstance(v, (np.integer,)):
        return int(v)
    if isinstance(v, (np.floating,)):
        return float(v)
    if isinstance(v, tuple):
        return [_plain(x) for x in v]
    return v


def _encode(v: Any) -> Any:
    if isinstance(v, pd.DataFrame):
        return frame_to_dict(v)
    if isinstance(v, tuple):
        return [_encode(x) for x in v]
    if isinstance(v, dict):
        return {str(k): _encode(x) for k, x in v.items()}
    return _plain(v)


def _decode(v: Any) -> Any:
    if isinstance(v, dict) and v.get(_FRAME_TAG):
        return frame_from_dict(v)
    return v


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, pd.DataFrame) or isinstance(b, pd.DataFrame):
        return (
            isinstance(a, pd.DataFrame)
            and isinstance(b, pd.DataFrame)
            and a.equals(b)
            and list(a.dtypes.astype(str)) == list(b.dtypes.astype(str))
        )
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return a == b


@dataclasses.dataclass(frozen=True, eq=False)
class AnalysisResult:
    """Subclasses are ``@dataclass(frozen=True, eq=False)`` with a ``table`` field first."""

    table: pd.DataFrame
    kind: ClassVar[str] = "analysis"

    def to_dict(self) -> dict:
        out = {"kind": self.kind}
        for f in dataclasses.fields(self):
            out[f.name] = _encode(getattr(self, f.name))
        return out

    @classmethod
    def from_dict(cls, d: dict) -> "AnalysisResult":
        if d.get("kind") != cls.kind:
            raise InvalidArgumentError(
                f"{cls.__name__}.from_dict got a {d.get('kind')!r} result; pass the dict that "
                f"{cls.__name__}.to_dict() produced"
            )
        kwargs = {}
        for f in dataclasses.fields(cls):
            if f.name not in d and f.default is not dataclasses.MISSING:
                continue  # a field added since the dict was saved: its default (an older bundle)
            value = _decode(d[f.name])
            if isinstance(value, list) and str(f.type).startswith("tuple"):
                value = tuple(value)
            kwargs[f.name] = value
        return cls(**kwargs)

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return all(_same(getattr(self, f.name), getattr(other, f.name)) for f in dataclasses.fields(self))

    __hash__ = None  # type: ignore[assignment]  # holds DataFrames: unhashable
