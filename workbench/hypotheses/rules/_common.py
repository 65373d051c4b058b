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


# catalog fixes (workbench.fixes, named as strings: this layer imports no fix) that replace an unfused
# op family with one kernel, by the words its op or kernel names contain
FUSED_FIXES: tuple[tuple[tuple[str, ...], str], ...] = (
    (("layer_norm", "layernorm"), "fused_layer_norm"),
    (("rms_norm", "rmsnorm"), "fused_rms_norm"),
    (("gelu",), "fused_bias_gelu"),
    (("cross_entropy", "nll_loss"), "fused_cross_entropy"),
    (("softmax",), "fused_softmax"),
)
BATCHED_MATMUL_WORDS = ("bmm", "baddbmm", "matmul")


def fusion_fixes(
    names: Iterable[str], *, around: Iterable[str] = (), then: tuple[str, ...] = ("compiled",)
) -> tuple[str, ...]:
    """The catalog fixes to suggest for memory-bound op (or kernel) ``names``: ``sdpa_attention`` where a
    softmax among them runs with batched matmuls among ``around`` (the other ops of the trace: attention
    materialised), the fused kernel of each op family found (layer norm, RMS norm, GELU, cross-entropy,
    softmax), then ``then`` (torch.compile fuses the rest)."""
    text = {str(n).lower() for n in names}
    found = [fix for words, fix in FUSED_FIXES if any(w in t for t in text for w in words)]
    others = text | {str(n).lower() for n in around}
    if "fused_softmax" in found and any(w in t for t in others for w in BATCHED_MATMUL_WORDS):
        found.insert(0, "sdpa_attention")
    return tuple(dict.fromkeys((*found, *then)))
