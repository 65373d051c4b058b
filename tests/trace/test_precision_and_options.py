"""Nanosecond precision of epoch-µs float timestamps; Holistic Trace Analysis's reading as options."""

from __future__ import annotations

import json

import numpy as np

from tests.trace.conftest import CPU, GPU
from workbench.trace import read_trace


def _write(tmp_path, events, **top):
    path = tmp_path / "t.json"
    body = json.dumps({"traceEvents": events, **top})
    path.write_text(body)
    return path


def test_epoch_us_with_ns_digits_keeps_every_ns(tmp_path):
    # written as text: float64 would round these to multiples of 0.25 µs
    text = (
        '{"traceEvents": ['
        '{"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, "ts": 1712195495519689.047, "dur": 10.001},'
        '{"ph": "X", "cat": "cpu_op", "name": "b", "pid": 1, "tid": 1, "ts": 1712195495519690.812, "dur": 0.003},'
        '{"ph": "X", "cat": "cpu_op", "name": "c", "pid": 1, "tid": 1, "ts": 1712195495519695.001, "dur": 1}]}'
    )
    path = tmp_path / "ns.json"
    path.write_text(text)
    trace = read_trace(path)
    assert trace.meta.origins_ns[0] == 1712195495519689047
    ops = trace.cpu_ops.sort_values("ts_us")
    assert ops["ts_us"].tolist() == [0.0, 1.765, 5.954]
    assert ops["dur_us"].tolist() == [10.001, 0.003, 1.0]


def test_real_ns_resolution_trace_keeps_ns(load):
    trace = load(GPU / "v100_ns_resolution.json.gz")
    ts_ns = np.rint(trace.cpu_ops["ts_us"].to_numpy() * 1000)
    assert (ts_ns % 250 != 0).mean() > 0.5  # float64 epoch parsing would leave multiples of 250 ns
    assert trace.meta.origins_ns[0] % 1000 != 0


def test_relative_float_and_integer_timestamps(tmp_path):
    events = [
        {"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, "ts": 1419247333291.708, "dur": 22.51},
        {"ph": "X", "cat": "cpu_op", "name": "b", "pid": 1, "tid": 1, "ts": 1419247333292, "dur": 1},
    ]
    trace = read_trace(_write(tmp_path, events))
    assert trace.cpu_ops["ts_us"].tolist() == [0.0, 0.292]
    assert trace.meta.origins_ns[0] == 1419247333291708


def test_round_ns_reproduces_hta_rounding(load):
    exact = load(GPU / "h100_bert_small.json.gz")
    rounded = load(GPU / "h100_bert_small.json.gz", round_ns=True)
    k = rounded.kernels
    assert (k["ts_us"] == np.round(k["ts_us"])).all()
    assert (k["dur_us"] < 0).any() or (k["dur_us"] == 0).any()  # HTA's short-event artefact
    assert k["dur_us"].sum() < exact.kernels["dur_us"].sum()


def test_drop_last_step_follows_hta(load):
    full = load(CPU / "cpu_mlp_steps_memory.json.gz")
    dropped = load(CPU / "cpu_mlp_steps_memory.json.gz", drop_last_step=True)
    steps = full.annotations[full.annotations["kind"] == "step"]
    last_start = steps["ts_us"].max()
    assert (dropped.cpu_ops["ts_us"] < last_start).all()
    assert len(dropped.cpu_ops) == (full.cpu_ops["ts_us"] < last_start).sum()
    assert dropped.meta.notes and not dropped.meta.warnings


def test_drop_last_step_keeps_gpu_events_of_kept_launches(load):
    full = load(GPU / "v100_resnet50_2021.json.gz")
    dropped = load(GPU / "v100_resnet50_2021.json.gz", hta_compat=True)
    assert 0 < len(dropped.kernels) < len(full.kernels)
    assert set(dropped.kernels["correlation"]) <= set(dropped.runtime["correlation"])
    assert dropped.meta.options == {"round_ns": True, "drop_last_step": True}


def test_one_step_drops_nothing(load):
    a = load(GPU / "h100_bert_small.json.gz")
    b = load(GPU / "h100_bert_small.json.gz", drop_last_step=True)
    assert len(a.kernels) == len(b.kernels) and len(a.cpu_ops) == len(b.cpu_ops)


def test_bare_array_trace(tmp_path):
    path = tmp_path / "bare.json"
    path.write_text(json.dumps([{"ph": "X", "name": "x", "cat": "cpu_op", "pid": 1, "tid": 1, "ts": 5, "dur": 2}]))
    assert len(read_trace(path).cpu_ops) == 1
