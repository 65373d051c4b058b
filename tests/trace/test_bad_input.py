"""One fixture per kind of bad input (tests/data/bad): a TraceFormatError naming the file (and the
event where there is one), or a TraceWarning saying what was done where the trace is usable."""

from __future__ import annotations

import warnings

import pytest

from tests.trace.conftest import BAD
from workbench.errors import TraceFormatError, TraceWarning, WorkbenchError
from workbench.trace import read_trace


@pytest.mark.parametrize(
    "name, words",
    [
        ("truncated_gzip.json.gz", "gzip data is truncated"),
        ("truncated_json.json", "not valid JSON, or truncated"),
        ("not_json.json", "not valid JSON"),
        ("empty_file.json", "the file is empty"),
        ("not_a_trace.json", "no 'traceEvents'"),
        ("empty_events.json", "'traceEvents' is empty"),
    ],
)
def test_unreadable_files_raise_with_the_file_named(name, words):
    with pytest.raises(TraceFormatError) as info:
        read_trace(BAD / name)
    message = str(info.value)
    assert words in message
    assert name in message and info.value.path.endswith(name)


def test_one_event_of_the_wrong_type_is_skipped_not_the_file():
    trace, messages = _load_warned(BAD / "wrong_field_type.json")
    assert any("1 event(s) could not be read (first: event #5" in m and "name" in m for m in messages)
    assert 5 not in trace.cpu_ops["event_index"].tolist() and len(trace.cpu_ops) == 39


def test_args_that_are_not_an_object_skip_that_event():
    trace, messages = _load_warned(BAD / "args_not_object.json")
    assert any("event #1: Expected `object`, got `array` - at `$.args`" in m for m in messages)
    assert 1 not in trace.cpu_ops["event_index"].tolist() and len(trace.cpu_ops) == 39


def test_a_file_of_nothing_but_bad_events_raises(tmp_path):
    path = tmp_path / "all_bad.json"
    path.write_text('{"traceEvents": [1, "two", [3]]}')
    with pytest.raises(TraceFormatError, match=r"no event could be read: 3 event\(s\) could not be read"):
        read_trace(path)


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


@pytest.mark.parametrize("name, levels", [("nested_args_1k.json", 1_002), ("nested_args_100k.json", 100_002)])
def test_deeply_nested_args_skip_that_event_without_recursion(name, levels):
    trace, messages = _load_warned(BAD / name)  # RecursionError before: nesting depth is bounded now
    assert any(f"event #3: nested {levels} levels deep (at most 64 are read)" in m for m in messages)
    assert len(trace.cpu_ops) == 39 and 3 not in trace.cpu_ops["event_index"].tolist()


def test_deep_nesting_fails_no_load_even_near_the_recursion_limit():
    import sys

    def nest(depth):  # call read_trace with most of the interpreter's stack already used
        return nest(depth - 1) if depth else _load_warned(BAD / "nested_args_1k.json")

    trace, _ = nest(sys.getrecursionlimit() - 100)
    assert len(trace.cpu_ops) == 39


def test_a_rank_too_large_for_any_integer_type_is_read_as_absent():
    trace, messages = _load_warned(BAD / "rank_2_70.json")  # OverflowError before
    assert trace.ranks == [0]
    assert any("distributedInfo.rank 1180591620717411303424 is not a rank" in m for m in messages)


def test_one_bad_rank_file_leaves_out_that_rank_only():
    trace, messages = _load_warned(BAD / "one_bad_rank")
    assert trace.ranks == [0, 2]
    assert any(
        "rank1.json: rank file left out, it cannot be read" in m and "the other 2 rank file(s) were loaded" in m
        for m in messages
    )
    assert any("rank1.json" in w for w in trace.meta.warnings)


def test_a_folder_of_only_bad_rank_files_raises(tmp_path):
    for i in range(2):
        (tmp_path / f"rank{i}.json").write_text('{"traceEvents": [')
    with pytest.raises(TraceFormatError, match="none of the 2 rank files could be read"):
        read_trace(tmp_path)


def test_ns_timestamps_say_what_the_unit_looks_like():
    with pytest.raises(TraceFormatError) as info:
        read_trace(BAD / "ns_timestamps.json")
    message = str(info.value)
    assert "look like nanoseconds" in message and "Divide 'ts' and 'dur' by 1000" in message
    assert "profile a region" not in message and "ns_timestamps.json" in message


def test_odd_but_loadable_traces_raise_no_numeric_warnings():
    """Analyses and rules of odd traces (one kernel, zero durations, CPU ops only, NaN values):
    no numpy RuntimeWarning reaches the user (checked as errors)."""
    from workbench.api.trace import load_trace
    from workbench.cli.analyze import ANALYSES

    for name in (
        "one_kernel.json",
        "zero_durations.json",
        "cpu_ops_only.json",
        "nan_tokens.json",
        "negative_duration.json",
        "begin_end_pairs.json",
    ):
        with warnings.catch_warnings():
            warnings.simplefilter("error", RuntimeWarning)
            warnings.simplefilter("ignore", TraceWarning)
            trace = load_trace(BAD / name, cache=False)
            for method in ANALYSES.values():
                for semantics in ("workbench", "hta"):
                    try:
                        method(trace, semantics)
                    except WorkbenchError:
                        pass  # "not available" for this trace: said, not a warning
            failed = [n for n in trace.diagnosis().not_judged if "the rule raised" in n.reason]
            assert not failed, (name, failed)


def test_what_is_too_deep_to_read_does_not_depend_on_a_raised_recursion_limit():
    import sys

    old = sys.getrecursionlimit()
    sys.setrecursionlimit(20_000)  # torch._dynamo and others raise it; msgspec counts nesting against it
    try:
        trace, messages = _load_warned(BAD / "nested_args_1k.json")
    finally:
        sys.setrecursionlimit(old)
    assert any("event #3: nested 1002 levels deep" in m for m in messages)
    assert len(trace.cpu_ops) == 39 and sys.getrecursionlimit() == old
