"""Training-loop hygiene visible in operator names: data loading in the step, single-tensor
optimizers (foreach off), gradients zeroed instead of set to None."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from workbench.analysis.backward_scopes import named_spans
from workbench.hypotheses.facts import TraceFacts
from workbench.hypotheses.hypothesis import Evidence
from workbench.hypotheses.registry import Limits, NotJudged, rule
from workbench.hypotheses.rules._common import bounded_ms, pct, rows
from workbench.hypotheses.words import Finding, Words


@dataclass(frozen=True)
class DataLoadingShareLimits(Limits):
    """The thresholds of ``data_loading_share``."""

    min_share_pct: float = 10.0


@dataclass(frozen=True, kw_only=True)
class DataLoadingShareFinding(Finding):
    share_pct: float  # of the trace's window, in DataLoader fetches
    n_fetches: int  # DataLoader __next__ calls
    loading_ms: float  # their summed time


DATA_LOADING_SHARE_WORDS = Words(
    title="Data loading takes {share_pct:.0f}% of the trace",
    observed="{n_fetches} DataLoader fetches, {loading_ms:.2f} ms",
    mechanism="Batches are produced in the training process, on the critical path, instead of ahead of time by "
    "workers.",
    predicted_effect="DataLoader(num_workers>0, pin_memory=True, prefetch_factor) moves it off the critical path",
    falsifier="train on one cached batch repeated: if the step time does not fall by the loading time, loading was "
    "hidden (no variant in the registry changes data loading: that experiment is your own rewrite)",
    confounders=("the first fetch starts the workers",),
)


@rule(
    "data_loading_share",
    category="host_bound",
    scope="trace",
    limits=DataLoadingShareLimits,
    finding=DataLoadingShareFinding,
    words=DATA_LOADING_SHARE_WORDS,
)
def data_loading_share(f: TraceFacts, limits: DataLoadingShareLimits) -> DataLoadingShareFinding | None:
    """The DataLoader's __next__ takes a large share of the step."""
    ops = f.require_cpu_ops()
    dl = ops[ops["name"].astype(str).str.contains(r"enumerate\(DataLoader\)|DataLoaderIter.*__next__", regex=True)]
    total = f.window_us
    share = pct(dl["dur_us"].sum(), total)
    if dl.empty or share < limits.min_share_pct:
        return None
    return DataLoadingShareFinding(
        share_pct=share,
        n_fetches=len(dl),
        loading_ms=dl["dur_us"].sum() / 1e3,
        evidence=(
            Evidence(
                "data_loading_pct",
                share,
                "%",
                limits.min_share_pct,
                source="cpu_ops",
                rows=rows(dl, ["name", "ts_us", "dur_us"], by="dur_us"),
            ),
        ),
        time_at_stake_ms=bounded_ms(dl["dur_us"].sum(), total),
        confidence="high" if share > 3 * limits.min_share_pct else "medium",
        scope="host",
    )


def optimizer_spans(f: TraceFacts, prefix: str) -> pd.DataFrame:
    """The spans of ``Optimizer.step#…`` / ``Optimizer.zero_grad#…`` in the trace's annotations and CPU ops
    (``workbench.analysis.backward_scopes.named_spans``)."""
    return named_spans(f.annotations, f.cpu_ops, prefix)


def optimizer_class(spans: pd.DataFrame) -> str:
    """``AdamW`` from ``Optimizer.step#AdamW.step`` (the most frequent, when several)."""
    names = spans["name"].astype(str).str.extract(r"#([A-Za-z_][\w]*)\.", expand=False).dropna()
    return str(names.value_counts().index[0]) if not names.empty else "the optimizer"


def _ops_inside(ops: pd.DataFrame, spans: pd.DataFrame) -> list[np.ndarray]:
    """Per span, the positions of the CPU ops on its rank and thread that lie within it (binary search per
    thread over numpy arrays: the work is linear in ops + spans, with no table operation per span)."""
    names_tid = ops["tid"].astype(str).to_numpy()
    ranks = ops["rank"].to_numpy() if "rank" in ops else np.zeros(len(ops), dtype=int)
    ts_all, end_all = ops["ts_us"].to_numpy(float), ops["end_us"].to_numpy(float)
    by_thread: dict[tuple[int, str], np.ndarray] = {}
    out = []
    for s_rank, s_tid, s_ts, s_end in zip(
        spans["rank"].to_numpy(),
        spans["tid"].to_numpy(),
        spans["ts_us"].to_numpy(float),
        spans["end_us"].to_numpy(float),
    ):
        key = (int(s_rank), str(s_tid))
        if key not in by_thread:
            mine = np.flatnonzero((names_tid == key[1]) & (ranks == key[0]))
            by_thread[key] = mine[np.argsort(ts_all[mine], kind="stable")]
        order = by_thread[key]
        ts = ts_all[order]
        lo, hi = np.searchsorted(ts, s_ts, side="left"), np.searchsorted(ts, s_end, side="right")
        picked = order[lo:hi]
        out.append(picked[end_all[picked] <= s_end])
    return out


