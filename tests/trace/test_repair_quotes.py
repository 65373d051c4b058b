"""A quote in a record_function label: torch's exporter writes it unescaped (invalid JSON); the
trace is read through a mended copy, never lost for a label (issue 12, hostile names)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import workbench as wb
from workbench.errors import TraceFormatError
from workbench.trace.repair import repair_line, repair_unescaped_quotes

BAD = Path(__file__).resolve().parents[1] / "data" / "bad"
LABEL = 'attn "qkv"'


def test_the_fixture_is_what_the_exporter_writes_and_not_json():
    text = (BAD / "unescaped_quotes.json").read_text()
    assert '"name": "attn "qkv"",' in text
    with pytest.raises(ValueError):
        json.loads(text)


def test_a_broken_field_line_is_mended_and_valid_lines_are_left_alone():
    assert repair_line(b'    "name": "attn "qkv"",\n') == b'    "name": "attn \\"qkv\\"",\n'
    assert repair_line(b'    "name": "a "b" c"\n') == b'    "name": "a \\"b\\" c"\n'
    for valid in (
        b'    "name": "aten::mm",\n',
        b'    "name": "say \\"hi\\"",\n',
        b'"a": "x", "b": "y",\n',
        b'      "External id": 1,"Record function id": 0\n',
    ):
        assert repair_line(valid) is None


def test_torch_2_11s_line_of_several_fields_is_mended_at_the_name():
    # torch 2.11's exporter puts ph, cat, name, pid and tid on one line
    line = b'    "ph": "X", "cat": "user_annotation", "name": "attn "qkv"", "pid": 30442, "tid": 30442,\n'
    fixed = b'    "ph": "X", "cat": "user_annotation", "name": "attn \\"qkv\\"", "pid": 30442, "tid": 30442,\n'
    assert repair_line(line) == fixed
    assert (
        repair_line(b'    "ph": "X", "name": "a "b" c", "cat": "cpu_op", "pid": 1,\n')
        == b'    "ph": "X", "name": "a \\"b\\" c", "cat": "cpu_op", "pid": 1,\n'
    )
    assert repair_line(b'    "ph": "X", "cat": "cpu_op", "name": "aten::ones", "pid": 1, "tid": 1,\n') is None


def test_the_exporters_file_loads_with_the_label_and_a_note():
    trace = wb.load_trace(str(BAD / "unescaped_quotes.json"), cache=False)
    assert LABEL in set(trace.annotations["name"].astype(str))
    assert any("unescaped quotes" in note for note in trace.meta.notes)
    assert trace.meta.files[0].endswith("unescaped_quotes.json")


def test_a_file_broken_another_way_keeps_its_error(tmp_path):
    broken = tmp_path / "cut.json"
    broken.write_text((BAD / "unescaped_quotes.json").read_text().replace('"attn "qkv""', '"attn"')[:900])
    assert repair_unescaped_quotes(str(broken), str(tmp_path)) is None
    with pytest.raises(TraceFormatError):
        wb.load_trace(str(broken), cache=False)
    assert [p.name for p in tmp_path.iterdir()] == ["cut.json"]  # no copy left behind


def test_a_profiled_function_with_a_quoted_label_keeps_its_trace():
    torch = pytest.importorskip("torch")

    def attention(x):
        with torch.profiler.record_function(LABEL):
            return (x @ x).relu()

    run = wb.profile(attention, torch.ones(32, 32), warmup=1, repeat=3)
    assert run.trace is not None, run
    names = set(run.trace.annotations["name"].astype(str))
    assert LABEL in names, sorted(names)[:20]
    assert "aten::mm" in set(run.trace.cpu_ops["name"].astype(str))


def test_a_gzipped_export_is_mended_too_and_no_copy_is_left(tmp_path, monkeypatch):
    import gzip
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    packed = tmp_path / "rank0.json.gz"
    packed.write_bytes(gzip.compress((BAD / "unescaped_quotes.json").read_bytes(), mtime=0))
    trace = wb.load_trace(str(packed), cache=False)
    assert LABEL in set(trace.annotations["name"].astype(str))
    assert list((tmp_path / "tmp").iterdir()) == []  # the mended copy is deleted once read
