"""One fixture per kind of bad input (tests/data/bad): a TraceFormatError naming the file (and the
event where there is one), or a TraceWarning saying what was done where the trace is usable."""
from __future__ import annotations

import warnings

import pytest

from workbench.errors import TraceFormatError, TraceWarning
from workbench.trace import read_trace
from tests.trace.conftest import BAD


@pytest.mark.parametrize("name, words", [
    ("truncated_gzip.json.gz", "gzip data is truncated"),
    ("truncated_json.json", "not valid JSON, or truncated"),
    ("not_json.json", "not valid JSON"),
    ("empty_file.json", "the file is empty"),
    ("not_a_trace.json", "no 'traceEvents'"),
    ("empty_events.json", "'traceEvents' is empty"),
])
def test_unreadable_files_raise_with_the_file_named(name, words):
    with pytest.raises(TraceFormatError) as info:
        read_trace(BAD / name)
    message = str(info.value)
    assert words in message
    assert name in message and info.value.path.endswith(name)


def test_wrong_field_type_names_the_event():
    with pytest.raises(TraceFormatError) as info:
        read_trace(BAD / "wrong_field_type.json")
    assert info.value.event_index == 5
    assert "event #5" in str(info.value) and "name" in str(info.value)


def test_args_that_are_not_an_object_raise():
    with pytest.raises(TraceFormatError, match="'args' is not an object"):
        read_trace(BAD / "args_not_object.json")


def test_missing_file_and_empty_folder(tmp_path):
    with pytest.raises(TraceFormatError, match="does not exist"):
        read_trace(tmp_path / "nope.json")
    with pytest.raises(TraceFormatError, match="no .json or .json.gz"):
        read_trace(tmp_path)


def _load_warned(path):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        trace = read_trace(path)
    return trace, [str(w.message) for w in caught if issubclass(w.category, TraceWarning)]


def test_missing_fields_drop_those_events_with_a_warning():
    trace, messages = _load_warned(BAD / "missing_fields.json")
    assert any("without a numeric 'ts' were dropped" in m and "event #3" in m for m in messages)
    assert any("without a numeric 'dur'" in m and "event #7" in m for m in messages)
    assert trace.meta.warnings and len(trace.cpu_ops) + len(trace.runtime) + len(trace.kernels) > 20


def test_negative_duration_is_clamped_with_a_warning():
    trace, messages = _load_warned(BAD / "negative_duration.json")
    assert any("negative 'dur'" in m and "event #2" in m for m in messages)
    assert (trace.cpu_ops["dur_us"] >= 0).all() and (trace.runtime["dur_us"] >= 0).all()


def test_absurd_duration_is_dropped_with_a_warning():
    trace, messages = _load_warned(BAD / "absurd_duration.json")
    assert any("over 30 days" in m and "event #4" in m for m in messages)
    assert trace.span_us() < 1e9


def test_two_files_claiming_one_rank_are_both_kept():
    trace, messages = _load_warned(BAD / "duplicate_ranks")
    assert trace.ranks == [0, 1]
    assert any("claims rank 0" in m and "kept as rank 1" in m for m in messages)
    per_rank = trace.cpu_ops.groupby("rank").size()
    assert per_rank[0] == per_rank[1] > 0


def test_files_without_rank_get_distinct_ranks():
    trace, messages = _load_warned(BAD / "no_ranks")
    assert trace.ranks == [0, 1]
    assert sum("no distributedInfo.rank" in m for m in messages) == 2
