"""Per-file column dicts -> the trace's DataFrames, with the derived columns everybody needs:
nesting and self time, runtime call -> CPU op, kernel -> runtime call -> op, kernel types,
copy directions, synchronisations, annotation kinds."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
from pandas.api.types import union_categoricals

import workbench.trace.classify as classify
import workbench.trace.schema as trace_schema
from workbench.trace.build import FileTables
from workbench.trace.nesting import nest


def assemble(files: list[FileTables]) -> dict[str, pd.DataFrame]:
    """The trace's tables. Each file's columns are handed over (not copied) and dropped as soon
    as their frame exists, so a column is held about once, not three times, at the peak."""
    raw = {
        name: _concat(files, name)
        for name in (
            "cpu_ops",
            "python_calls",
            "runtime",
            "kernels",
            "gpu_syncs",
            "memory",
            "annotations",
            "gpu_annotations",
            "flows",
        )
    }
    out: dict[str, pd.DataFrame] = {}
    out["cpu_ops"], out["runtime"] = _ops_and_runtime(raw.pop("cpu_ops"), raw.pop("runtime"))
    out["python_calls"] = _frame("python_calls", raw.pop("python_calls"))
    out["kernels"] = _kernels(raw.pop("kernels"), out["runtime"], out["cpu_ops"])
    out["syncs"] = _syncs(raw.pop("gpu_syncs"), out["runtime"])
    out["memory"] = _frame("memory", raw.pop("memory"))
    out["annotations"] = _annotations(raw.pop("annotations"), raw.pop("gpu_annotations"))
    flows = raw.pop("flows")
    if "phase" in flows:
        flows["phase"] = pd.Categorical(np.asarray(flows["phase"]))
    out["flows"] = _frame("flows", flows)
    return out


def _frame(table: str, columns: dict) -> pd.DataFrame:
    """A table frame that takes over ``columns``' arrays (emptied here, so nothing else holds them)."""
    frame = trace_schema.frame(table, columns, copy=False)
    columns.clear()
    return frame


def _concat(files: list[FileTables], name: str) -> dict:
    parts = [(f.rank, f.tables.pop(name)) for f in files if name in f.tables]
    if not parts:
        return {}
    keys = parts[0][1].keys()
    out = {}
    for key in keys:
        values = [p[key] for _, p in parts]
        if len(values) == 1:
            out[key] = values[0]
        elif isinstance(values[0], pd.Categorical):
            out[key] = union_categoricals(values)
        else:
            out[key] = np.concatenate(values)
    out["rank"] = np.concatenate([np.full(len(p["ts_us"]), rank, dtype=np.int64) for rank, p in parts])
    return out


def _ops_and_runtime(ops_raw: dict, calls_raw: dict) -> tuple[pd.DataFrame, pd.DataFrame]:
    ops = _frame("cpu_ops", ops_raw)
    calls = _frame("runtime", calls_raw)
    parent, depth, self_us, call_op = nest(ops, calls)
    ops["parent"], ops["depth"], ops["self_us"] = parent, depth, self_us
    calls["api"] = _categorical_per_name(calls["name"], classify.runtime_api)
    calls["is_launch"] = _per_name(calls["name"], lambda n: n in classify.LAUNCH_CALLS, bool)
    calls["is_sync"] = _per_name(calls["name"], lambda n: n in classify.SYNC_CALLS, bool)
    calls["op_index"] = call_op
    calls["op_name"] = _names_at(ops["name"], call_op)
    return ops, calls


def _name_codes(names: pd.Series) -> tuple[list[str], np.ndarray]:
    """A categorical column's labels, and each row's code into them ("" after the labels, for a missing
    value, so a code is always a valid index)."""
    labels = [str(n) for n in names.cat.categories]
    codes = names.cat.codes.to_numpy()
    return labels, np.where(codes >= 0, codes, len(labels))


def _per_name(names: pd.Series, fn, dtype: type = object) -> np.ndarray:
    """``fn`` of each row's name, computed once per distinct name (a categorical column)."""
    labels, codes = _name_codes(names)
    return np.array([fn(n) for n in labels] + [fn("")], dtype=dtype)[codes]


