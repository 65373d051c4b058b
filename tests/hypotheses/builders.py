"""Builders of the facts the rule tests feed to one rule: small tables in the trace schema
(``workbench.trace.schema.frame``), and ProfileRun-like objects for run rules. Shared by the rule tests
(test_rules_fire, test_structure_step_precision_rules, test_every_rule)."""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import numpy as np
import pandas as pd

from workbench.hypotheses import get_rule
from workbench.hypotheses.facts import TraceFacts
from workbench.hypotheses.run_facts import RunFacts
from workbench.measurement import Measurement
from workbench.trace.schema import frame

A100 = [{"name": "NVIDIA A100-SXM4-80GB", "computeMajor": 8, "totalGlobalMem": 85899345920}]


def fires(rule: str, f: Any, **kw: float) -> list:
    """The hypotheses one rule finds in the facts ``f`` (thresholds overridden by ``kw``)."""
    return get_rule(rule)(f, **kw)


def facts(**tables: Any) -> TraceFacts:
    return TraceFacts(None, **tables)


def gpu(
    kernel_ts,
    kernel_dur,
    launch_ts,
    launch_dur,
    names="void elementwise_kernel",
    kind="kernel",
    ktype="computation",
    rank=0,
    runtime_extra=None,
):
    """(kernels, runtime): one kernel per launch, linked by correlation."""
    n = len(kernel_ts)
    names = names if isinstance(names, list) else [names] * n
    ktype = ktype if isinstance(ktype, list) else [ktype] * n
    ts, dur = np.asarray(kernel_ts, float), np.asarray(kernel_dur, float)
    k = frame(
        "kernels",
        {
            "rank": [rank] * n,
            "stream": [7] * n,
            "name": names,
            "kind": [kind] * n,
            "kernel_type": ktype,
            "ts_us": ts,
            "dur_us": dur,
            "end_us": ts + dur,
            "correlation": list(range(n)),
        },
    )
    lt, ld = np.asarray(launch_ts, float), np.asarray(launch_dur, float)
    rt = {
        "rank": [rank] * n,
        "tid": ["1"] * n,
        "name": ["cudaLaunchKernel"] * n,
        "ts_us": lt,
        "dur_us": ld,
        "end_us": lt + ld,
        "correlation": list(range(n)),
    }
    for key, vals in (runtime_extra or {}).items():
        rt[key] = list(rt[key]) + list(vals)
    return k, frame("runtime", rt)


def cpu_ops(names, durs, gap_us, dims=None):
    """Top-level CPU ops one after another, ``gap_us`` apart."""
    ts = np.cumsum([0.0] + [d + gap_us for d in durs[:-1]])
    n = len(names)
    return frame(
        "cpu_ops",
        {
            "rank": [0] * n,
            "tid": ["1"] * n,
            "name": names,
            "ts_us": ts,
            "dur_us": durs,
            "end_us": ts + np.asarray(durs, float),
            "depth": [0] * n,
            "input_dims": dims or [""] * n,
            "input_types": ['["float","float"]'] * n,
        },
    )


def run(samples, cold=None, compile=None):
    """The facts of a run with these timing samples (ms), no trace."""
    return RunFacts(
        SimpleNamespace(timing=Measurement(tuple(samples)), cold_ms=cold, compile=compile, environment={}, trace=None)
    )


def memory_events(ts, nbytes):
    """Allocator events at ``ts`` of ``nbytes`` each."""
    n = len(ts)
    return frame(
        "memory",
        {
            "rank": [0] * n,
            "tid": ["1"] * n,
            "ts_us": np.asarray(ts, float),
            "bytes": nbytes,
            "total_allocated": np.cumsum(nbytes),
            "total_reserved": [0] * n,
            "device_type": [0] * n,
        },
    )


def fill_and_copy(fill_dims: str, copy_bytes: int, fill_launches: bool = False):
    """A CPU fill (aten::normal_) then its host-to-device copy."""
    ops = frame(
        "cpu_ops",
        {
            "rank": [0, 0, 0],
            "tid": ["1"] * 3,
            "name": ["aten::normal_", "aten::to", "aten::copy_"],
            "ts_us": [0.0, 2000.0, 2010.0],
            "dur_us": [1500.0, 900.0, 880.0],
            "end_us": [1500.0, 2900.0, 2890.0],
            "depth": [0, 0, 1],
            "parent": [-1, -1, 1],
            "input_dims": [fill_dims, "", "[[1024,1024],[1024,1024]]"],
            "input_types": ['["float","Scalar","Scalar",""]', "", '["float","float"]'],
        },
    )
    k = frame(
        "kernels",
        {
            "rank": [0],
            "stream": [7],
            "name": ["Memcpy HtoD (Pageable -> Device)"],
            "kind": ["memcpy"],
            "kernel_type": ["memory"],
            "ts_us": [2100.0],
            "dur_us": [700.0],
            "end_us": [2800.0],
            "correlation": [1],
            "bytes": [copy_bytes],
            "op_index": [2],
        },
    )
    rt = frame(
        "runtime",
        {
            "rank": [0] * 2,
            "tid": ["1"] * 2,
            "name": ["cudaMemcpyAsync", "cudaLaunchKernel"],
            "ts_us": [2020.0, 100.0],
            "dur_us": [850.0, 5.0],
            "end_us": [2870.0, 105.0],
            "correlation": [1, 2],
            "op_index": [2, 0 if fill_launches else -1],
        },
    )
    return TraceFacts(None, cpu_ops=ops, kernels=k, runtime=rt)


