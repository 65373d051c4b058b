"""The derived categorical columns of the tables (launch_name, op_name, kind, api, copy parts) are built from
the distinct names alone (tables.by_code): exactly the categoricals a per-row build gives, categories and
their order included."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import workbench.trace.tables as tables


def _per_row(per_code: np.ndarray, codes: np.ndarray, categories=None) -> pd.Categorical:
    return pd.Categorical(per_code[codes], categories=categories)


@pytest.mark.parametrize("labels", [["b", "a", "", "c"], ["zz", "zz", "a"], ["ö", "Z", "a", "é"], ["only"]])
@pytest.mark.parametrize("kind", ["object", "str"])
def test_by_code_is_the_per_row_categorical(labels, kind):
    per_code = np.array(labels, dtype=object if kind == "object" else str)
    rng = np.random.default_rng(7)
    for codes in (rng.integers(0, len(labels), 500), np.array([len(labels) - 1] * 3), np.zeros(1, dtype=np.int64)):
        expected = _per_row(per_code, codes)
        got = tables.by_code(per_code, codes)
        pd.testing.assert_extension_array_equal(got, expected)


def test_by_code_with_fixed_categories_keeps_them_and_marks_the_rest_missing():
    per_code = np.array(["memory", "computation", "other", "communication"], dtype=object)
    codes = np.array([0, 1, 2, 3, 2, 1, 0])
    fixed = ["computation", "communication", "memory"]
    got = tables.by_code(per_code, codes, fixed)
    assert got.categories.tolist() == fixed and got.dtype == pd.Categorical([], categories=fixed).dtype
    assert got.isna().tolist() == [False, False, True, False, True, False, False]
    assert [None if pd.isna(v) else v for v in got] == [None if v == "other" else v for v in per_code[codes]]
    inside = codes[codes != 2]
    pd.testing.assert_extension_array_equal(tables.by_code(per_code, inside, fixed), _per_row(per_code, inside, fixed))


def test_by_code_of_no_rows():
    per_code = np.array(["a", "b"], dtype=object)
    empty = np.zeros(0, dtype=np.int64)
    pd.testing.assert_extension_array_equal(tables.by_code(per_code, empty), _per_row(per_code, empty))


def _names_at_per_row(names: pd.Series, index: np.ndarray) -> pd.Categorical:
    """The per-row build tables._names_at replaced."""
    values = np.asarray(names.astype(object))
    picked = np.where(index >= 0, values[np.clip(index, 0, max(len(values) - 1, 0))] if len(values) else "", "")
    return pd.Categorical(picked.astype(str))


@pytest.mark.parametrize("case", ["plain", "missing_name", "no_names", "all_absent"])
def test_names_at_is_the_per_row_lookup(case):
    names = pd.Series(pd.Categorical(["aten::mm", "aten::add", "aten::mm", "cudaLaunchKernel", "aten::add"]))
    index = np.array([0, -1, 3, 2, 4, -1, 1])
    if case == "missing_name":
        names = pd.Series(pd.Categorical(["aten::mm", None, "aten::add"]))
        index = np.array([0, 1, 2, -1, 1])
    elif case == "no_names":
        names = pd.Series(pd.Categorical([], categories=pd.Index([], dtype="str")))
        index = np.array([-1, -1])
    elif case == "all_absent":
        index = np.full(4, -1)
    pd.testing.assert_extension_array_equal(tables._names_at(names, index), _names_at_per_row(names, index))


@pytest.mark.parametrize("rows", [0, 1, 70_000])
def test_absent_text_columns_are_the_all_empty_categorical(rows):
    import workbench.trace.schema as trace_schema

    frame = trace_schema.frame("kernels", {"ts_us": np.zeros(rows)})
    for column, dtype in trace_schema.TABLES["kernels"]:
        if dtype == trace_schema.CAT:
            pd.testing.assert_series_equal(frame[column], pd.Series(pd.Categorical([""] * rows), name=column))
