"""Every rule in the catalog: one input where it fires and one near miss where it must not.

``CASES`` maps each registered rule to (fires, quiet, metric, threshold): two builders of the facts
the rule reads (small tables in the trace schema, or a ProfileRun-like object for run rules), the
evidence metric that must cross, and the name of the threshold it crosses. Each test runs only
that rule. The quiet inputs sit just on the other side of a named threshold wherever the rule has
one that a small change of the input can cross. A rule added to the registry without a case fails
``test_every_registered_rule_has_a_case``.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, Callable, NamedTuple

import numpy as np
import pandas as pd
import pytest

from tests.hypotheses.attention_float64_builders import attention_facts, float64_facts
from tests.hypotheses.builders import (
    A100,
    calls_with_pauses,
    conv_bn,
    cpu_ops,
    facts,
    faulting_run,
    fill_and_copy,
    gpu,
    gpu_run,
    grown_by_cat,
    half_gpu,
    memory_events,
    mm_run,
    run,
    step_annotations,
    steps,
)
from workbench.capture.compile_diag import CompileDiagnostics, GraphBreak, Recompile
from workbench.hypotheses.catalog import get_rule, list_rules
from workbench.hypotheses.facts import TraceFacts
from workbench.hypotheses.roofline import DEFAULT_CPU_CEILING
from workbench.hypotheses.run_facts import RunFacts
from workbench.measurement import Measurement
from workbench.trace.schema import frame

ELEMENTWISE = "void vectorized_elementwise_kernel<4>"
SGEMM = "volta_sgemm_128x64_nn"
PAGEABLE = "Memcpy HtoD (Pageable -> Device)"


# -- GPU side ---------------------------------------------------------------------------------
def _host_wait(kernel_us: float, gap_us: float, n: int = 20) -> TraceFacts:
    """Kernels separated by gaps, each launched 5 µs before it starts (after the previous one ended)."""
    starts = np.arange(n) * (kernel_us + gap_us)
    k, rt = gpu(starts, [kernel_us] * n, starts - 5, [4] * n)
    return facts(kernels=k, runtime=rt)


def _short_kernels(n_short: int, n: int = 100) -> TraceFacts:
    """``n_short`` 2 µs kernels, then 10 µs ones, 20 µs apart, each launched (8 µs) after the previous ended."""
    starts = np.arange(n) * 20.0
    k, rt = gpu(starts, np.where(np.arange(n) < n_short, 2.0, 10.0), starts - 9, [8] * n)
    return facts(kernels=k, runtime=rt)


def _queue_full(n_blocked: int, n: int = 20) -> TraceFacts:
    """Back-to-back 500 µs kernels queued 300 µs ahead; the first ``n_blocked`` launch calls block 60 µs."""
    starts = np.arange(n) * 500.0
    k, rt = gpu(starts, [500] * n, starts - 300, np.where(np.arange(n) < n_blocked, 60.0, 5.0))
    return facts(kernels=k, runtime=rt)


def _sync(sync_us: float) -> TraceFacts:
    """Ten 90 µs kernels over ~1 ms and one cudaStreamSynchronize of ``sync_us``."""
    starts = np.arange(10) * 100.0
    k, rt = gpu(
        starts,
        [90] * 10,
        starts,
        [5] * 10,
        runtime_extra={
            "rank": [0],
            "tid": ["1"],
            "name": ["cudaStreamSynchronize"],
            "ts_us": [200.0],
            "dur_us": [sync_us],
            "end_us": [200.0 + sync_us],
            "correlation": [999],
        },
    )
    return facts(kernels=k, runtime=rt)


def _copy_after_compute(copy_us: float, name: str = PAGEABLE) -> TraceFacts:
    """1 ms of GEMMs, then a host-to-device copy of ``copy_us`` overlapping nothing."""
    ts = np.append(np.arange(10) * 100.0, 1000.0)
    k, rt = gpu(ts, [100] * 10 + [copy_us], ts - 20, [5] * 11, names=[SGEMM] * 10 + [name])
    cols = {c: k[c].tolist() for c in k.columns}
    k = frame(
        "kernels",
        {
            **cols,
            "kind": ["kernel"] * 10 + ["memcpy"],
            "kernel_type": ["computation"] * 10 + ["memory"],
            "bytes": [-1] * 10 + [int(copy_us * 1e3)],
        },
    )
    return facts(kernels=k, runtime=rt)


def _memory_vs_matrix(memory_pct: float) -> TraceFacts:
    """Three elementwise kernels, then three GEMMs, back to back; ``memory_pct`` of the time elementwise."""
    ts = np.cumsum([0.0] + [memory_pct] * 3 + [100.0 - memory_pct] * 2)
    k, rt = gpu(
        ts, [memory_pct] * 3 + [100.0 - memory_pct] * 3, ts - 20, [5] * 6, names=[ELEMENTWISE] * 3 + [SGEMM] * 3
    )
    return facts(kernels=k, runtime=rt)


def _sgemm_share(sgemm_pct: float) -> TraceFacts:
    """An fp32 GEMM taking ``sgemm_pct`` of the kernel time on an A100 (TF32 tensor cores available)."""
    k, rt = gpu(
        [0.0, 100.0],
        [sgemm_pct, 100.0 - sgemm_pct],
        [-20.0, 80.0],
        [5, 5],
        names=["ampere_sgemm_128x64_nn", ELEMENTWISE],
    )
    return TraceFacts(None, kernels=k, runtime=rt, device_properties=A100)


def _mallocs(call_us: float) -> tuple[pd.DataFrame, pd.DataFrame]:
    """1 ms of kernels and a cudaMalloc + cudaFree of ``call_us`` each inside it."""
    starts = np.arange(10) * 100.0
    return gpu(
        starts,
        [100] * 10,
        starts - 20,
        [5] * 10,
        runtime_extra={
            "rank": [0, 0],
            "tid": ["1", "1"],
            "name": ["cudaMalloc", "cudaFree"],
            "ts_us": [300.0, 600.0],
            "dur_us": [call_us] * 2,
            "end_us": [300.0 + call_us, 600.0 + call_us],
            "correlation": [-1, -1],
        },
    )


def _malloc_loop(call_us: float) -> TraceFacts:
    k, rt = _mallocs(call_us)
    return facts(kernels=k, runtime=rt)


def _reserved(fraction: float) -> TraceFacts:
    """Reserved device memory peaking at ``fraction`` of an 80 GB A100, with allocator driver calls."""
    peak = int(fraction * A100[0]["totalGlobalMem"])
    mem = frame(
        "memory",
        {
            "rank": [0, 0],
            "tid": ["1", "1"],
            "ts_us": [100.0, 500.0],
            "bytes": [1 << 30, 1 << 30],
            "total_allocated": [1 << 30, 2 << 30],
            "total_reserved": [peak // 2, peak],
            "device_type": [1, 1],
        },
    )
    k, rt = _mallocs(40.0)
    return TraceFacts(None, kernels=k, runtime=rt, memory=mem, device_properties=A100)


def _allreduce_from(start_us: float) -> TraceFacts:
    """A 100 µs GEMM from 0 and a 100 µs all-reduce from ``start_us``: overlap = 100 - start_us."""
    k, rt = gpu(
        [0.0, start_us],
        [100, 100],
        [-10.0, start_us - 10],
        [5, 5],
        names=["sgemm", "ncclKernel_AllReduce"],
        ktype=["computation", "communication"],
    )
    return facts(kernels=k, runtime=rt)


def _straggler(span_us: float) -> TraceFacts:
    """Rank 1 computes 190 µs before the all-reduce and rank 0 waits 45 µs more in it than the median;
    rank 0 then computes on to ``span_us``."""
    k0, rt0 = gpu(
        [0.0, 100.0, 200.0],
        [100, 100, span_us - 200],
        [-10.0, 90.0, 190.0],
        [5] * 3,
        names=["sgemm", "ncclKernel_AllReduce", "sgemm"],
        ktype=["computation", "communication", "computation"],
    )
    k1, rt1 = gpu(
        [0.0, 190.0],
        [190, 10],
        [-10.0, 180.0],
        [5, 5],
        names=["sgemm", "ncclKernel_AllReduce"],
        ktype=["computation", "communication"],
        rank=1,
    )
    return facts(kernels=pd.concat([k0, k1], ignore_index=True), runtime=pd.concat([rt0, rt1], ignore_index=True))


def _sequence(repeats: int) -> TraceFacts:
    """48 kernels, 10 µs apart: a 4-kernel sequence ``repeats`` times, then kernels that never repeat."""
    names = ["gemm_a", "bias_add", "relu_k", "softmax_k"] * repeats + [f"kernel_{i}" for i in range(48 - 4 * repeats)]
    starts = np.arange(48) * 20.0
    k, rt = gpu(starts, [10] * 48, starts - 5, [3] * 48, names=names)
    return facts(kernels=k, runtime=rt)


def _late_launches(n_late: int) -> TraceFacts:
    """20 kernels launched just in time, then ``n_late`` queued early that start after 300 µs idle each."""
    normal = np.arange(20) * 110.0
    late = normal[-1] + 110.0 + np.arange(1, n_late + 1) * 400.0
    n = 20 + n_late
    k, rt = gpu(
        np.concatenate([normal, late]), [100] * n, np.concatenate([normal - 20, np.full(n_late, normal[-1])]), [5] * n
    )
    return facts(kernels=k, runtime=rt)


# -- host side --------------------------------------------------------------------------------
def _half_mm(unaligned_pct: float) -> TraceFacts:
    """Two fp16 matmuls; the one with dims not multiples of 8 takes ``unaligned_pct`` of their time."""
    return half_gpu("[[1000,1001],[1001,512]]", n=2, unaligned_us=unaligned_pct, aligned_us=100.0 - unaligned_pct)


def _clones(dur_us: float) -> TraceFacts:
    """Two clones allocating 32 MiB each; writing 32 MiB at the default 10 GB/s roof needs ~3.36 ms."""
    big = 32 << 20
    ops = cpu_ops(["aten::clone", "aten::clone"], [dur_us, dur_us], 10.0)
    return facts(cpu_ops=ops, memory=memory_events([5.0, dur_us + 15.0], [big, big]))


def _loading(loading_pct: float) -> TraceFacts:
    ops = cpu_ops(
        ["enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", "aten::mm"],
        [loading_pct * 10, (100.0 - loading_pct) * 10],
        0.0,
    )
    return facts(cpu_ops=ops)


def _wrapped(outer: str, inner: str, n_inner: int) -> TraceFacts:
    """One ``outer`` op (optimizer step, zero_grad) enclosing ``n_inner`` ``inner`` ops on its thread."""
    n = n_inner + 1
    ts = np.concatenate([[0.0], 1.0 + np.arange(n_inner) * 10.0])
    dur = np.concatenate([[n_inner * 10.0 + 2.0], np.full(n_inner, 8.0)])
    ops = frame(
        "cpu_ops",
        {
            "rank": [0] * n,
            "tid": ["1"] * n,
            "name": [outer] + [inner] * n_inner,
            "ts_us": ts,
            "dur_us": dur,
            "end_us": ts + dur,
            "depth": [0] + [1] * n_inner,
            "parent": [-1] + [0] * n_inner,
        },
    )
    return facts(cpu_ops=ops)


def _memory_vs_matmul(memory_pct: float) -> TraceFacts:
    """add + mul (memory-bound by name) and a 512^3 matmul (compute-bound), back to back over 2 ms."""
    m = memory_pct * 20.0
    ops = cpu_ops(
        ["aten::add", "aten::mul", "aten::mm"], [m / 2, m / 2, 2000.0 - m], 0.0, dims=["", "", "[[512,512],[512,512]]"]
    )
    return facts(cpu_ops=ops)


# -- run level --------------------------------------------------------------------------------
def _timed(sample_ms: float, timer_resolution_ms: float = 1e-3) -> RunFacts:
    timing = Measurement(tuple([sample_ms] * 30), timer_resolution_ms=timer_resolution_ms)
    return RunFacts(SimpleNamespace(timing=timing, cold_ms=None, compile=None, environment={}, trace=None))


def _spread(relative_range: float, n: int = 30) -> RunFacts:
    """Evenly spread samples around 1 ms: their IQR is half their range."""
    return run(np.linspace(1 - relative_range / 2, 1 + relative_range / 2, n))


def _compiled(diag: Any) -> RunFacts:
    """A 1 ms function profiled 20 times under torch.compile with these diagnostics (object or dict)."""
    return run([1.0] * 20, compile=diag)


def _inductor(**fields: list[str]) -> dict:
    """Diagnostics as a dict, with the inductor fields capture does not record yet."""
    return {"compiled_anything": True, **fields}


BREAK = CompileDiagnostics(
    dynamo_loaded=True, graph_count=2, frames_compiled=2, graph_breaks=(GraphBreak("print() call", "f.py:3", 1, ""),)
)
RECOMPILED = CompileDiagnostics(
    dynamo_loaded=True,
    graph_count=2,
    frames_compiled=2,
    recompiles=(Recompile("f", "f.py:1", ("tensor 'x' size mismatch at index 0",)),),
)
CLEAN = CompileDiagnostics(dynamo_loaded=True, graph_count=1, frames_compiled=1)
MEASURED_CPU = {"copy_gbps": 6.5, "matmul_fp32_gflops": 157.0, "threads": 1}
MM_ROOF_MS = 2 * 2048**3 / 157e6  # _mm_run's 2048^3 matmul at 157 GFLOP/s
DATA_PARALLEL = ["torch/nn/parallel/replicate.py(95): replicate", "aten::mm", "BroadcastBackward", "aten::relu"]
ATEN_GATHER = ["aten::mm", "GatherBackward0", "aten::scatter_"]


def _pauses(*args, **kw):
    return calls_with_pauses(*args, **kw)


def _no_work(ops_inside: int):
    """Ten 1.5 ms steps; ``ops_inside`` of 12 ops inside them, the rest outside every step."""
    steps_table = step_annotations([1500.0] * 10)
    ops = cpu_ops(["aten::mm"] * 12, [100.0] * 12, 20.0)
    away = np.where(np.arange(12) < ops_inside, 0.0, np.where(np.arange(12) % 2, 1e5, -1e5))  # before and after
    ops = ops.assign(ts_us=ops["ts_us"] + away, end_us=ops["end_us"] + away)
    return TraceFacts(SimpleNamespace(cpu_ops=ops, annotations=steps_table), ceiling=DEFAULT_CPU_CEILING)


def _grown(**kw):
    return grown_by_cat(**kw)


def _faulting(faults):
    return faulting_run(faults)


class Case(NamedTuple):
    fires: Callable[[], Any]
    quiet: Callable[[], Any]
    metric: str  # the evidence that crosses ...
    threshold: str  # ... this named threshold of the rule


CASES: dict[str, Case] = {
    "materialised_attention": Case(
        lambda: attention_facts(20.0), lambda: attention_facts(4.0), "materialised_attention_pct", "min_share_pct"
    ),
    "float64_compute": Case(
        lambda: float64_facts(30.0), lambda: float64_facts(8.0), "float64_share_pct", "min_share_pct"
    ),
    "device_idle_host_wait": Case(lambda: _host_wait(10, 200), lambda: _host_wait(250, 60), "idle_pct", "min_idle_pct"),
    "kernels_shorter_than_launch": Case(
        lambda: _short_kernels(60), lambda: _short_kernels(45), "short_kernel_fraction", "min_short_fraction"
    ),
    "launch_queue_full": Case(lambda: _queue_full(12), lambda: _queue_full(9), "blocked_launches", "min_outliers"),
    "host_sync_calls": Case(lambda: _sync(400.0), lambda: _sync(45.0), "sync_time_pct", "min_sync_pct"),
    "transfer_share": Case(
        lambda: _copy_after_compute(150.0), lambda: _copy_after_compute(95.0), "exposed_transfer_pct", "min_share_pct"
    ),
    "pageable_memcpy": Case(
        lambda: _copy_after_compute(150.0), lambda: _copy_after_compute(9.0), "pageable_copy_pct", "min_pageable_pct"
    ),
    "memory_bound_kernels": Case(
        lambda: _memory_vs_matrix(45.0), lambda: _memory_vs_matrix(38.0), "memory_bound_share_pct", "min_share_pct"
    ),
    "matrix_kernels_dominate": Case(
        lambda: _memory_vs_matrix(30.0), lambda: _memory_vs_matrix(42.0), "matrix_share_pct", "min_share_pct"
    ),
    "fp32_matmul_without_tf32": Case(
        lambda: _sgemm_share(12.0), lambda: _sgemm_share(9.0), "fp32_gemm_share_pct", "min_share_pct"
    ),
    "half_matmul_unaligned": Case(
        lambda: _half_mm(6.0), lambda: _half_mm(4.0), "unaligned_matmul_share_pct", "min_share_pct"
    ),
    "device_malloc_in_loop": Case(
        lambda: _malloc_loop(40.0), lambda: _malloc_loop(4.5), "malloc_time_pct", "min_time_pct"
    ),
    "large_allocations_repeat": Case(
        lambda: _clones(25_000.0), lambda: _clones(3_700.0), "allocation_excess_pct", "min_time_pct"
    ),
    "memory_near_capacity": Case(
        lambda: _reserved(0.95), lambda: _reserved(0.88), "peak_reserved_fraction", "max_fraction"
    ),
    "exposed_communication": Case(
        lambda: _allreduce_from(55.0), lambda: _allreduce_from(45.0), "comm_overlap_pct", "max_overlap_pct"
    ),
    "straggler_rank": Case(lambda: _straggler(800.0), lambda: _straggler(1000.0), "wait_caused_pct", "min_wait_pct"),
    "data_loading_share": Case(lambda: _loading(12.0), lambda: _loading(9.0), "data_loading_pct", "min_share_pct"),
    "single_tensor_optimizer": Case(
        lambda: _wrapped("Optimizer.step#SGD.step", "aten::add_", 60),
        lambda: _wrapped("Optimizer.step#SGD.step", "aten::add_", 48),
        "optimizer_ops_per_step",
        "min_ops_per_step",
    ),
    "zero_grad_not_none": Case(
        lambda: _wrapped("Optimizer.zero_grad#SGD.zero_grad", "aten::zero_", 12),
        lambda: _wrapped("Optimizer.zero_grad#SGD.zero_grad", "aten::zero_", 9),
        "zero_ops",
        "min_zero_ops",
    ),
    "cpu_dispatch_overhead": Case(
        lambda: facts(cpu_ops=cpu_ops(["aten::add"] * 200, [3.0] * 200, 2.0)),
        lambda: facts(cpu_ops=cpu_ops(["aten::add"] * 19, [3.0] * 19, 2.0)),
        "overhead_ops_per_call",
        "min_ops_per_call",
    ),
    "cpu_host_gaps": Case(
        lambda: facts(cpu_ops=cpu_ops(["aten::mm"] * 10, [100.0] * 10, 55.0)),
        lambda: facts(cpu_ops=cpu_ops(["aten::mm"] * 10, [130.0] * 10, 55.0)),
        "host_gap_pct",
        "min_share_pct",
    ),
    "cpu_memory_bound_ops": Case(
        lambda: _memory_vs_matmul(55.0), lambda: _memory_vs_matmul(48.0), "memory_bound_time_pct", "min_share_pct"
    ),
    "cpu_compute_bound_ops": Case(
        lambda: _memory_vs_matmul(45.0), lambda: _memory_vs_matmul(52.0), "compute_bound_time_pct", "min_share_pct"
    ),
    "trace_records_no_work": Case(lambda: _no_work(0), lambda: _no_work(10), "events_per_step", "min_events_per_step"),
    "gc_pauses": Case(lambda: _pauses(20_000.0), lambda: _pauses(90.0), "gc_time_pct", "min_share_pct"),
    "intermittent_pauses": Case(
        lambda: _pauses(20_000.0, steps=100, every=50, gc_named=False),
        lambda: _pauses(900.0, steps=100, every=50, gc_named=False),
        "paused_time_pct",
        "min_share_pct",
    ),
    "buffer_grown_by_concatenation": Case(
        lambda: _grown(chunks=12), lambda: _grown(chunks=2), "growth_steps_per_call", "min_steps_per_call"
    ),
    "fresh_pages_every_call": Case(
        lambda: _faulting(3000.0), lambda: _faulting(200.0), "page_faults_per_call", "min_faults_per_call"
    ),
    # 190 ms once is 16 % of 100 calls of 10 ms; 90 ms once is 8 %
    "cold_start": Case(
        lambda: run([10.0] * 20, cold=200.0),
        lambda: run([10.0] * 20, cold=100.0),
        "one_time_share_pct",
        "min_one_time_share_pct",
    ),
    "noisy_timing": Case(lambda: _spread(0.22), lambda: _spread(0.18), "relative_iqr", "max_relative_iqr"),
    "too_few_samples": Case(
        lambda: run(np.linspace(1.0, 2.0, 9)), lambda: run(np.linspace(1.0, 2.0, 10)), "n_samples", "min_samples"
    ),
    "timer_resolution": Case(lambda: _timed(0.05), lambda: _timed(0.11), "timer_ticks", "min_ticks"),
    "graph_breaks": Case(lambda: _compiled(BREAK), lambda: _compiled(CLEAN), "graph_break_count", "min_breaks"),
    "recompiles": Case(lambda: _compiled(RECOMPILED), lambda: _compiled(CLEAN), "recompile_count", "min_recompiles"),
    "cudagraph_skipped": Case(
        lambda: _compiled(_inductor(cudagraph_skip_reasons=["skipping cudagraphs due to mutated inputs"])),
        lambda: _compiled(_inductor(cudagraph_skip_reasons=[])),
        "cudagraph_skips",
        "min_skips",
    ),
    "fallback_kernels": Case(
        lambda: _compiled(_inductor(fallback_kernels=["aten::_embedding_bag"])),
        lambda: _compiled(_inductor(fallback_kernels=[])),
        "fallback_kernel_count",
        "min_fallback_ops",
    ),
    "frequent_sequences": Case(lambda: _sequence(12), lambda: _sequence(4), "repeats", "min_repeats"),
    "cpu_fill_then_copy": Case(
        lambda: fill_and_copy("[[1024,1024],[],[],[]]", 4 << 20),
        lambda: fill_and_copy("[[512,1024],[],[],[]]", 4 << 20),  # a fill of another size
        "fill_and_copy_pct",
        "min_pct",
    ),
    "conv_bias_before_batch_norm": Case(
        lambda: facts(cpu_ops=conv_bn(True)), lambda: facts(cpu_ops=conv_bn(False)), "conv_bias_then_bn", "min_pairs"
    ),
    "data_parallel_not_ddp": Case(
        lambda: facts(cpu_ops=cpu_ops(DATA_PARALLEL, [300.0, 100.0, 200.0, 50.0], 10.0)),
        lambda: facts(cpu_ops=cpu_ops(ATEN_GATHER, [300.0, 100.0, 50.0], 10.0)),
        "data_parallel_pct",
        "min_pct",
    ),
    "first_step_outlier": Case(
        lambda: TraceFacts(None, **_step_tables([5000.0, 1000.0, 1010.0, 990.0, 1000.0])),
        lambda: TraceFacts(None, **_step_tables([1900.0, 1000.0, 1010.0, 990.0, 1000.0])),
        "first_over_median_step",
        "min_ratio",
    ),
    "first_profiler_session": Case(
        lambda: gpu_run(""),
        lambda: gpu_run("ran: one short session on a cuda op before the measured one"),
        "first_over_median_step",
        "min_ratio",
    ),
    # against a measured ceiling the margin is measured_margin (0.5): the best this machine reached once
    "faster_than_roofline": Case(
        lambda: mm_run(0.45 * MM_ROOF_MS, MEASURED_CPU),
        lambda: mm_run(0.55 * MM_ROOF_MS, MEASURED_CPU),
        "per_call_over_roof",
        "measured_margin",
    ),
    "launch_delay_outliers": Case(
        lambda: _late_launches(5), lambda: _late_launches(2), "delayed_launches", "min_outliers"
    ),
    # memory footprint (stakes in bytes; time_at_stake_ms is 0)
    "memory_leak_across_steps": Case(
        lambda: _leak(128 << 10), lambda: _leak(48 << 10), "growth_per_step_bytes", "min_growth_bytes"
    ),
    "temporary_at_peak": Case(
        lambda: _temporary(1 << 20), lambda: _temporary(200 << 10), "bytes_at_stake", "min_bytes"
    ),
    "activations_dominate_peak": Case(
        lambda: _activations(3 << 20, 1 << 20),
        lambda: _activations(1 << 20, 3 << 19),
        "activation_share_of_peak",
        "min_share",
    ),
    "allocator_fragmentation": Case(
        lambda: _reserved_over_allocated(4 << 30),
        lambda: _reserved_over_allocated(2662 << 20),
        "reserved_over_allocated",
        "min_ratio",
    ),
}


def _memory(ts, nbytes, addr, device_type=0, reserved=None) -> pd.DataFrame:
    n = len(ts)
    return frame(
        "memory",
        {
            "rank": [0] * n,
            "tid": ["1"] * n,
            "ts_us": np.asarray(ts, float),
            "bytes": nbytes,
            "total_allocated": np.cumsum(nbytes),
            "addr": addr,
            "device_type": [device_type] * n,
            "device_id": [0 if device_type else -1] * n,
            "total_reserved": reserved if reserved is not None else [0] * n,
        },
    )


def _leak(kept: int) -> TraceFacts:
    """Five 100 µs steps, each allocating a temporary (freed) and ``kept`` bytes never freed."""
    ts, nbytes, addr = [], [], []
    for i in range(5):
        t = 100.0 * i
        ts += [t + 10, t + 20, t + 30]
        nbytes += [4096, kept, -4096]
        addr += [1000, 2000 + i, 1000]
    return TraceFacts(
        None,
        memory=_memory(ts, nbytes, addr),
        annotations=step_annotations([100.0] * 5),
        cpu_ops=cpu_ops(["aten::mul"] * 5, [90.0] * 5, 10.0),
    )


def _temporary(size: int) -> TraceFacts:
    """x * 2 then + 1, out of place: the add's output makes the peak and the mul's output dies right after."""
    ops = cpu_ops(["aten::mul", "aten::add"], [10.0, 10.0], 10.0)
    return TraceFacts(
        None, cpu_ops=ops, memory=_memory([5.0, 25.0, 32.0, 50.0], [size, size, -size, -size], [1, 2, 1, 2])
    )


def _activations(act: int, grad: int) -> TraceFacts:
    """A forward op (recorded by autograd) keeps ``act`` bytes until backward, where ``grad`` bytes are made."""
    ops = frame(
        "cpu_ops",
        {
            "rank": [0, 0],
            "tid": ["1", "1"],
            "ts_us": [0.0, 50.0],
            "dur_us": [10.0, 10.0],
            "end_us": [10.0, 60.0],
            "depth": [0, 0],
            "sequence_number": [1, -1],
            "name": ["aten::linear", "autograd::engine::evaluate_function: AddmmBackward0"],
        },
    )
    return TraceFacts(None, cpu_ops=ops, memory=_memory([5.0, 52.0, 55.0], [act, grad, -act], [1, 2, 1]))


def _reserved_over_allocated(reserved: int) -> TraceFacts:
    """2 GiB allocated on a GPU, ``reserved`` bytes reserved at the peak."""
    return TraceFacts(
        None, memory=_memory([1.0, 2.0], [1 << 30, 1 << 30], [1, 2], device_type=1, reserved=[reserved, reserved])
    )


# quiet cases that differ from the firing one in kind (no named threshold to move them across)
NOT_A_THRESHOLD_NEAR_MISS = {
    "cpu_fill_then_copy": "the fill has another size than the copy",
    "conv_bias_before_batch_norm": "the convolution has no bias",
    "data_parallel_not_ddp": "aten's own Gather/Scatter backward, not DataParallel's",
    "first_profiler_session": "a warm-up profiler session was recorded",
    "graph_breaks": "no break (0 against min_breaks=1)",
    "recompiles": "no recompile (0 against min_recompiles=1)",
    "cudagraph_skipped": "no skip reason (0 against min_skips=1)",
    "fallback_kernels": "no fallback op (0 against min_fallback_ops=1)",
}


def _step_tables(durs: list[float]) -> dict[str, pd.DataFrame]:
    ann, ops = steps(durs)
    return {"annotations": ann, "cpu_ops": ops}


def measured_ms(f: Any) -> float:
    """The time a stake is bounded by: the trace's window, or a run's longest measured call."""
    if isinstance(f, RunFacts):
        return max(f.timing.median_ms, float(f.cold_ms or 0.0))
    return f.window_us / 1e3


def crosses(value: float, threshold: float, comparison: str) -> bool:
    if comparison == "<":
        return value < threshold
    return value >= threshold if comparison == ">=" else value > threshold


@pytest.mark.parametrize("name", sorted(CASES))
def test_rule_fires_with_evidence_over_its_threshold(name):
    rule, case = get_rule(name), CASES[name]
    f = case.fires()
    found = rule(f)
    assert found, f"{name} did not fire on its case"
    h = found[0]
    assert (h.rule, h.category) == (name, rule.category)
    ev = {e.metric: e for e in h.evidence}
    assert case.metric in ev, f"{name}: no evidence {case.metric!r}; has {sorted(ev)}"
    e = ev[case.metric]
    assert e.threshold == pytest.approx(rule.thresholds[case.threshold])
    assert crosses(e.value, e.threshold, e.comparison), e.describe()
    if rule.category == "memory_footprint":  # a memory rule stakes bytes, not time
        assert h.time_at_stake_ms == 0 and ev["bytes_at_stake"].value > 0
    else:
        assert 0 < h.time_at_stake_ms <= measured_ms(f) + 1e-9


@pytest.mark.parametrize("name", sorted(CASES))
def test_rule_stays_quiet_on_a_near_miss(name):
    assert get_rule(name)(CASES[name].quiet()) == []


@pytest.mark.parametrize("name", sorted(set(CASES) - set(NOT_A_THRESHOLD_NEAR_MISS)))
def test_quiet_case_is_a_near_miss_of_the_named_threshold(name):
    """Moving the named threshold by a third towards the quiet input makes the rule fire on it."""
    rule, case = get_rule(name), CASES[name]
    limit = rule.thresholds[case.threshold]
    fired = {e.metric: e for e in rule(case.fires())[0].evidence}[case.metric]
    below = fired.comparison == "<"  # the rule fires below the threshold: loosening raises it
    found = rule(case.quiet(), **{case.threshold: limit * (1.5 if below else 2 / 3)})
    assert found and found[0].rule == name


def test_every_registered_rule_has_a_case():
    assert set(CASES) == {r.name for r in list_rules()}
    for name, case in CASES.items():
        assert case.threshold in get_rule(name).thresholds, (name, case.threshold)
    assert set(NOT_A_THRESHOLD_NEAR_MISS) <= set(CASES)