def conv_bn(bias: bool, bn_channels: int = 64):
    """CPU ops of a conv2d (with or without bias) followed by a batch norm."""
    conv_dims = f"[[8,3,32,32],[64,3,3,3],{'[64]' if bias else '[]'},[],[],[],[]]"
    return frame(
        "cpu_ops",
        {
            "rank": [0] * 3,
            "tid": ["1"] * 3,
            "name": ["aten::conv2d", "aten::convolution", "aten::batch_norm"],
            "ts_us": [0.0, 1.0, 4100.0],
            "dur_us": [4000.0, 3990.0, 100.0],
            "end_us": [4000.0, 3991.0, 4200.0],
            "depth": [0, 1, 0],
            "parent": [-1, 0, -1],
            "input_dims": [conv_dims, conv_dims, f"[[8,{bn_channels},32,32],[64],[64],[64],[64],[],[],[],[]]"],
            "input_types": ['["float","float","float"]'] * 3,
        },
    )


def steps(durs):
    """(annotations, cpu_ops): ProfilerStep# annotations of these durations, each mostly one op."""
    ts = np.cumsum([0.0] + list(durs[:-1]))
    n = len(durs)
    ann = frame(
        "annotations",
        {
            "rank": [0] * n,
            "tid": ["1"] * n,
            "name": [f"ProfilerStep#{i}" for i in range(n)],
            "kind": ["step"] * n,
            "ts_us": ts,
            "dur_us": durs,
            "end_us": ts + np.asarray(durs),
        },
    )
    ops = cpu_ops(["aten::add"] * n, [d * 0.9 for d in durs], 0.1 * min(durs))
    return ann, ops


def gpu_run(warmup_record, first_step_us=5000.0):
    """The facts of a GPU run of four steps (the first ``first_step_us``) and its profiler warm-up record."""
    durs = [first_step_us, 1000.0, 1000.0, 1000.0]
    ts = np.array([0.0, first_step_us, first_step_us + 1000, first_step_us + 2000])
    k, rt = gpu(ts + 10, [900] * 4, ts + 2, [5] * 4)
    ann = frame(
        "annotations",
        {
            "rank": [0] * 4,
            "tid": ["1"] * 4,
            "name": [f"ProfilerStep#{i}" for i in range(4)],
            "kind": ["step"] * 4,
            "ts_us": ts,
            "dur_us": durs,
            "end_us": ts + np.asarray(durs),
        },
    )
    trace = SimpleNamespace(
        kernels=k,
        runtime=rt,
        annotations=ann,
        cpu_ops=frame("cpu_ops", {}),
        memory=frame("memory", {}),
        device_properties=A100,
        n_calls=4,
    )
    return RunFacts(
        SimpleNamespace(
            timing=Measurement(tuple([1.0] * 20)),
            cold_ms=2.0,
            compile=None,
            environment={},
            trace=trace,
            profiler_warmup=warmup_record,
        )
    )


def mm_run(median_ms, ceiling):
    """The facts of a run of one 2048x2048 aten::mm (17.2 GFLOP) with this median and CPU ceiling."""
    ops = cpu_ops(["aten::mm"], [1000.0], 0.0, dims=["[[2048,2048],[2048,2048]]"])
    trace = SimpleNamespace(
        kernels=frame("kernels", {}),
        runtime=frame("runtime", {}),
        cpu_ops=ops,
        annotations=frame("annotations", {}),
        memory=frame("memory", {}),
        n_calls=1,
    )
    return RunFacts(
        SimpleNamespace(
            timing=Measurement(tuple([median_ms] * 20)),
            cold_ms=median_ms,
            compile=None,
            environment={"cpu_ceiling": ceiling} if ceiling else {},
            trace=trace,
        )
    )


