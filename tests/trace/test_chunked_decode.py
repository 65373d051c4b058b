"""Decoding in chunks gives the same tables as decoding in one piece, even when "},{" occurs
inside a string or a nested value."""
from __future__ import annotations

import json

import pandas as pd

from workbench.trace import decode, load_trace
from conftest import GPU


def _tables(trace):
    return {name: trace.table(name) for name in ("cpu_ops", "runtime", "kernels", "memory", "annotations", "flows")}


def test_chunked_equals_whole(monkeypatch):
    whole = load_trace(GPU / "h100_bert_small.json.gz")
    monkeypatch.setattr(decode, "CHUNK_BYTES", 20_000)
    chunked = load_trace(GPU / "h100_bert_small.json.gz")
    for name, frame in _tables(whole).items():
        pd.testing.assert_frame_equal(frame, chunked.table(name), check_categorical=False)


def test_cut_inside_a_string_is_not_taken(monkeypatch, tmp_path):
    events = [{"ph": "X", "cat": "cpu_op", "name": "op" + "},{" * (i % 3) + "x" * 50, "pid": 1, "tid": 1,
               "ts": 10 * i, "dur": 5, "args": {"Input Dims": [[1, 2], [3]], "Concrete Inputs": ["}, {"]}}
              for i in range(400)]
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": events}))
    monkeypatch.setattr(decode, "CHUNK_BYTES", 1_000)
    trace = load_trace(path)
    assert len(trace.cpu_ops) == 400
    assert trace.cpu_ops["event_index"].tolist() == list(range(400))
    assert trace.cpu_ops["name"].astype(str).tolist() == [e["name"] for e in events]


def test_wrong_type_in_a_later_chunk_names_the_event(monkeypatch, tmp_path):
    events = [{"ph": "X", "cat": "cpu_op", "name": "op", "pid": 1, "tid": 1, "ts": i, "dur": 1} for i in range(300)]
    events[250]["pid"] = [1]
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": events}))
    monkeypatch.setattr(decode, "CHUNK_BYTES", 1_000)
    try:
        load_trace(path)
    except Exception as exc:  # noqa: BLE001 - the type is asserted below
        assert type(exc).__name__ == "TraceFormatError" and exc.event_index == 250
    else:
        raise AssertionError("a list pid must not load")