def _categorical_per_name(names: pd.Series, fn, categories: Sequence[str] | None = None) -> pd.Categorical:
    """``pd.Categorical(_per_name(names, fn), categories)``, built from the distinct names alone."""
    labels, codes = _name_codes(names)
    return by_code(np.array([fn(n) for n in labels] + [fn("")], dtype=object), codes, categories)


def by_code(per_code: np.ndarray, codes: np.ndarray, categories: Sequence[str] | None = None) -> pd.Categorical:
    """``pd.Categorical(per_code[codes], categories)`` (the same categories, in the same order) without a
    pass over strings per row: the categorical of the values the codes use, taken per row."""
    if not len(codes) or not len(per_code):
        return pd.Categorical(per_code[codes], categories=categories)
    used = np.flatnonzero(np.bincount(codes, minlength=len(per_code)))
    if categories is None:
        distinct = pd.Categorical(per_code[used])
        dtype, distinct_codes = distinct.dtype, distinct.codes
    else:  # a value outside the categories is missing (-1), as pd.Categorical has it, without its warning
        dtype = pd.Categorical([], categories=categories).dtype
        distinct_codes = dtype.categories.get_indexer(per_code[used])
    position = np.zeros(len(per_code), dtype=np.intp)
    position[used] = np.arange(len(used))
    return pd.Categorical.from_codes(distinct_codes[position[codes]], dtype=dtype)


def _names_at(names: pd.Series, index: np.ndarray) -> pd.Categorical:
    """names[index] with "" where index is -1, as a categorical."""
    labels, codes = _name_codes(names)
    if not len(codes):
        return pd.Categorical(np.full(len(index), "", dtype=str))
    per_code = np.array(labels + ["nan", ""], dtype=str)  # a missing name (code len(labels)) reads "nan"
    picked = np.where(index >= 0, codes[np.clip(index, 0, None)], len(labels) + 1)
    return by_code(per_code, picked)


def _lookup(keys_from: pd.DataFrame, keys_to: pd.DataFrame) -> np.ndarray:
    """Row in ``keys_to`` with the same (rank, correlation) as each row of ``keys_from``; -1 if none."""
    target = pd.MultiIndex.from_arrays([keys_to["rank"].to_numpy(), keys_to["correlation"].to_numpy()])
    valid = keys_to["correlation"].to_numpy() >= 0
    first = ~target.duplicated() & valid
    index = pd.MultiIndex.from_arrays([keys_to["rank"].to_numpy()[first], keys_to["correlation"].to_numpy()[first]])
    rows = np.flatnonzero(first)
    found = index.get_indexer(
        pd.MultiIndex.from_arrays([keys_from["rank"].to_numpy(), keys_from["correlation"].to_numpy()])
    )
    out = np.where(found >= 0, rows[np.clip(found, 0, None)] if len(rows) else -1, -1)
    out[keys_from["correlation"].to_numpy() < 0] = -1
    return out


def _kernels(raw: dict, calls: pd.DataFrame, ops: pd.DataFrame) -> pd.DataFrame:
    kernels = _frame("kernels", raw)
    if not len(kernels):
        return kernels
    kernels["kind"] = _categorical_per_name(kernels["name"], classify.kernel_kind, trace_schema.KERNEL_KINDS)
    labels, codes = _name_codes(kernels["name"])
    parts = [classify.copy_parts(n) for n in labels] + [("", "", "")]
    for col, key in (("copy_kind", 0), ("copy_src", 1), ("copy_dst", 2)):
        kernels[col] = by_code(np.array([p[key] for p in parts], dtype=object), codes)
    row = _lookup(kernels, calls)
    kernels["runtime_index"] = row
    kernels["launch_name"] = _names_at(calls["name"], row)
    safe = np.clip(row, 0, None)
    has = row >= 0
    kernels["launch_ts_us"] = np.where(has, calls["ts_us"].to_numpy()[safe] if len(calls) else np.nan, np.nan)
    kernels["launch_dur_us"] = np.where(has, calls["dur_us"].to_numpy()[safe] if len(calls) else np.nan, np.nan)
    op = np.where(has, calls["op_index"].to_numpy()[safe] if len(calls) else -1, -1)
    kernels["op_index"] = op
    kernels["op_name"] = _names_at(ops["name"], op)
    launching = _launching_context(kernels, ops)
    ours, hta = classify.kernel_types(kernels["name"].array, launching)
    kernels["kernel_type"] = pd.Categorical(ours, categories=trace_schema.KERNEL_TYPES)
    kernels["kernel_type_hta"] = pd.Categorical(hta, categories=trace_schema.KERNEL_TYPES)
    return kernels


