"""Model-structure hygiene visible in operator names and shapes: a convolution's bias that the batch
norm right after it cancels, and nn.DataParallel where DistributedDataParallel would do."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from workbench.hypotheses.facts import TraceFacts
from workbench.hypotheses.hypothesis import Evidence
from workbench.hypotheses.registry import Limits, NotJudged, rule
from workbench.hypotheses.rules._common import bounded_ms, pct, rows
from workbench.hypotheses.words import Finding, Words

CONV_OPS = frozenset({"aten::conv1d", "aten::conv2d", "aten::conv3d", "aten::convolution", "aten::_convolution"})
BN_OPS = frozenset(
    {
        "aten::batch_norm",
        "aten::_batch_norm_impl_index",
        "aten::native_batch_norm",
        "aten::cudnn_batch_norm",
        "aten::miopen_batch_norm",
        "aten::_native_batch_norm_legit",
    }
)
DATA_PARALLEL = re.compile(
    r"torch/nn/parallel/(?:data_parallel|replicate|scatter_gather|comm|parallel_apply)\.py|nn\.Module: DataParallel"
    r"|^(?:autograd::engine::evaluate_function: )?(?:Broadcast|ReduceAddCoalesced|Gather|Scatter)Backward$"
    r"|broadcast_coalesced|reduce_add_coalesced"
)


def _shapes(text: str) -> list:
    try:
        return json.loads(text) or []
    except ValueError:
        return []


def _conv_bn_pairs(ops: pd.DataFrame) -> pd.DataFrame:
    """Outermost convolutions with a bias input, each followed (next sibling op) by a batch norm over its channels."""
    names = ops["name"].astype(str).to_numpy()
    parent = ops["parent"].to_numpy(np.int64)
    is_conv = np.isin(names, list(CONV_OPS))
    outer = is_conv & ~np.where(parent >= 0, is_conv[np.maximum(parent, 0)], False)
    order = ops.assign(row=np.arange(len(ops)), _tid=ops["tid"].astype(str)).sort_values(
        ["rank", "_tid", "parent", "ts_us"], kind="stable"
    )
    nxt = order["row"].shift(-1)
    same = (
        (order["parent"].shift(-1) == order["parent"])
        & (order["_tid"].shift(-1) == order["_tid"])
        & (order["rank"].shift(-1) == order["rank"])
    )
    following = dict(zip(order["row"], np.where(same, nxt, -1).astype(np.int64)))
    from workbench.analysis.work_formulas import DTYPE_BYTES

    dims = ops["input_dims"].astype(str).to_numpy()
    types = ops["input_types"].astype(str).to_numpy()
    pairs = []
    for i in np.flatnonzero(outer):
        j = following.get(i, -1)
        if j < 0 or names[j] not in BN_OPS:
            continue
        conv, bn = _shapes(dims[i]), _shapes(dims[j])
        bias = conv[2] if len(conv) > 2 else []
        out = bn[0] if bn else []
        if isinstance(bias, list) and len(bias) == 1 and isinstance(out, list) and len(out) > 1 and out[1] == bias[0]:
            pairs.append(
                {
                    "conv_row": i,
                    "bn_row": j,
                    "conv": names[i],
                    "out_channels": bias[0],
                    "output_elements": int(np.prod(out)),
                    "conv_us": float(ops["dur_us"].iloc[i]),
                    "element_bytes": DTYPE_BYTES.get((_shapes(types[j]) or ["float"])[0], 4),
                }
            )
    return pd.DataFrame(
        pairs, columns=["conv_row", "bn_row", "conv", "out_channels", "output_elements", "conv_us", "element_bytes"]
    )


@dataclass(frozen=True)
class ConvBiasBeforeBatchNormLimits(Limits):
    """The thresholds of ``conv_bias_before_batch_norm``."""

    min_pairs: int = 1


@dataclass(frozen=True, kw_only=True)
class ConvBiasBeforeBatchNormFinding(Finding):
    n_pairs: int  # convolutions with a bias followed directly by a batch norm over their channels


CONV_BIAS_WORDS = Words(
    title="{n_pairs} convolutions add a bias that the next batch norm cancels",
    observed="{n_pairs} conv calls with a bias input are followed directly by batch_norm over the same channels",
    mechanism="Batch norm subtracts the per-channel mean, so a per-channel bias before it changes nothing but "
    "costs an extra pass over the output (and a bias gradient in training).",
    predicted_effect="Conv(bias=False) before BatchNorm gives the same outputs (up to rounding) and drops the bias pass",
    falsifier="rebuild the convolutions with bias=False and compare outputs and step time: a different output means the "
    "norm was not directly after the conv (no variant in the registry drops the bias: that experiment is your own rewrite)",
    confounders=(
        "cuDNN often fuses the bias into the convolution, leaving little to save",
        "the time at stake is analytic, not measured",
    ),
)


@rule(
    "conv_bias_before_batch_norm",
    category="memory_bound",
    scope="trace",
    limits=ConvBiasBeforeBatchNormLimits,
    finding=ConvBiasBeforeBatchNormFinding,
    words=CONV_BIAS_WORDS,
)
def conv_bias_before_batch_norm(
    f: TraceFacts, limits: ConvBiasBeforeBatchNormLimits
) -> ConvBiasBeforeBatchNormFinding | None:
    """A convolution adds a bias that the batch norm right after it subtracts again (with the mean)."""
    ops = f.require_cpu_ops()
    if (ops["input_dims"].astype(str) == "").all():
        raise NotJudged("input shapes were not recorded (profile with record_shapes=True): conv biases cannot be seen")
    pairs = _conv_bn_pairs(ops)
    if len(pairs) < limits.min_pairs:
        return None
    try:
        gbps = float(f.ceiling.memory_gbps)
    except NotJudged:
        gbps = float("nan")
    # the bias add is one read + write of the output, at best at the ceiling's bandwidth
    out_bytes = pairs["output_elements"] * pairs["element_bytes"]
    pass_us = out_bytes * 2 / (gbps * 1e3) if gbps == gbps else pairs["conv_us"] * 0.0
    stake_us = float(np.minimum(pass_us, pairs["conv_us"]).sum())
    return ConvBiasBeforeBatchNormFinding(
        n_pairs=len(pairs),
        evidence=(
            Evidence(
                "conv_bias_then_bn",
                len(pairs),
                "pairs",
                limits.min_pairs,
                ">=",
                "cpu_ops (names, input dims)",
                rows=rows(pairs, ["conv", "out_channels", "output_elements", "conv_us"], by="output_elements"),
            ),
            Evidence(
                "bias_pass_us", stake_us, "us", source="analytic: read + write of the output at the ceiling's bandwidth"
            ),
        ),
        time_at_stake_ms=bounded_ms(stake_us, f.window_us),
        confidence="medium" if stake_us > 0 else "low",
        scope="model",
    )


def _union_us(ev: pd.DataFrame) -> float:
    from workbench.analysis.intervals import union_length_by

    return float(sum(union_length_by(ev["tid"].astype(str).to_numpy(), ev["ts_us"], ev["end_us"]).values()))


@dataclass(frozen=True)
class DataParallelNotDdpLimits(Limits):
    """The thresholds of ``data_parallel_not_ddp``."""

    min_pct: float = 1.0


@dataclass(frozen=True, kw_only=True)
class DataParallelNotDdpFinding(Finding):
    share_pct: float  # DataParallel's event time (union per thread) over the trace's window
    n_events: int  # DataParallel replicate/scatter/gather/broadcast events
    devices: str  # the GPU indices the kernels ran on, as a list ("[0, 1]"; "" when none are recorded)


DATA_PARALLEL_WORDS = Words(
    title="nn.DataParallel replicates and gathers every step ({share_pct:.0f}% of the trace)",
    observed="{n_events} DataParallel replicate/scatter/gather/broadcast events in one process{driving}",
    mechanism="DataParallel copies the model to every GPU each step, scatters inputs and gathers outputs on GPU 0, "
    "all from one Python process (GIL-bound); DDP keeps one process per GPU and overlaps gradient all-reduce.",
    predicted_effect="DistributedDataParallel (one process per GPU) removes replicate/scatter/gather and scales better",
    falsifier="run one step on a single GPU without DataParallel: if per-sample time is not better than with it, "
    "the parallel overhead was not the cost (no variant in the registry switches to DDP: that experiment is your own rewrite)",
    confounders=("event names only show DataParallel when Python stacks or module names are recorded",),
    parts={"driving": " driving devices {devices}"},  # where the trace's kernels name the devices driven
)


@rule(
    "data_parallel_not_ddp",
    category="communication",
    scope="trace",
    limits=DataParallelNotDdpLimits,
    finding=DataParallelNotDdpFinding,
    words=DATA_PARALLEL_WORDS,
)
def data_parallel_not_ddp(f: TraceFacts, limits: DataParallelNotDdpLimits) -> DataParallelNotDdpFinding | None:
    """A single process drives several GPUs with nn.DataParallel (replicate/scatter/gather each step)."""
    if len(f.ranks) > 1:
        raise NotJudged("the trace has several ranks: DataParallel is a single-process pattern")
    tables = [f.cpu_ops, getattr(f.trace, "python_calls", None)]  # no trace, or tables without it: None
    ev = (
        pd.concat(
            [
                tb[["tid", "name", "ts_us", "end_us", "dur_us"]].astype({"tid": str, "name": str})
                for tb in tables
                if isinstance(tb, pd.DataFrame) and not tb.empty
            ],
            ignore_index=True,
        )
        if any(isinstance(tb, pd.DataFrame) and not tb.empty for tb in tables)
        else pd.DataFrame()
    )
    if ev.empty:
        raise NotJudged("no CPU operator or Python events in the trace")
    dp = ev[ev["name"].str.contains(DATA_PARALLEL)]
    if dp.empty:
        return None
    dp_us = _union_us(dp)
    share = pct(dp_us, f.window_us)
    if share < limits.min_pct:
        return None
    devices = sorted(int(d) for d in f.kernels["device"].unique()) if f.has_gpu and "device" in f.kernels else []
    by = dp.groupby("name", as_index=False).agg(n=("dur_us", "size"), dur_us=("dur_us", "sum"))
    return DataParallelNotDdpFinding(
        share_pct=share,
        n_events=len(dp),
        devices=str(devices) if devices else "",
        parts=("driving",) if devices else (),
        evidence=(
            Evidence(
                "data_parallel_pct",
                share,
                "%",
                limits.min_pct,
                source="cpu_ops + python_calls (names)",
                rows=rows(by, ["name", "n", "dur_us"], by="dur_us"),
            ),
        ),
        time_at_stake_ms=bounded_ms(dp_us, f.window_us),
        confidence="medium",
        scope="process",
    )
