"""Small helpers the rules share: unit conversion, bounding the stake, evidence rows."""

from __future__ import annotations

from typing import Any, Iterable

import pandas as pd


def ms(us: float) -> float:
    return float(us) / 1000.0


def bounded_ms(stake_us: float, window_us: float) -> float:
    """A stake can never exceed the measured time it could remove."""
    return ms(max(0.0, min(float(stake_us), float(window_us))))


def rows(df: pd.DataFrame, columns: Iterable[str], n: int = 5, by: str | None = None) -> tuple[dict[str, Any], ...]:
    """The ``n`` largest rows (by ``by``) as small plain records for an Evidence."""
    cols = [c for c in columns if c in df.columns]
    if df.empty or not cols:
        return ()
    top = df.nlargest(n, by) if by else df.head(n)
    out = []
    for rec in top[cols].to_dict("records"):
        out.append({k: (round(v, 3) if isinstance(v, float) else v) for k, v in rec.items()})
    return tuple(out)


def pct(part: float, whole: float) -> float:
    return 100.0 * float(part) / float(whole) if whole > 0 else 0.0


def per_rank_max_us(df: pd.DataFrame, column: str = "dur_us") -> float:
    """The largest per-rank sum of ``column``: ranks run at the same time, so a saving on every rank
    shortens the job by at most the largest rank's share, never by the sum over ranks."""
    if df.empty:
        return 0.0
    if "rank" not in df:
        return float(df[column].sum())
    return float(df.groupby("rank")[column].sum().max())


def summed_over(df: pd.DataFrame) -> str:
    """ " (summed over N ranks)" when ``df`` holds rows of several ranks, else "": a total over ranks says so."""
    n = int(df["rank"].nunique()) if "rank" in df and not df.empty else 1
    return f" (summed over {n} ranks)" if n > 1 else ""
