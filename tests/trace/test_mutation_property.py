"""Property: a mutated real trace either loads or raises TraceFormatError; no other exception."""

from __future__ import annotations

import gzip
import json
import os
import tempfile
import warnings

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.trace.conftest import CPU, GPU
from workbench.errors import TraceFormatError
from workbench.trace import read_trace


def _base_events() -> list[dict]:
    out = []
    for path, count in ((GPU / "h100_bert_small.json.gz", 80), (CPU / "cpu_mlp_steps_memory.json.gz", 30)):
        with gzip.open(path) as fh:
            events = json.load(fh)["traceEvents"]
        wanted = [e for e in events if e.get("cat") != "python_function"]
        out.extend(wanted[:count])
    return out


BASE = _base_events()
FIELDS = ["ph", "cat", "name", "pid", "tid", "ts", "dur", "id", "args", "s", "bp"]
ARG_KEYS = [
    "External id",
    "correlation",
    "stream",
    "device",
    "grid",
    "block",
    "bytes",
    "Bytes",
    "Input Dims",
    "Total Allocated",
    "registers per thread",
    "memory bandwidth (GB/s)",
]
JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False)
    | st.text(max_size=8)
    | st.sampled_from(
        [
            "X",
            "i",
            "s",
            "f",
            "M",
            "kernel",
            "cpu_op",
            "ac2g",
            "cuda_runtime",
            "[memory]",
            "ProfilerStep#3",
            "gpu_memcpy",
        ]
    ),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.sampled_from(ARG_KEYS), children, max_size=3),
    max_leaves=6,
)


@st.composite
def mutated(draw) -> bytes:
    events = [dict(e) for e in BASE]
    for _ in range(draw(st.integers(1, 4))):
        i = draw(st.integers(0, len(events) - 1))
        action = draw(st.sampled_from(["set", "drop", "args", "dup", "del"]))
        if action == "set":
            events[i][draw(st.sampled_from(FIELDS))] = draw(JSON_VALUES)
        elif action == "drop":
            events[i].pop(draw(st.sampled_from(FIELDS)), None)
        elif action == "args":
            args = dict(events[i].get("args") or {}) if isinstance(events[i].get("args"), dict) else {}
            args[draw(st.sampled_from(ARG_KEYS))] = draw(JSON_VALUES)
            events[i]["args"] = args
        elif action == "dup":
            events.append(dict(events[i]))
        else:
            del events[i]
    body = json.dumps(
        {"traceEvents": events, "distributedInfo": draw(JSON_VALUES), "deviceProperties": draw(JSON_VALUES)}
    ).encode()
    if draw(st.integers(0, 9)) == 0:  # sometimes cut or corrupt the bytes too
        cut = draw(st.integers(0, len(body)))
        body = body[:cut] + draw(st.binary(max_size=4))
    return body


_DIR = tempfile.mkdtemp(prefix="wb-trace-prop-")


@pytest.mark.slow
@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(mutated())
def test_mutated_traces_load_or_raise_trace_format_error(body):
    path = os.path.join(_DIR, "mutated.json")
    with open(path, "wb") as fh:
        fh.write(body)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            trace = read_trace(path)
        except TraceFormatError:
            return
    trace.summary()
    assert (trace.cpu_ops["dur_us"] >= 0).all()
