"""The column schema of every trace table, in one place.

Times are float64 microseconds relative to the rank's own origin (its earliest event; the
absolute origin is kept in ``TraceData.meta.origins_ns``). Units are in the column names.
Ids that can be absent are int64 with -1 for "absent". Text columns with few distinct values
(names, kinds) are pandas categoricals.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from workbench.errors import InvalidArgumentError

CAT = "category"
I64 = "int64"
F64 = "float64"
STR = "str"
BOOL = "bool"

_TIMES = [("ts_us", F64), ("dur_us", F64), ("end_us", F64)]

# table name -> ordered (column, dtype)
TABLES: dict[str, list[tuple[str, str]]] = {
    "cpu_ops": [
        ("rank", I64),
        ("pid", CAT),
        ("tid", CAT),
        ("name", CAT),
        ("cat", CAT),
        *_TIMES,
        ("self_us", F64),
        ("depth", I64),
        ("parent", I64),
        ("external_id", I64),
        ("sequence_number", I64),
        ("input_dims", CAT),
        ("input_types", CAT),
        ("event_index", I64),
    ],
    "python_calls": [("rank", I64), ("pid", CAT), ("tid", CAT), ("name", CAT), *_TIMES],
    "runtime": [
        ("rank", I64),
        ("pid", CAT),
        ("tid", CAT),
        ("name", CAT),
        ("api", CAT),
        *_TIMES,
        ("correlation", I64),
        ("external_id", I64),
        ("is_launch", BOOL),
        ("is_sync", BOOL),
        ("op_index", I64),
        ("op_name", CAT),
        ("event_index", I64),
    ],
    "kernels": [
        ("rank", I64),
        ("device", I64),
        ("stream", I64),
        ("name", CAT),
        ("kind", CAT),
        ("kernel_type", CAT),
        ("kernel_type_hta", CAT),
        *_TIMES,
        ("correlation", I64),
        ("external_id", I64),
        ("bytes", I64),
        ("gbps", F64),
        ("copy_kind", CAT),
        ("copy_src", CAT),
        ("copy_dst", CAT),
        ("grid_x", I64),
        ("grid_y", I64),
        ("grid_z", I64),
        ("block_x", I64),
        ("block_y", I64),
        ("block_z", I64),
        ("registers_per_thread", I64),
        ("shared_memory_bytes", I64),
        ("blocks_per_sm", F64),
        ("warps_per_sm", F64),
        ("occupancy_pct", F64),
        ("runtime_index", I64),
        ("launch_name", CAT),
        ("launch_ts_us", F64),
        ("launch_dur_us", F64),
        ("op_index", I64),
        ("op_name", CAT),
        ("event_index", I64),
    ],
    "syncs": [
        ("rank", I64),
        ("source", CAT),
        ("name", CAT),
        ("tid", CAT),
        ("stream", I64),
        *_TIMES,
        ("correlation", I64),
        ("event_index", I64),
    ],
    "memory": [
        ("rank", I64),
        ("pid", CAT),
        ("tid", CAT),
        ("ts_us", F64),
        ("bytes", I64),
        ("total_allocated", I64),
        ("total_reserved", I64),
        ("addr", I64),
        ("device_type", I64),
        ("device_id", I64),
    ],
    "annotations": [
        ("rank", I64),
        ("pid", CAT),
        ("tid", CAT),
        ("name", CAT),
        ("kind", CAT),
        ("step", I64),
        *_TIMES,
        ("external_id", I64),
    ],
    "flows": [
        ("rank", I64),
        ("cat", CAT),
        ("flow_id", I64),
        ("phase", CAT),
        ("pid", CAT),
        ("tid", CAT),
        ("ts_us", F64),
    ],
}

# what the categorical/enum columns may hold
KERNEL_KINDS = ("kernel", "memcpy", "memset")
KERNEL_TYPES = ("computation", "communication", "memory")
ANNOTATION_KINDS = ("step", "user", "gpu_user")
SYNC_SOURCES = ("runtime", "cuda_sync")


def columns(table: str) -> list[str]:
    return [name for name, _ in TABLES[table]]


def empty(table: str) -> pd.DataFrame:
    """An empty frame with the table's columns and dtypes."""
    return frame(table, {})


def frame(table: str, data: dict[str, object], copy: bool = True) -> pd.DataFrame:
    """Build a table from column arrays; missing columns are filled with absent values.

    ``copy=False`` lets the frame use the arrays as they are (no consolidating copy): for a
    caller that hands them over and keeps no reference.
    """
    lengths = {len(v) for v in data.values()}  # type: ignore[arg-type]
    if len(lengths) > 1:
        raise InvalidArgumentError(
            f"columns of the {table} table differ in length ({sorted(lengths)}): give every column one value per row"
        )
    n = lengths.pop() if lengths else 0
    out = {}
    for name, dtype in TABLES[table]:
        out[name] = _column(data.get(name), dtype, n)
    return pd.DataFrame(out, copy=copy)


def _column(values: object, dtype: str, n: int) -> object:
    if values is None and dtype == CAT and n:  # all "": pd.Categorical([""] * n), without a pass over n strings
        return pd.Categorical.from_codes(np.zeros(n, dtype=np.int8), dtype=_ALL_EMPTY.dtype)
    if values is None:
        values = _absent(dtype, n)
    if dtype == CAT:
        return pd.Categorical(values)
    if dtype == STR:
        return pd.array(values, dtype="str")
    return np.asarray(values, dtype=dtype)


_ALL_EMPTY = pd.Categorical([""])


def _absent(dtype: str, n: int) -> object:
    if dtype == I64:
        return np.full(n, -1, dtype=np.int64)
    if dtype == F64:
        return np.full(n, np.nan)
    if dtype == BOOL:
        return np.zeros(n, dtype=bool)
    return [""] * n