# ops a per-tensor optimizer runs exactly once per parameter (Adam, AdamW, Adagrad, RMSprop: addcdiv_; the
# lerp_ of Adam's first moment), tried in this order before the counts' common divisor
ONCE_PER_PARAMETER = ("aten::addcdiv_", "aten::lerp_")


def parameter_tensors(names: np.ndarray, steps: int) -> tuple[float, str]:
    """How many parameter tensors a per-tensor optimizer step walks, and how that was read: the count per
    step of an op it runs once per parameter, else the largest count per step that every repeated op's
    count is a multiple of (the loop body repeats once per parameter)."""
    values, counts = np.unique(names, return_counts=True)
    by_name = dict(zip(values.tolist(), counts.tolist()))
    for op in ONCE_PER_PARAMETER:
        if by_name.get(op):
            n = by_name[op] / steps
            return n, f"{op} runs {n:.0f} times per step"
    repeated = [c for c in counts.tolist() if c > steps]
    if not repeated:
        return 0.0, ""
    n = float(np.gcd.reduce(np.asarray(repeated, dtype=np.int64))) / steps
    return n, f"its repeated ops' counts per step are multiples of {n:.0f}"


@dataclass(frozen=True)
class SingleTensorOptimizerLimits(Limits):
    """The thresholds of ``single_tensor_optimizer``."""

    min_ops_per_step: int = 50


@dataclass(frozen=True, kw_only=True)
class SingleTensorOptimizerFinding(Finding):
    optimizer: str  # the optimizer's class name (``AdamW``), or "the optimizer"
    ops_per_step: float  # ops inside one step, on average
    n_steps: int  # optimizer step calls
    step_ms: float  # their summed time
    n_params: float = 0.0  # parameter tensors one step walks (0: not read)
    how_counted: str = ""  # how n_params was read (parameter_tensors)


_SINGLE_TENSOR_MECHANISM = (
    "A single-tensor optimizer launches several small ops per parameter; foreach/fused versions batch them."
)
_SINGLE_TENSOR_PREDICTION = (
    "{optimizer}(..., foreach=True) (or fused=True where the device supports it) cuts the optimizer step several-fold"
)
_SINGLE_TENSOR_FALSIFIER = (
    "construct {optimizer} with foreach=True: if its step time does not fall, per-tensor dispatch was not the cost"
)
SINGLE_TENSOR_OPTIMIZER_WORDS = {
    # the number of parameter tensors was read from the ops' counts
    "counted": Words(
        title="{optimizer} steps about {n_params:.0f} parameter tensors one tensor at a time: {ops_per_step:.0f} ops "
        "per step (foreach/fused off)",
        observed="{n_steps} {optimizer}.step calls, none using _foreach_/fused kernels: {ops_per_step:.0f} ops per "
        "step over about {n_params:.0f} parameter tensors ({how_counted}); {step_ms:.2f} ms in total",
        mechanism=_SINGLE_TENSOR_MECHANISM,
        predicted_effect=_SINGLE_TENSOR_PREDICTION,
        falsifier=_SINGLE_TENSOR_FALSIFIER,
        confounders=("few, large parameters gain little",),
        suggested_variants=("fused_optimizer", "compiled"),
    ),
    # no op count says how many parameter tensors there are
    "uncounted": Words(
        title="{optimizer} steps its parameters one tensor at a time: {ops_per_step:.0f} ops per step "
        "(foreach/fused off)",
        observed="{n_steps} {optimizer}.step calls, none using _foreach_/fused kernels: {ops_per_step:.0f} ops per "
        "step over its parameters; {step_ms:.2f} ms in total",
        mechanism=_SINGLE_TENSOR_MECHANISM,
        predicted_effect=_SINGLE_TENSOR_PREDICTION,
        falsifier=_SINGLE_TENSOR_FALSIFIER,
        confounders=("few, large parameters gain little",),
        suggested_variants=("fused_optimizer", "compiled"),
    ),
}