def half_gpu(
    dims: str,
    kernel: "str | list[str]" = "sm80_xmma_gemm_f16f16_f16f32_f32_tn_n_tilesize128x128x32",
    n: int = 4,
    unaligned_us: float = 90.0,
    aligned_us: float = 90.0,
    types: str = '["c10::Half","c10::Half"]',
) -> TraceFacts:
    """``n`` aten::mm ops with ``dims`` (the first) and aligned 1024x1024x512 (the rest), each launching one
    ``kernel`` (linked through ``op_index``); the first op's kernel runs ``unaligned_us``."""
    ts = np.arange(n) * 100.0
    dur = np.array([unaligned_us] + [aligned_us] * (n - 1))
    ops = frame(
        "cpu_ops",
        {
            "rank": [0] * n,
            "tid": ["1"] * n,
            "name": ["aten::mm"] * n,
            "ts_us": ts,
            "dur_us": dur + 5,
            "end_us": ts + dur + 5,
            "depth": [0] * n,
            "parent": [-1] * n,
            "input_dims": [dims] + ["[[1024,1024],[1024,512]]"] * (n - 1),
            "input_types": [types] * n,
        },
    )
    k, rt = gpu(ts + 5, dur, ts + 1, [3] * n, names=kernel)
    k = k.assign(op_index=np.arange(n))
    return TraceFacts(None, cpu_ops=ops, kernels=k, runtime=rt, device_properties=A100)


def step_annotations(durations_us):
    ts = np.cumsum([0.0] + list(durations_us[:-1]))
    n = len(durations_us)
    return frame(
        "annotations",
        {
            "rank": [0] * n,
            "tid": ["1"] * n,
            "name": [f"ProfilerStep#{i}" for i in range(n)],
            "kind": ["step"] * n,
            "step": list(range(n)),
            "ts_us": ts,
            "dur_us": np.asarray(durations_us, float),
            "end_us": ts + np.asarray(durations_us, float),
        },
    )


def calls_with_pauses(pause_us: float, every: int = 5, steps: int = 20, gc_named: bool = True, op_us: float = 200.0):
    """One 200 µs op per call; every ``every``-th call (not the first) a pause of ``pause_us`` after the op,
    with gc.collect() in the Python stack over it when ``gc_named``."""
    durs, op_ts, op_dur, py = [], [], [], []
    t = 0.0
    for i in range(steps):
        pause = pause_us if i % every == every - 1 else 0.0
        d = op_us + 10.0 + pause
        op_ts.append(t + 5.0)
        op_dur.append(op_us)
        if pause and gc_named:
            py.append((t + op_us + 8.0, pause))
        durs.append(d)
        t += d
    ops = frame(
        "cpu_ops",
        {
            "rank": [0] * steps,
            "tid": ["1"] * steps,
            "name": ["aten::mm"] * steps,
            "ts_us": op_ts,
            "dur_us": op_dur,
            "end_us": np.add(op_ts, op_dur),
            "depth": [0] * steps,
            "input_dims": [""] * steps,
            "input_types": ['["float","float"]'] * steps,
        },
    )
    python = pd.DataFrame(
        {
            "rank": [0] * len(py),
            "tid": ["1"] * len(py),
            "name": ["<built-in function collect>"] * len(py),
            "ts_us": [a for a, _ in py],
            "dur_us": [b for _, b in py],
            "end_us": [a + b for a, b in py],
        }
    )
    trace = SimpleNamespace(cpu_ops=ops, annotations=step_annotations(durs), python_calls=python)
    return TraceFacts(trace)


def grown_by_cat(chunks: int = 12, chunk: int = 16_384, calls: int = 3, cat_us: float = 400.0):
    names, dims = [], []
    for _ in range(calls):
        size = 0
        for _ in range(chunks):
            names.append("aten::cat")
            dims.append(f"[[[{size}],[{chunk}]],[]]")
            size += chunk
    n = len(names)
    ops = cpu_ops(names, [cat_us] * n, 2.0, dims=dims)
    ops = ops.assign(input_types=['["TensorList","Scalar"]'] * n)
    per = chunks * (cat_us + 2.0)
    steps = step_annotations([per] * calls)
    steps = steps.assign(ts_us=np.arange(calls) * per, end_us=np.arange(calls) * per + per)
    return facts(cpu_ops=ops, annotations=steps)


@dataclass(frozen=True)
class HealthCheckStub:
    name: str
    level: str
    value: float | None
    threshold: float | None = 256.0


class HealthStub:
    def __init__(self, *checks):
        self.checks = checks

    def check(self, name):
        return next((c for c in self.checks if c.name == name), None)


def faulting_run(faults: float | None, trace=None):
    health = (
        HealthStub(HealthCheckStub("fresh_pages", "warn" if (faults or 0) >= 256 else "ok", faults))
        if faults is not None
        else HealthStub()
    )
    return RunFacts(
        SimpleNamespace(
            timing=Measurement((5.0,) * 20), cold_ms=5.5, compile=None, environment={}, trace=trace, health=health
        )
    )
