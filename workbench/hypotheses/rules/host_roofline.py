"""Operator time placed against the roofline from analytic work (``workbench.hypotheses.roofline``, placing
through ``workbench.analysis.roofline``: memory / compute only away from the ridge; above the roof flagged):
memory-streaming ops, whose back-to-back chains are fusion candidates, vs arithmetic-heavy ops
near the compute roof. CPU-only traces (on a GPU trace the kernel rules judge this)."""
from __future__ import annotations

import pandas as pd

from workbench.analysis.roofline import ROOF_TOLERANCE
from workbench.hypotheses.facts import TraceFacts
from workbench.hypotheses.hypothesis import Evidence, Hypothesis
from workbench.hypotheses.registry import rule
from workbench.hypotheses.rules._common import bounded_ms, pct, rows
from workbench.hypotheses.rules.host_ops import placed_main_ops, windows


def _ceiling_row(f: TraceFacts) -> tuple[dict, ...]:
    c = f.ceiling
    return ({"memory_gbps": c.memory_gbps, "peak_gflops": c.peak_gflops, "kind": c.kind, "ceiling": c.source},)


def _by_op(ops: pd.DataFrame) -> pd.DataFrame:
    return ops.groupby("name", as_index=False, observed=True).agg(
        n=("dur_us", "size"), dur_us=("dur_us", "sum"), roof_us=("roof_us", "sum"))


@rule("cpu_memory_bound_ops", category="memory_bound", scope="trace", min_share_pct=50.0, min_ops_per_call=1.0)
def cpu_memory_bound_ops(f: TraceFacts, limits):
    """Most operator time is in ops whose roof time comes from bytes moved, not FLOPs."""
    ops = placed_main_ops(f)
    total = sum(b - a for a, b in windows(f, ops))
    mem = ops[ops["bound"] == "memory"]
    # time spent faulting in fresh large buffers is allocation (large_allocations_repeat), not streaming
    from workbench.hypotheses.rules.allocation import allocation_excess_us

    faults = allocation_excess_us(f).reindex(mem.index).fillna(0.0) if not mem.empty else pd.Series(dtype=float)
    mem = mem.assign(dur_us=(mem["dur_us"] - faults).clip(lower=0.0)) if not mem.empty else mem
    share = pct(mem["dur_us"].sum(), total)
    calls = max(1, f.n_steps)
    per_call = len(mem) / calls
    if mem.empty or share < limits["min_share_pct"] or per_call < limits["min_ops_per_call"]:
        return None
    # fusing a chain of n passes over the same data leaves about one pass
    saveable = float(mem["dur_us"].sum()) * (1 - 1 / max(1.0, per_call))
    return Hypothesis(
        category="memory_bound", title=f"{share:.0f}% of the time is in memory-streaming ops",
        observed=f"{per_call:.1f} memory-bound ops per call (elementwise, reductions, norms, copies), "
                 f"{mem['dur_us'].sum() / 1e3:.2f} ms in all",
        mechanism="Each op reads and writes whole tensors doing little arithmetic per byte (below the ridge of "
                  f"{f.ceiling.ridge_flops_per_byte:.0f} FLOP/byte): bandwidth sets their time, and a chain re-reads "
                  "what the previous op wrote.",
        evidence=(Evidence("memory_bound_time_pct", share, "%", limits["min_share_pct"], source="cpu_ops + analytic work",
                           rows=rows(_by_op(mem), ["name", "n", "dur_us", "roof_us"], by="dur_us")),
                  Evidence("memory_ops_per_call", per_call, "ops", limits["min_ops_per_call"], ">=", "cpu_ops"),
                  Evidence("ridge_flop_per_byte", f.ceiling.ridge_flops_per_byte, "FLOP/byte",
                           source="device ceiling", rows=_ceiling_row(f))),
        time_at_stake_ms=bounded_ms(saveable / calls, total / calls),
        predicted_effect="fusing the chain into one pass (torch.compile, a Triton kernel) leaves about one pass over memory",
        falsifier="compile the function: if time per call does not drop, the ops were not bandwidth-limited or not fusable",
        confounders=("work is analytic (shapes and dtypes), not measured counters",
                     "ops without a formula are placed by name (copies, fills, gathers)"),
        # one pass per call leaves nothing to fuse: the op may already run at its roof
        confidence="high" if share > 75 and per_call >= 2 else "medium",
        suggested_variants=("compiled", "triton"), scope="host thread")