@rule(
    "single_tensor_optimizer",
    category="launch_overhead",
    scope="trace",
    limits=SingleTensorOptimizerLimits,
    finding=SingleTensorOptimizerFinding,
    words=SINGLE_TENSOR_OPTIMIZER_WORDS,
)
def single_tensor_optimizer(f: TraceFacts, limits: SingleTensorOptimizerLimits) -> SingleTensorOptimizerFinding | None:
    """The optimizer step updates parameters one tensor at a time (foreach/fused off)."""
    ops = f.require_cpu_ops()
    steps = optimizer_spans(f, "Optimizer.step#")
    if steps.empty:
        raise NotJudged("no optimizer step in the trace (no Optimizer.step# annotation or op)")
    inside = _ops_inside(ops, steps)
    names = ops["name"].astype(str).to_numpy()
    picked = np.concatenate(inside) if inside else np.zeros(0, dtype=int)
    if any("_foreach_" in name or "_fused_" in name for name in set(names[picked].tolist())):
        return None
    per_step = picked.size / len(inside)
    if per_step < limits.min_ops_per_step:
        return None
    n_params, how = parameter_tensors(names[picked], len(inside))
    return SingleTensorOptimizerFinding(
        branch="counted" if n_params else "uncounted",
        optimizer=optimizer_class(steps),
        ops_per_step=per_step,
        n_steps=len(steps),
        step_ms=steps["dur_us"].sum() / 1e3,
        n_params=n_params,
        how_counted=how,
        evidence=(
            Evidence(
                "optimizer_ops_per_step",
                per_step,
                "ops",
                limits.min_ops_per_step,
                ">=",
                "cpu_ops",
                rows=rows(steps, ["name", "dur_us"], by="dur_us"),
            ),
            Evidence("parameter_tensors", n_params, "tensors", source="cpu_ops"),
        ),
        time_at_stake_ms=bounded_ms(steps["dur_us"].sum() * 0.5, f.window_us),
        confidence="medium",
        scope="optimizer step",
    )


@dataclass(frozen=True)
class ZeroGradNotNoneLimits(Limits):
    """The thresholds of ``zero_grad_not_none``."""

    min_zero_ops: int = 10


@dataclass(frozen=True, kw_only=True)
class ZeroGradNotNoneFinding(Finding):
    n_zero_ops: int  # zero_/fill_ ops inside zero_grad calls
    n_calls: int  # zero_grad calls
    optimizer: str  # the optimizer's class name (``AdamW``), or "the optimizer"
    zero_grad_ms: float  # the calls' summed time


ZERO_GRAD_NOT_NONE_WORDS = Words(
    title="zero_grad writes zeros {n_zero_ops} times instead of setting grads to None",
    observed="{n_zero_ops} zero_/fill_ ops inside {n_calls} {optimizer}.zero_grad calls, {zero_grad_ms:.2f} ms",
    mechanism="Zeroing costs one memset per parameter each step; set_to_none=True skips it and lets backward write "
    "fresh.",
    predicted_effect="optimizer.zero_grad(set_to_none=True) removes this time",
    falsifier="call zero_grad(set_to_none=True) (the set_to_none fix rewrites the call in a copy of the code): "
    "if the step time does not fall, zeroing was not costly",
    suggested_variants=("set_to_none",),
)


@rule(
    "zero_grad_not_none",
    category="launch_overhead",
    scope="trace",
    limits=ZeroGradNotNoneLimits,
    finding=ZeroGradNotNoneFinding,
    words=ZERO_GRAD_NOT_NONE_WORDS,
)
def zero_grad_not_none(f: TraceFacts, limits: ZeroGradNotNoneLimits) -> ZeroGradNotNoneFinding | None:
    """zero_grad() fills gradients with zeros (set_to_none=False) instead of dropping them."""
    ops = f.require_cpu_ops()
    zg = optimizer_spans(f, "Optimizer.zero_grad#")
    if zg.empty:
        raise NotJudged("no optimizer zero_grad in the trace (no Optimizer.zero_grad# annotation or op)")
    is_zero = ops["name"].astype(str).isin(["aten::zero_", "aten::fill_"]).to_numpy()
    zeros = sum(int(is_zero[picked].sum()) for picked in _ops_inside(ops, zg))
    if zeros < limits.min_zero_ops:
        return None
    return ZeroGradNotNoneFinding(
        n_zero_ops=zeros,
        n_calls=len(zg),
        optimizer=optimizer_class(zg),
        zero_grad_ms=zg["dur_us"].sum() / 1e3,
        evidence=(
            Evidence(
                "zero_ops",
                zeros,
                "ops",
                limits.min_zero_ops,
                ">=",
                "cpu_ops",
                rows=rows(zg, ["name", "dur_us"], by="dur_us"),
            ),
        ),
        time_at_stake_ms=bounded_ms(zg["dur_us"].sum(), f.window_us),
        confidence="medium",
        scope="optimizer",
    )
