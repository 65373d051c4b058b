"""Decoding in chunks gives the same tables as decoding in one piece, even when "},{" occurs
inside a string or a nested value."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from tests.trace.conftest import GPU
from workbench.errors import TraceWarning
from workbench.trace import decode, read_trace, stream


def _tables(trace):
    return {name: trace.table(name) for name in ("cpu_ops", "runtime", "kernels", "memory", "annotations", "flows")}


def test_chunked_equals_whole(monkeypatch):
    whole = read_trace(GPU / "h100_bert_small.json.gz")
    monkeypatch.setattr(decode, "CHUNK_BYTES", 20_000)
    monkeypatch.setattr(stream, "BLOCK_BYTES", 4_096)
    chunked = read_trace(GPU / "h100_bert_small.json.gz")
    for name, frame in _tables(whole).items():
        pd.testing.assert_frame_equal(frame, chunked.table(name), check_categorical=False)


def test_cut_inside_a_string_is_not_taken(monkeypatch, tmp_path):
    events = [
        {
            "ph": "X",
            "cat": "cpu_op",
            "name": "op" + "},{" * (i % 3) + "x" * 50,
            "pid": 1,
            "tid": 1,
            "ts": 10 * i,
            "dur": 5,
            "args": {"Input Dims": [[1, 2], [3]], "Concrete Inputs": ["}, {"]},
        }
        for i in range(400)
    ]
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": events}))
    monkeypatch.setattr(decode, "CHUNK_BYTES", 1_000)
    monkeypatch.setattr(stream, "BLOCK_BYTES", 300)
    trace = read_trace(path)
    assert len(trace.cpu_ops) == 400
    assert trace.cpu_ops["event_index"].tolist() == list(range(400))
    assert trace.cpu_ops["name"].astype(str).tolist() == [e["name"] for e in events]


def test_wrong_type_in_a_later_chunk_skips_that_event_only(monkeypatch, tmp_path):
    events = [{"ph": "X", "cat": "cpu_op", "name": "op", "pid": 1, "tid": 1, "ts": i, "dur": 1} for i in range(300)]
    events[250]["pid"] = [1]
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": events}))
    monkeypatch.setattr(decode, "CHUNK_BYTES", 1_000)
    monkeypatch.setattr(stream, "BLOCK_BYTES", 300)
    with pytest.warns(TraceWarning, match=r"1 event\(s\) could not be read \(first: event #250"):
        trace = read_trace(path)
    assert len(trace.cpu_ops) == 299 and 250 not in trace.cpu_ops["event_index"].tolist()
    assert trace.cpu_ops["event_index"].tolist() == [i for i in range(300) if i != 250]


def test_pieces_are_many_and_the_header_after_the_events_is_read(monkeypatch, tmp_path):
    events = [{"ph": "X", "cat": "cpu_op", "name": f"op{i}", "pid": 1, "tid": 1, "ts": i, "dur": 1} for i in range(500)]
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": events, "baseTimeNanoseconds": 1700000000000000000}))
    monkeypatch.setattr(decode, "CHUNK_BYTES", 2_000)
    monkeypatch.setattr(stream, "BLOCK_BYTES", 512)
    header, chunks = decode.decode_file(str(path))
    sizes = [len(c.events) for c in chunks]
    assert len(sizes) > 10 and sum(sizes) == 500
    assert header.baseTimeNanoseconds == 1700000000000000000 and header.schemaVersion == 1
    assert read_trace(path).meta.base_time_ns == {0: 1700000000000000000}


def test_gzip_streams_in_blocks_like_the_plain_file(monkeypatch, tmp_path):
    import gzip

    events = [{"ph": "X", "cat": "cpu_op", "name": "op", "pid": 1, "tid": 1, "ts": i, "dur": 1} for i in range(300)]
    text = json.dumps({"traceEvents": events}).encode()
    (tmp_path / "a.json.gz").write_bytes(gzip.compress(text[: len(text) // 2]) + gzip.compress(text[len(text) // 2 :]))
    monkeypatch.setattr(stream, "BLOCK_BYTES", 256)
    assert b"".join(stream.blocks(str(tmp_path / "a.json.gz"))) == text  # two gzip members
    monkeypatch.setattr(decode, "CHUNK_BYTES", 1_500)
    assert read_trace(tmp_path / "a.json.gz").cpu_ops["ts_us"].tolist() == [float(i) for i in range(300)]


def test_no_piece_holds_much_more_than_a_chunk(monkeypatch):
    """The reader streams: every decoded piece is about CHUNK_BYTES, never the whole file."""
    monkeypatch.setattr(decode, "CHUNK_BYTES", 20_000)
    monkeypatch.setattr(stream, "BLOCK_BYTES", 4_096)
    header, chunks = decode.decode_file(str(GPU / "h100_bert_small.json.gz"))
    sizes, count = [], 0
    for chunk in chunks:
        sizes.append(len(chunk.text))
        count += len(chunk.events)
    total = sum(len(b) for b in stream.blocks(str(GPU / "h100_bert_small.json.gz")))
    assert len(sizes) > 20 and total > 20 * 20_000
    assert max(sizes[:-1]) < 20_000 + 2 * 4_096 + 10_000  # a chunk, a block or two, one event
    import gzip

    with gzip.open(GPU / "h100_bert_small.json.gz") as fh:
        assert count == len(json.load(fh)["traceEvents"])


def test_fast_and_generic_decoders_give_the_same_tables(monkeypatch):
    for name in ("h100_bert_small.json.gz", "v100_resnet50_2021.json.gz"):
        fast = read_trace(GPU / name)
        monkeypatch.setattr(decode._FastState, "enabled", False)
        generic = read_trace(GPU / name)
        monkeypatch.undo()
        for table, frame in _tables(fast).items():
            pd.testing.assert_frame_equal(frame, generic.table(table), check_categorical=False)
        assert fast.meta.thread_names == generic.meta.thread_names


def test_an_unknown_category_falls_back_to_the_generic_decoder(monkeypatch, tmp_path):
    events = [
        {
            "ph": "X",
            "cat": "cpu_op" if i % 50 else "my_tool",
            "name": f"op{i % 7}",
            "pid": 1,
            "tid": 1,
            "ts": 10 * i,
            "dur": 5,
            "args": {"External id": i},
        }
        for i in range(600)
    ]
    events.append({"ph": "X", "name": "no category", "pid": 1, "tid": 1, "ts": 1, "dur": 1})
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": events}))
    monkeypatch.setattr(decode, "CHUNK_BYTES", 3_000)
    monkeypatch.setattr(stream, "BLOCK_BYTES", 1_000)
    with pytest.warns(
        TraceWarning,
        match=r"13 event\(s\) of a kind no table reads were skipped \(12 with cat 'my_tool' ph 'X', 1 with cat '' ph 'X'\)",
    ):
        trace = read_trace(path)
    assert len(trace.cpu_ops) == 588  # the "my_tool" and uncategorised events are not ops
    assert sorted(trace.cpu_ops["external_id"].tolist()) == [i for i in range(600) if i % 50]


def test_a_string_that_is_not_utf8_is_a_trace_format_error(monkeypatch, tmp_path):
    from workbench.errors import TraceFormatError

    events = [{"ph": "X", "cat": "cpu_op", "name": f"op{i}", "pid": 1, "tid": 1, "ts": i, "dur": 1} for i in range(300)]
    text = json.dumps({"traceEvents": events}).encode()
    monkeypatch.setattr(decode, "CHUNK_BYTES", 2_000)
    monkeypatch.setattr(stream, "BLOCK_BYTES", 512)
    for where in (b'"op5"', b'"op299"'):  # in a middle piece, in the last one
        path = tmp_path / "t.json"
        path.write_bytes(text.replace(where, b'"op\x80"'))
        try:
            read_trace(path)
        except TraceFormatError as exc:
            assert "UTF-8" in str(exc) or "not valid JSON" in str(exc)
        else:
            raise AssertionError("invalid UTF-8 must not load")
