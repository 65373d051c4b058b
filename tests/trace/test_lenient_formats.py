"""What Python's json, gzip and Holistic Trace Analysis accept is accepted (NaN/Infinity tokens, a UTF-8
byte-order mark, UTF-16, gzip zero padding); B/E events are paired into spans; events of a kind no
table reads are counted in a warning, never dropped silently."""

from __future__ import annotations

import gzip
import json
import warnings

import numpy as np
import pandas as pd
import pytest

from tests.trace.conftest import BAD
from workbench.errors import TraceWarning
from workbench.trace import read_trace


def _load(path):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        trace = read_trace(path)
    return trace, [str(w.message) for w in caught if issubclass(w.category, TraceWarning)]


@pytest.mark.parametrize("name", ["utf8_bom.json", "utf16.json", "gzip_zero_padding.json.gz"])
def test_encodings_and_padding_python_accepts_load_the_same_tables(name, tmp_path):
    data = (BAD / name).read_bytes()
    assert json.loads(gzip.decompress(data) if name.endswith(".gz") else data)  # Python's json and gzip read it
    plain_path = tmp_path / "plain.json"
    plain_path.write_bytes((BAD / "utf8_bom.json").read_bytes()[3:])  # the same trace, plain UTF-8
    trace, messages = _load(BAD / name)
    plain, _ = _load(plain_path)
    assert not messages
    for table in ("cpu_ops", "runtime", "kernels", "annotations"):
        pd.testing.assert_frame_equal(getattr(trace, table), getattr(plain, table))


def test_utf16_without_a_byte_order_mark(tmp_path):
    text = (BAD / "utf8_bom.json").read_bytes()[3:].decode()
    for encoding in ("utf-16-le", "utf-16-be"):
        path = tmp_path / f"{encoding}.json"
        path.write_bytes(text.encode(encoding))
        assert len(read_trace(path).cpu_ops) == 40


def test_nan_and_infinity_tokens_are_read_as_absent():
    text = (BAD / "nan_tokens.json").read_text()
    assert "NaN" in text and "Infinity" in text and json.loads(text)
    trace, messages = _load(BAD / "nan_tokens.json")
    assert any("2 NaN/Infinity value(s) (not standard JSON) were read as absent" in m for m in messages)
    assert any("without a numeric 'dur' were dropped (first: event #6)" in m for m in messages)  # dur: Infinity
    row = trace.cpu_ops[trace.cpu_ops["event_index"] == 2]
    assert row["external_id"].tolist() == [-1]  # External id: NaN


def test_nan_inside_a_string_is_left_alone(tmp_path):
    events = [
        {"ph": "X", "cat": "cpu_op", "name": "NaN Infinity op", "pid": 1, "tid": 1, "ts": 1, "dur": 2},
        {"ph": "X", "cat": "cpu_op", "name": "b", "pid": 1, "tid": 1, "ts": 4, "dur": float("nan")},
    ]
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": events}))
    trace, _ = _load(path)
    assert trace.cpu_ops["name"].astype(str).tolist() == ["NaN Infinity op"]


def test_begin_end_pairs_become_spans():
    trace, messages = _load(BAD / "begin_end_pairs.json")
    ops = trace.cpu_ops.set_index(trace.cpu_ops["name"].astype(str))
    outer, inner = ops.loc["outer_BE"], ops.loc["inner_BE"]
    assert outer["dur_us"] == 10.5 and inner["dur_us"] == 3.0
    assert inner["ts_us"] - outer["ts_us"] == 2.0
    assert trace.cpu_ops["name"].iloc[inner["parent"]] == "outer_BE" and inner["depth"] == outer["depth"] + 1
    assert outer["external_id"] == 9001
    assert "never_ends" not in ops.index
    assert any("1 event(s) were 'B' event(s) without a matching 'E' and were skipped" in m for m in messages)


def test_an_end_without_a_begin_is_counted(tmp_path):
    events = [
        {"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, "ts": 1, "dur": 2},
        {"ph": "E", "pid": 1, "tid": 1, "ts": 5},
    ]
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": events}))
    _, messages = _load(path)
    assert any("'E' event(s) without an open 'B' on their thread" in m and "event #1" in m for m in messages)


def test_events_of_unknown_categories_are_counted_and_named():
    _, messages = _load(BAD / "begin_end_pairs.json")
    assert any(
        "3 event(s) of a kind no table reads were skipped (2 with cat 'my_tool' ph 'X', "
        "1 with cat 'counters' ph 'C')" in m
        for m in messages
    )


def test_real_traces_warn_about_no_unknown_category(load):
    from tests.trace.conftest import GPU

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        read_trace(GPU / "h100_bert_small.json.gz")
    assert not [w for w in caught if "no table reads" in str(w.message)]


def test_begin_end_pairs_split_across_chunks(monkeypatch, tmp_path):
    from workbench.trace import decode, stream

    events = []
    for i in range(100):
        events += [
            {"ph": "B", "cat": "cpu_op", "name": f"op{i}", "pid": 1, "tid": 1, "ts": 10 * i},
            {"ph": "E", "pid": 1, "tid": 1, "ts": 10 * i + 7},
        ]
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": events}))
    monkeypatch.setattr(decode, "CHUNK_BYTES", 500)
    monkeypatch.setattr(stream, "BLOCK_BYTES", 200)
    trace, messages = _load(path)
    assert not messages
    assert trace.cpu_ops["name"].astype(str).tolist() == [f"op{i}" for i in range(100)]
    assert np.allclose(trace.cpu_ops["dur_us"], 7.0)
    assert trace.cpu_ops["event_index"].tolist() == list(range(0, 200, 2))
