"""The optimizer's step split by the parameter (and so the module) each stretch of it updates.

A trace shows an ``Optimizer.step#AdamW.step`` span and the ops inside it, not which parameter an op
updated. What the traced pass recorded of each optimizer (``workbench.trace.optimizer_params``: the
parameters its step visits, in order, with their modules and shapes) makes the split where the step
updates one parameter at a time: torch's single-tensor implementations (``foreach=False``, the default
where foreach kernels do not apply) loop over the parameters, running the same ops for each. So the
span's top-level ops (those not inside another op of the span) are one repeat per parameter:

- the ops are cut into as many equal repeats as the step visited parameters, after a prefix (the step's
  own ops before its loop: a lazy state initialisation, a learning-rate tensor) of at most one repeat;
- a cut is taken only where every repeat runs the same op names in the same order and each repeat's ops
  take a tensor of its parameter's shape (``input_dims``): else the span is not split, and says why;
- repeat ``i`` covers from its first op's start to the next repeat's first op (the last: to the span's end),
  so the Python between the ops counts with its parameter, and the prefix stays with the step as a whole.

A foreach or fused step updates every parameter in each op (``_foreach_*`` / ``_fused_*``): nothing in the
trace says how much of one op a parameter took, so it is not split (a share by size would be a model, not a
measurement) and is reported as one stretch. A step with no record (a trace from a file) is not split.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from workbench.analysis.backward_scopes import optimizer_step_spans
from workbench.trace.nesting import nest
from workbench.trace.optimizer_params import OptimizerStepParams

SEGMENT_COLUMNS = ["rank", "pid", "tid", "ts_us", "end_us", "module", "param", "optimizer"]
MULTI_TENSOR_PREFIXES = ("aten::_foreach_", "aten::_fused_")


@dataclass(frozen=True)
class OptimizerSplit:
    """Per-parameter stretches of the optimizer's steps (``segments``: rank, pid, tid, ts_us, end_us, module
    label, param name, optimizer) and, per optimizer class, why its steps were not split (``not_split``)."""

    segments: pd.DataFrame
    not_split: dict[str, str]
    split_steps: int  # spans cut into per-parameter stretches

    def module_at(self, points: pd.DataFrame) -> np.ndarray:
        """Per row of ``points`` (rank, pid, tid, ts_us, end_us): the label of the module whose parameter the
        optimizer was updating when it started ("" where none: outside the stretches)."""
        out = np.full(len(points), "", dtype=object)
        if not len(self.segments) or not len(points):
            return out
        typed = points.astype({"pid": str, "tid": str})
        found = nest(self.segments.reset_index(drop=True), typed)[3]
        hit = found >= 0
        out[hit] = self.segments["module"].to_numpy(dtype=object)[found[hit]]
        return out


def _empty_segments() -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series(dtype="float64" if c.endswith("_us") else "object") for c in SEGMENT_COLUMNS})


def _dims(value: object) -> list:
    try:
        parsed = json.loads(str(value)) if value not in (None, "") else []
    except ValueError:
        return []
    return parsed if isinstance(parsed, list) else []


def _cut(names: list[str], dims: list[list], shapes: list[list[int]]) -> int | None:
    """The prefix length after which ``names`` is one repeat per shape, each repeat taking a tensor of its
    shape; None where no cut holds."""
    n, k_params = len(names), len(shapes)
    if not k_params or n < k_params:
        return None
    for prefix in range(0, n):
        rest = n - prefix
        if rest < k_params:
            return None
        if rest % k_params:
            continue
        period = rest // k_params
        if prefix > period:
            return None
        body = names[prefix:]
        if any(body[i] != body[i % period] for i in range(period, rest)):
            continue
        ok = all(any(shapes[j] in dims[prefix + j * period + i] for i in range(period)) for j in range(k_params))
        if ok:
            return prefix
    return None


def optimizer_split(
    cpu_ops: pd.DataFrame, annotations: pd.DataFrame | None, records: Sequence[OptimizerStepParams]
) -> OptimizerSplit:
    """Cut each ``Optimizer.step`` span of a recorded optimizer into per-parameter stretches (see the module
    docstring)."""
    spans = optimizer_step_spans(annotations, cpu_ops)
    by_name: dict[str, list[OptimizerStepParams]] = {}
    for record in records:
        by_name.setdefault(record.span_name, []).append(record)
    if not len(spans) or not by_name or cpu_ops is None or not len(cpu_ops):
        return OptimizerSplit(_empty_segments(), {}, 0)
    ops = cpu_ops.reset_index(drop=True)
    points = ops.reindex(columns=["rank", "pid", "tid", "ts_us", "end_us"]).astype({"pid": str, "tid": str})
    points["rank"] = points["rank"].fillna(0).astype(int)
    in_span = nest(spans.reset_index(drop=True), points)[3]
    parent = ops["parent"].to_numpy(np.int64) if "parent" in ops else np.full(len(ops), -1, dtype=np.int64)
    parent_span = np.where(parent >= 0, in_span[np.clip(parent, 0, None)], -1)
    top = (in_span >= 0) & (parent_span != in_span)  # not inside another op of the same span
    names = ops["name"].astype(str).to_numpy(dtype=object)
    dims = ops["input_dims"].to_numpy(dtype=object) if "input_dims" in ops else np.full(len(ops), "", dtype=object)
    parts, not_split, split = [], {}, 0
    order = np.argsort(ops["ts_us"].to_numpy(), kind="stable")
    top_sorted = order[top[order]]
    members: dict[int, list[int]] = {}
    for i in top_sorted.tolist():
        members.setdefault(int(in_span[i]), []).append(i)
    for s, span in enumerate(spans.itertuples(index=False)):
        found = by_name.get(str(span.name))
        if not found:
            continue
        optimizer = found[0].optimizer
        if len(found) > 1:
            not_split[optimizer] = f"{len(found)} {optimizer} optimizers stepped: their spans cannot be told apart"
            continue
        record = found[0]
        rows = members.get(s, [])
        if not rows:
            continue
        if record.foreach or record.fused or any(str(names[i]).startswith(MULTI_TENSOR_PREFIXES) for i in rows):
            kind = "fused" if record.fused else "foreach"
            not_split[optimizer] = (
                f"a {kind} step updates all {len(record.params)} parameters in each op: the trace does not say "
                "how much of an op each took, so its time is not split by module"
            )
            continue
        shapes = [list(p.shape) for p in record.params]
        prefix = _cut([str(names[i]) for i in rows], [_dims(dims[i]) for i in rows], shapes)
        if prefix is None:
            not_split[optimizer] = (
                f"its {len(rows)} ops do not fall into {len(record.params)} repeats of the same ops, one per parameter "
                "taking a tensor of its shape: not split by module"
            )
            continue
        period = (len(rows) - prefix) // len(record.params)
        starts = [float(ops.at[rows[prefix + j * period], "ts_us"]) for j in range(len(record.params))]
        ends = starts[1:] + [float(span.end_us)]
        for p, lo, hi in zip(record.params, starts, ends):
            parts.append((int(span.rank), str(span.pid), str(span.tid), lo, hi, p.module, p.name, optimizer))
        split += 1
    segments = pd.DataFrame(parts, columns=SEGMENT_COLUMNS) if parts else _empty_segments()
    return OptimizerSplit(segments, not_split, split)
