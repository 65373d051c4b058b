"""Buffers grown by concatenation: ``out = torch.cat([out, chunk])`` in a loop.

Each such ``aten::cat`` allocates a fresh buffer one chunk larger than the last and copies everything
gathered so far into it, so a buffer grown to n chunks is written about n²/2 chunk-sizes over, where a
preallocated one is written once. A cat is a *growth step* when one of its inputs has exactly as many
elements as the output of the cat before it on the same thread (the accumulator fed back) and its output is
larger; consecutive growth steps form a chain. Shapes come from the profiler's ``Input Dims`` (a
``TensorList``'s dims are a list of shapes); element sizes are not needed: the ratio of elements written
to elements kept is the same in bytes.
"""

from __future__ import annotations

import json
from math import prod

import numpy as np
import pandas as pd

CAT_OPS = frozenset({"aten::cat", "aten::_cat", "aten::concat", "aten::concatenate"})


def _cat_numels(input_dims: object) -> list[int] | None:
    """The element counts of a cat's tensor inputs, from its recorded dims (``[[[a, b], [c, b]], []]``)."""
    try:
        dims = json.loads(input_dims) if isinstance(input_dims, str) else input_dims
    except ValueError:
        return None
    if not isinstance(dims, list) or not dims or not isinstance(dims[0], list):
        return None
    tensors = dims[0]
    if not all(isinstance(t, list) and all(isinstance(x, int) for x in t) for t in tensors):
        return None
    return [int(prod(t)) if t else 0 for t in tensors]


def growth_chains(ops: pd.DataFrame) -> pd.DataFrame:
    """The growth steps among ``ops`` (one thread's ops in time order, with ``name``, ``input_dims``,
    ``dur_us``): the rows (same index) with ``out_numel``, ``fed_numel`` (the accumulator's elements) and
    ``chain`` (an id per chain of consecutive growth steps); empty when no cat grows a buffer."""
    cols = ["out_numel", "fed_numel", "chain"]
    if ops.empty or "input_dims" not in ops:
        return pd.DataFrame(columns=[*ops.columns, *cols])
    cats = ops[ops["name"].astype(str).isin(CAT_OPS)]
    if cats.empty:
        return pd.DataFrame(columns=[*ops.columns, *cols])
    out_numel, fed_numel, chain = [], [], []
    previous_out, current, next_id = None, -1, 0
    for dims in cats["input_dims"].tolist():
        numels = _cat_numels(dims)
        total = sum(numels) if numels else None
        fed = previous_out if numels and previous_out is not None and previous_out in numels else None
        if fed is None and numels and len(numels) > 1 and 0 in numels:
            fed, current = 0, -1  # a new chain starts from an empty accumulator
        grows = fed is not None and total is not None and total > fed
        if grows:
            if current < 0:
                current, next_id = next_id, next_id + 1
        else:
            current = -1
        out_numel.append(total if total is not None else -1)
        fed_numel.append(fed if grows else -1)
        chain.append(current if grows else -1)
        previous_out = total
    marked = cats.assign(out_numel=out_numel, fed_numel=fed_numel, chain=chain)
    return marked[marked["chain"] >= 0]


def growth_summary(steps: pd.DataFrame) -> dict[str, float]:
    """Totals over the growth steps of ``growth_chains``: steps, chains, time (µs), elements written
    (``written_numel``: every output in full) and elements a preallocated buffer writes once
    (``kept_numel``: each chain's final size), and ``removable_fraction`` = 1 - kept / written."""
    if steps.empty:
        return {
            "steps": 0,
            "chains": 0,
            "dur_us": 0.0,
            "written_numel": 0.0,
            "kept_numel": 0.0,
            "removable_fraction": 0.0,
        }
    written = float(steps["out_numel"].sum())
    kept = float(steps.groupby("chain")["out_numel"].max().sum())
    return {
        "steps": int(len(steps)),
        "chains": int(steps["chain"].nunique()),
        "dur_us": float(steps["dur_us"].sum()),
        "written_numel": written,
        "kept_numel": kept,
        "removable_fraction": float(np.clip(1.0 - kept / written, 0.0, 1.0)) if written > 0 else 0.0,
    }
