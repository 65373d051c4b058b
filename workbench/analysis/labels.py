"""Text columns as integer codes plus one label per distinct value, so that analyses group and look up
per distinct name or shape signature, never per row (a 4M-event trace has a few thousand distinct names).
Categorical columns (what the reader produces) cost nothing; others are factorised once."""
from __future__ import annotations

import numpy as np
import pandas as pd


def as_text(value) -> str:
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return ""
    return value if isinstance(value, str) else str(value)


def codes_and_labels(values: pd.Series | None, n: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(int64 code per row, object array of str labels). Missing values get the label "" (the last one).
    ``values=None`` (a column the trace lacks) gives ``n`` rows of ""."""
    if values is None:
        return np.zeros(n, dtype=np.int64), np.array([""], dtype=object)
    if isinstance(values.dtype, pd.CategoricalDtype):
        uniques = values.cat.categories
        codes = values.cat.codes.to_numpy().astype(np.int64)
    else:
        codes, uniques = pd.factorize(values)
        codes = codes.astype(np.int64)
    text = np.array([as_text(u) for u in uniques] + [""], dtype=object)
    codes[codes < 0] = len(text) - 1
    labels, merged = np.unique(text, return_inverse=True)  # one code per distinct text ("" and NaN alike)
    return merged.astype(np.int64)[codes], labels.astype(object)


def column_codes(df: pd.DataFrame, col: str) -> tuple[np.ndarray, np.ndarray]:
    return codes_and_labels(df[col] if col in df.columns else None, len(df))


def label_mask(labels: np.ndarray, codes: np.ndarray, wanted) -> np.ndarray:
    """Rows whose label is in ``wanted``: tested once per label."""
    hit = np.fromiter((lab in wanted for lab in labels), dtype=bool, count=len(labels))
    return hit[codes]