def _launching_context(kernels: pd.DataFrame, ops: pd.DataFrame) -> pd.Categorical:
    """The nearest collective-looking ancestor op name of each kernel's launching op, else ""."""
    op = kernels["op_index"].to_numpy()
    if not len(ops):
        return pd.Categorical([""] * len(kernels))
    op_names = np.asarray(ops["name"].astype(object))
    is_collective = np.array(
        [bool(classify.COLLECTIVE_OP.search(str(n))) for n in ops["name"].cat.categories] + [False]
    )
    codes = ops["name"].cat.codes.to_numpy().copy()
    codes[codes < 0] = len(is_collective) - 1
    collective = is_collective[codes]
    parent = ops["parent"].to_numpy()
    found = np.full(len(op), -1, dtype=np.int64)
    current = op.copy()
    for _ in range(64):  # walk up the nesting; real traces are far shallower
        live = (current >= 0) & (found < 0)
        if not live.any():
            break
        hit = live.copy()
        hit[live] = collective[current[live]]
        found[hit] = current[hit]
        current[live] = parent[current[live]]
    return pd.Categorical(np.where(found >= 0, op_names[np.clip(found, 0, None)], "").astype(str))


def _syncs(gpu_syncs: dict, calls: pd.DataFrame) -> pd.DataFrame:
    parts = []
    if gpu_syncs:
        parts.append(
            trace_schema.frame(
                "syncs",
                {
                    **{
                        k: gpu_syncs[k]
                        for k in (
                            "rank",
                            "name",
                            "tid",
                            "stream",
                            "ts_us",
                            "dur_us",
                            "end_us",
                            "correlation",
                            "event_index",
                        )
                    },
                    "source": ["cuda_sync"] * len(gpu_syncs["ts_us"]),
                },
            )
        )
    calls_sync = calls[calls["is_sync"]]
    if len(calls_sync):
        parts.append(
            trace_schema.frame(
                "syncs",
                {
                    "rank": calls_sync["rank"],
                    "name": calls_sync["name"].astype(str),
                    "source": ["runtime"] * len(calls_sync),
                    "tid": calls_sync["tid"].astype(str),
                    "ts_us": calls_sync["ts_us"],
                    "dur_us": calls_sync["dur_us"],
                    "end_us": calls_sync["end_us"],
                    "correlation": calls_sync["correlation"],
                    "event_index": calls_sync["event_index"],
                },
            )
        )
    if not parts:
        return trace_schema.empty("syncs")
    frame = pd.concat(parts, ignore_index=True) if len(parts) > 1 else parts[0]
    for col in ("source", "name", "tid"):
        frame[col] = pd.Categorical(frame[col].astype(str))
    return frame.sort_values(["rank", "ts_us"], kind="stable").reset_index(drop=True)


def _annotations(cpu: dict, gpu: dict) -> pd.DataFrame:
    parts = []
    for raw, gpu_side in ((cpu, False), (gpu, True)):
        if not raw:
            continue
        names = [str(n) for n in raw["name"]]
        steps = np.array([classify.step_number(n) for n in names], dtype=np.int64)
        kind = np.where(gpu_side, "gpu_user", np.where(steps >= 0, "step", "user"))
        parts.append(
            trace_schema.frame(
                "annotations",
                {
                    **{k: raw[k] for k in ("rank", "pid", "tid", "ts_us", "dur_us", "end_us", "external_id")},
                    "name": names,
                    "step": steps,
                    "kind": kind,
                },
            )
        )
    if not parts:
        return trace_schema.empty("annotations")
    frame = pd.concat(parts, ignore_index=True) if len(parts) > 1 else parts[0]
    for col in ("pid", "tid", "name"):
        frame[col] = pd.Categorical(frame[col].astype(str))
    frame["kind"] = pd.Categorical(frame["kind"].astype(str), categories=trace_schema.ANNOTATION_KINDS)
    return frame.sort_values(["rank", "ts_us"], kind="stable").reset_index(drop=True)
