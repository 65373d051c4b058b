"""Training-loop hygiene visible in operator names: data loading in the step, single-tensor
optimizers (foreach off), gradients zeroed instead of set to None."""
from __future__ import annotations

import numpy as np

from workbench.hypotheses.facts import TraceFacts
from workbench.hypotheses.hypothesis import Evidence, Hypothesis
from workbench.hypotheses.registry import NotJudged, rule
from workbench.hypotheses.rules._common import bounded_ms, pct, rows


@rule("data_loading_share", category="host_bound", scope="trace", min_share_pct=10.0)
def data_loading_share(f: TraceFacts, limits):
    """The DataLoader's __next__ takes a large share of the step."""
    ops = f.require_cpu_ops()
    dl = ops[ops["name"].astype(str).str.contains(r"enumerate\(DataLoader\)|DataLoaderIter.*__next__", regex=True)]
    total = f.window_us
    share = pct(dl["dur_us"].sum(), total)
    if dl.empty or share < limits["min_share_pct"]:
        return None
    return Hypothesis(
        category="host_bound", title=f"Data loading takes {share:.0f}% of the trace",
        observed=f"{len(dl)} DataLoader fetches, {dl['dur_us'].sum() / 1e3:.2f} ms",
        mechanism="Batches are produced in the training process, on the critical path, instead of ahead of time by workers.",
        evidence=(Evidence("data_loading_pct", share, "%", limits["min_share_pct"], source="cpu_ops",
                           rows=rows(dl, ["name", "ts_us", "dur_us"], by="dur_us")),),
        time_at_stake_ms=bounded_ms(dl["dur_us"].sum(), total),
        predicted_effect="DataLoader(num_workers>0, pin_memory=True, prefetch_factor) moves it off the critical path",
        falsifier="train on one cached batch repeated: if the step time does not fall by the loading time, loading was hidden "
                  "(no variant in the registry changes data loading: that experiment is your own rewrite)",
        confounders=("the first fetch starts the workers",), confidence="high" if share > 3 * limits["min_share_pct"] else "medium",
        suggested_variants=(), scope="host")


@rule("single_tensor_optimizer", category="launch_overhead", scope="trace", min_ops_per_step=50)
def single_tensor_optimizer(f: TraceFacts, limits):
    """The optimizer step updates parameters one tensor at a time (foreach/fused off)."""
    ops = f.require_cpu_ops()
    names = ops["name"].astype(str)
    steps = ops[names.str.startswith("Optimizer.step#")]
    if steps.empty:
        raise NotJudged("no optimizer step in the trace")
    out_ops = []
    # per thread, ops sorted by start: a step's ops are one slice (binary search), so the work is linear
    # in ops + steps, not ops x steps
    tids = ops["tid"].astype(str).to_numpy()
    fused_all = names.str.contains("_foreach_|_fused_").to_numpy(dtype=bool)
    by_tid = {}
    for s_ts, s_end, s_tid in zip(steps["ts_us"].to_numpy(float), steps["end_us"].to_numpy(float),
                                  steps["tid"].astype(str)):
        if s_tid not in by_tid:
            mine = np.flatnonzero(tids == s_tid)
            order = mine[np.argsort(ops["ts_us"].to_numpy(float)[mine], kind="stable")]
            by_tid[s_tid] = (ops["ts_us"].to_numpy(float)[order], ops["end_us"].to_numpy(float)[order],
                             fused_all[order])
        ts, end, fused = by_tid[s_tid]
        lo, hi = np.searchsorted(ts, s_ts, side="left"), np.searchsorted(ts, s_end, side="right")
        inside = end[lo:hi] <= s_end
        if fused[lo:hi][inside].any():
            return None
        out_ops.append(int(inside.sum()))
    per_step = sum(out_ops) / len(out_ops)
    if per_step < limits["min_ops_per_step"]:
        return None
    return Hypothesis(
        category="launch_overhead", title=f"Optimizer runs {per_step:.0f} per-tensor ops per step (foreach off)",
        observed=f"{len(steps)} optimizer steps, none using _foreach_/fused kernels; {steps['dur_us'].sum() / 1e3:.2f} ms in total",
        mechanism="A single-tensor optimizer launches several small ops per parameter; foreach/fused versions batch them.",
        evidence=(Evidence("optimizer_ops_per_step", per_step, "ops", limits["min_ops_per_step"], ">=", "cpu_ops",
                           rows=rows(steps, ["name", "dur_us"], by="dur_us")),),
        time_at_stake_ms=bounded_ms(steps["dur_us"].sum() * 0.5, f.window_us),
        predicted_effect="foreach=True (or fused=True) cuts optimizer time several-fold",
        falsifier="construct the optimizer with foreach=True: if its step time does not fall, per-tensor dispatch was not the cost",
        confounders=("few, large parameters gain little",), confidence="medium",
        suggested_variants=("compiled",), scope="optimizer step")


@rule("zero_grad_not_none", category="launch_overhead", scope="trace", min_zero_ops=10)
def zero_grad_not_none(f: TraceFacts, limits):
    """zero_grad() fills gradients with zeros (set_to_none=False) instead of dropping them."""
    ops = f.require_cpu_ops()
    names = ops["name"].astype(str)
    zg = ops[names.str.startswith("Optimizer.zero_grad#")]
    if zg.empty:
        raise NotJudged("no optimizer zero_grad in the trace")
    zeros = 0
    for _, z in zg.iterrows():
        inside = ops[(ops["ts_us"] >= z["ts_us"]) & (ops["end_us"] <= z["end_us"]) & (ops["tid"] == z["tid"])]
        zeros += int(inside["name"].astype(str).isin(["aten::zero_", "aten::fill_"]).sum())
    if zeros < limits["min_zero_ops"]:
        return None
    return Hypothesis(
        category="launch_overhead", title=f"zero_grad writes zeros {zeros} times instead of setting grads to None",
        observed=f"{zeros} zero_/fill_ ops inside {len(zg)} zero_grad calls, {zg['dur_us'].sum() / 1e3:.2f} ms",
        mechanism="Zeroing costs one memset per parameter each step; set_to_none=True skips it and lets backward write fresh.",
        evidence=(Evidence("zero_ops", zeros, "ops", limits["min_zero_ops"], ">=", "cpu_ops",
                           rows=rows(zg, ["name", "dur_us"], by="dur_us")),),
        time_at_stake_ms=bounded_ms(zg["dur_us"].sum(), f.window_us),
        predicted_effect="optimizer.zero_grad(set_to_none=True) removes this time",
        falsifier="call zero_grad(set_to_none=True): if the step time does not fall, zeroing was not costly "
                  "(no variant in the registry changes zero_grad: that experiment is your own one-line change)",
        confounders=(), confidence="medium", suggested_variants=(), scope="optimizer")