@rule("cpu_compute_bound_ops", category="compute_bound", scope="trace", min_share_pct=50.0)
def cpu_compute_bound_ops(f: TraceFacts, limits):
    """Most operator time is in ops whose roof time comes from FLOPs (matrix work above the ridge)."""
    ops = placed_main_ops(f)
    total = sum(b - a for a, b in windows(f, ops))
    comp = ops[ops["bound"] == "compute"]
    share = pct(comp["dur_us"].sum(), total)
    if comp.empty or share < limits["min_share_pct"]:
        return None
    by = comp.groupby(["name", "input_dims"], as_index=False, observed=True).agg(
        n=("dur_us", "size"), dur_us=("dur_us", "sum"), roof_us=("roof_us", "sum"))
    calls = max(1, f.n_steps)
    known = comp["flops"].notna()
    achieved = (comp.loc[known, "flops"].sum() / comp.loc[known, "dur_us"].sum() / 1e3) if known.any() else float("nan")
    ev = [Evidence("compute_bound_time_pct", share, "%", limits["min_share_pct"], source="cpu_ops + analytic work",
                   rows=rows(by, ["name", "input_dims", "n", "dur_us", "roof_us"], by="dur_us"))]
    above = achieved == achieved and achieved > f.ceiling.peak_gflops * (1 + ROOF_TOLERANCE)
    if achieved == achieved:
        ev.append(Evidence("achieved_gflops", achieved, "GFLOP/s", f.ceiling.peak_gflops, "<=" if not above else ">",
                           source="analytic work / measured time, against the ceiling's peak", rows=_ceiling_row(f)))
    confounders = ["the intensity is analytic, not measured", "forward convolutions whose stride/padding the trace did not record are placed by name"]
    if above:   # more than the roof allows: the ceiling (a default?) or the counts are wrong, not a win
        confounders.insert(0, f"the ops achieve {achieved:.0f} GFLOP/s, above the {f.ceiling.kind} ceiling's "
                              f"{f.ceiling.peak_gflops:.0f} GFLOP/s: an anomaly (wrong ceiling or counts); "
                              "measure the ceiling (workbench.devices.measure_cpu_ceiling) before trusting this")
    return Hypothesis(
        category="compute_bound", title=f"{share:.0f}% of the time is in arithmetic-heavy matrix ops",
        observed=f"{len(comp) / calls:.1f} matrix ops per call above the ridge ({f.ceiling.ridge_flops_per_byte:.0f} FLOP/byte), "
                 f"{comp['dur_us'].sum() / 1e3:.2f} ms in all",
        mechanism="These ops do many FLOPs per byte moved; the arithmetic units, not memory or dispatch, set their time.",
        evidence=tuple(ev), time_at_stake_ms=bounded_ms(comp["dur_us"].sum() / 2 / calls, total / calls),
        predicted_effect="lower precision (bf16 autocast, TF32 on GPU) or less arithmetic is the only lever; fusion will not help",
        falsifier="run under bf16 autocast (torch.autocast('cpu', dtype=torch.bfloat16)): if matmul time does not fall, they "
                  "were not compute-limited (no variant in the registry lowers the precision: that experiment is your "
                  "own variant; compiling, which fuses, does not touch this mechanism)",
        confounders=tuple(confounders),
        confidence="low" if above else "medium", suggested_variants=(), scope="host thread")
