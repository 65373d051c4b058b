"""Operator time placed against the roofline by kind of work, from CPU operator events:
matrix ops with enough arithmetic per byte (compute-bound) vs memory-streaming ops
(elementwise, reductions, normalisation, copies), whose back-to-back chains are fusion candidates."""
from __future__ import annotations

import re

import pandas as pd

from workbench.hypotheses.facts import TraceFacts
from workbench.hypotheses.model import Evidence, Hypothesis
from workbench.hypotheses.registry import rule
from workbench.hypotheses.rules._common import bounded_ms, pct, rows
from workbench.hypotheses.rules.host_ops import MATRIX_OPS, main_thread_ops, windows

BYTES = {"float": 4, "c10::Half": 2, "c10::BFloat16": 2, "double": 8, "int": 4, "long int": 8}


def _shapes(text: str) -> list[list[int]]:
    return [[int(x) for x in re.findall(r"\d+", g)] for g in re.findall(r"\[([^\[\]]*)\]", str(text))]


def matmul_intensity(dims: str, types: str) -> float:
    """FLOPs per byte of a 2-D/batched matmul from its input shapes (0 when unknown)."""
    s = [x for x in _shapes(dims) if len(x) >= 2]
    if len(s) < 2:
        return 0.0
    a, b = s[-2], s[-1]
    if a[-1] != b[-2] and a[-1] == b[-1]:          # linear: weight is [N, K]
        b = b[:-2] + [b[-1], b[-2]]
    m, k, n = a[-2], a[-1], b[-1]
    batch = 1
    for d in a[:-2]:
        batch *= d
    itemsize = next((v for key, v in BYTES.items() if key in str(types)), 4)
    flops = 2.0 * batch * m * k * n
    moved = itemsize * batch * (m * k + k * n + m * n)
    return flops / moved if moved else 0.0


def classify_ops(ops: pd.DataFrame, ridge: float) -> pd.Series:
    kinds = []
    for name, dims, types in ops[["name", "input_dims", "input_types"]].astype(str).itertuples(index=False):
        if MATRIX_OPS.match(name):
            ai = matmul_intensity(dims, types) if re.search(r"mm|matmul|linear", name) else ridge
            kinds.append("compute" if ai >= ridge else "memory")
        else:
            kinds.append("memory")
    return pd.Series(kinds, index=ops.index)


@rule("cpu_memory_bound_ops", category="memory_bound", scope="trace",
      ridge_flop_per_byte=10.0, min_share_pct=50.0, min_op_us=20.0)
def cpu_memory_bound_ops(f: TraceFacts, t):
    """Most operator time is in ops that stream memory with little arithmetic per byte."""
    ops = main_thread_ops(f)
    sized = ops[ops["dur_us"] >= t["min_op_us"]]
    total = sum(b - a for a, b in windows(f, ops))
    kinds = classify_ops(sized, t["ridge_flop_per_byte"])
    mem = sized[kinds == "memory"]
    share = pct(mem["dur_us"].sum(), total)
    if mem.empty or share < t["min_share_pct"]:
        return None
    by = mem.groupby("name", as_index=False, observed=True).agg(n=("dur_us", "size"), dur_us=("dur_us", "sum"))
    calls = max(1, f.n_steps)
    saveable = float(mem["dur_us"].sum()) * (1 - 1 / max(1.0, len(mem) / calls))
    return Hypothesis(
        category="memory_bound", title=f"{share:.0f}% of the time is in memory-streaming ops",
        observed=f"{len(mem)} elementwise/reduction/copy ops of >= {t['min_op_us']:.0f} µs, {mem['dur_us'].sum() / 1e3:.2f} ms",
        mechanism="Each op reads and writes whole tensors doing little arithmetic per byte (below "
                  f"{t['ridge_flop_per_byte']:.0f} FLOP/byte): bandwidth, not arithmetic, sets their time; a chain re-reads the same data.",
        evidence=(Evidence("memory_bound_time_pct", share, "%", t["min_share_pct"], source="cpu_ops (by kind of work)",
                           rows=rows(by, ["name", "n", "dur_us"], by="dur_us")),
                  Evidence("memory_ops_per_call", len(mem) / calls, "ops", source="cpu_ops")),
        time_at_stake_ms=bounded_ms(saveable / calls, total / calls),
        predicted_effect="fusing the chain into one pass (torch.compile, a Triton kernel) leaves about one pass over memory",
        falsifier="compile the function: if time per call does not drop, the ops were not bandwidth-limited or not fusable",
        confounders=("kind of work is read from op names and shapes, not measured counters",),
        confidence="high" if share > 75 else "medium", suggested_variants=("compiled", "triton"), scope="host thread")


@rule("cpu_compute_bound_ops", category="compute_bound", scope="trace", ridge_flop_per_byte=10.0, min_share_pct=50.0)
def cpu_compute_bound_ops(f: TraceFacts, t):
    """Most operator time is in matrix ops with high arithmetic intensity."""
    ops = main_thread_ops(f)
    total = sum(b - a for a, b in windows(f, ops))
    kinds = classify_ops(ops, t["ridge_flop_per_byte"])
    comp = ops[kinds == "compute"]
    share = pct(comp["dur_us"].sum(), total)
    if comp.empty or share < t["min_share_pct"]:
        return None
    by = comp.groupby(["name", "input_dims"], as_index=False, observed=True).agg(n=("dur_us", "size"), dur_us=("dur_us", "sum"))
    calls = max(1, f.n_steps)
    return Hypothesis(
        category="compute_bound", title=f"{share:.0f}% of the time is in arithmetic-heavy matrix ops",
        observed=f"{len(comp)} matrix ops above {t['ridge_flop_per_byte']:.0f} FLOP/byte, {comp['dur_us'].sum() / 1e3:.2f} ms",
        mechanism="These ops do many FLOPs per byte moved; the arithmetic units, not memory or dispatch, set their time.",
        evidence=(Evidence("compute_bound_time_pct", share, "%", t["min_share_pct"], source="cpu_ops (input shapes)",
                           rows=rows(by, ["name", "input_dims", "n", "dur_us"], by="dur_us")),),
        time_at_stake_ms=bounded_ms(comp["dur_us"].sum() / 2 / calls, total / calls),
        predicted_effect="lower precision (bf16 autocast, TF32 on GPU) or less arithmetic is the only lever; fusion will not help",
        falsifier="run under bf16 autocast: if matmul time does not fall, they were not compute-limited",
        confounders=("the intensity is analytic, not measured",), confidence="medium",
        suggested_variants=("compiled",), scope="host thread")
