"""Work done in float64 (double precision) taking a real share of the op or kernel time.

Read from what ran. On a CPU trace: the input types the ops recorded (``cpu_ops.input_types``, with
``input_dims``: profile with record_shapes=True). An op computes in float64 when one of its tensor inputs with at
least one dimension is ``double`` (or ``c10::complex<double>``): a Python float scalar is recorded as a 0-dim
``double`` and does not promote a float32 tensor, so it is not counted. The op that decides is the outermost one
on its call chain that records a floating input (ops above it without one, autograd nodes and wrappers, are
looked through), so nothing is counted twice. A dtype conversion (``aten::to`` / ``_to_copy`` / ``type_as``, whose
recorded input type does not say the output's; a ``copy_`` between two types) is not float64 work: converting numpy's float64 to float32 once at the boundary is
the fix, not the symptom. The share is of the top-level op time (markers and compiled-region wrappers looked
through).

On a GPU trace: computation kernels whose precision is fp64 (``analysis.kernel_precisions``: the kernel's own
name, ``dgemm`` / ``<double``, else the launching op's input dtype), conversion kernels excepted; the share is of
computation-kernel time. Host ops of a GPU trace are not judged here (their time is launch time).

No catalog fix changes a dtype, so the rule suggests none: the change is computing in float32 (``.float()`` on
the inputs and ``model.float()``). The time at stake is half the float64 time: float32 moves half the bytes and
packs twice the SIMD lanes (on GPUs with a low fp64 rate the saving can be far larger).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

import numpy as np
import pandas as pd

from workbench.hypotheses.facts import TraceFacts
from workbench.hypotheses.hypothesis import Evidence
from workbench.hypotheses.registry import Limits, NotJudged, rule
from workbench.hypotheses.rules._common import bounded_ms, pct, per_rank_max_us, rows, summed_over
from workbench.hypotheses.words import Finding, Words

FLOAT64_TYPES = frozenset({"double", "c10::complex<double>"})
FLOAT_TYPES = frozenset(
    {"float", "double", "c10::Half", "half", "c10::BFloat16", "bfloat16", "c10::complex<float>", "c10::complex<double>"}
)
# dtype conversions: never float64 work (the recorded input type does not say the output's)
CONVERSION_OPS = frozenset({"aten::to", "aten::_to_copy", "aten::type_as"})
# copies: float64 work only when both sides are float64 (else a conversion)
COPY_OPS = frozenset({"aten::copy_", "aten::copy"})
_QUOTED = re.compile(r'"([^"]*)"')


def _tensor_floats(types: str, dims: str) -> tuple[list[str], bool]:
    """The floating dtypes of an op's tensor inputs with at least one dimension, and whether the shapes were
    recorded (without them every floating input counts: a 0-dim scalar cannot be told apart)."""
    ts = _QUOTED.findall(str(types))
    try:
        ds = json.loads(dims) if dims else None
    except ValueError:
        ds = None
    if not isinstance(ds, list) or len(ds) != len(ts):
        return [t for t in ts if t in FLOAT_TYPES], False
    return [t for t, d in zip(ts, ds) if t in FLOAT_TYPES and isinstance(d, list) and len(d) > 0], True


def _float64_flags(ops: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, bool]:
    """Per op: (records a floating tensor input, computes in float64), and whether any op recorded shapes."""
    names = ops["name"].astype(str).to_numpy(dtype=object)
    types = ops["input_types"].astype(str).to_numpy(dtype=object)
    dims = ops["input_dims"].astype(str).to_numpy(dtype=object)
    typed = np.zeros(len(ops), dtype=bool)
    is64 = np.zeros(len(ops), dtype=bool)
    shaped = False
    cache: dict[tuple[str, str, str], tuple[bool, bool, bool]] = {}
    for i, key in enumerate(zip(names, types, dims)):
        if key not in cache:
            floats, has_shapes = _tensor_floats(key[1], key[2])
            wide = [t in FLOAT64_TYPES for t in floats]
            if key[0] in CONVERSION_OPS:
                wide = [False]
            counted = all(wide) if key[0] in COPY_OPS else any(wide)
            cache[key] = (bool(floats), bool(floats) and counted, has_shapes)
        typed[i], is64[i], got = cache[key]
        shaped = shaped or (got and typed[i])
    return typed, is64, shaped


def _deciding_ops(ops: pd.DataFrame, typed: np.ndarray) -> np.ndarray:
    """Ops that are the outermost one recording a floating input on their call chain."""
    n = len(ops)
    parent = ops["parent"].to_numpy(np.int64) if "parent" in ops else np.full(n, -1, dtype=np.int64)
    above = np.zeros(n, dtype=bool)
    cur = np.where((parent >= 0) & (parent < n), parent, -1)
    while (cur >= 0).any():
        live = cur >= 0
        above[live] |= typed[cur[live]]
        nxt = np.full(n, -1, dtype=np.int64)
        nxt[live] = parent[cur[live]]
        cur = np.where((nxt >= 0) & (nxt < n) & ~above, nxt, -1)
    return typed & ~above


@dataclass(frozen=True)
class Float64ComputeLimits(Limits):
    """The thresholds of ``float64_compute``."""

    min_share_pct: float = 10.0


@dataclass(frozen=True, kw_only=True)
class Float64Finding(Finding):
    share_pct: float  # of the top-level op time (CPU) or computation-kernel time (GPU)
    n: int  # ops or kernels computing in float64
    float64_ms: float  # their summed time
    whole_ms: float  # the summed time they are a share of
    summed_over: str  # how the ranks' times were summed (empty for one rank)
    unknown: int = 0  # computation kernels that state no precision (GPU)


_ACCURACY = "whether float32 is accurate enough is the workload's to say: compare the outputs within a tolerance first"
_MECHANISM = (
    "float64 elements are twice the bytes of float32 and half as many fit in a SIMD register (GPUs outside the "
    "datacenter run fp64 at a small fraction of their fp32 rate): the same arithmetic in double moves twice the "
    "memory and takes about twice the instructions. numpy arrays are float64 by default, and torch.from_numpy "
    "keeps their dtype."
)
_PREDICTION = (
    "computing in float32 (.float() on the inputs where they enter, model.float(); no catalog fix changes a dtype: "
    "the change is your own) about halves these ops' time"
)
_FALSIFIER = (
    "convert the inputs (and parameters) to float32 and re-time: if these ops' time does not fall by about half, "
    "float64 was not the cost; if the outputs then differ beyond your tolerance, float64 is needed"
)
WORDS = {
    "cpu": Words(
        title="float64 (double) work takes {share_pct:.0f}% of op time",
        observed="{n} ops with float64 tensor inputs, {float64_ms:.2f} ms of {whole_ms:.2f} ms top-level op "
        "time{summed_over}",
        mechanism=_MECHANISM,
        predicted_effect=_PREDICTION,
        falsifier=_FALSIFIER,
        confounders=(_ACCURACY,),
        notes={
            "no_shapes": "input shapes were not recorded: a Python float scalar (recorded as a 0-dim double) "
            "cannot be told from a float64 tensor"
        },
    ),
    "gpu": Words(
        title="float64 (double) work takes {share_pct:.0f}% of computation-kernel time",
        observed="{n} fp64 kernels, {float64_ms:.2f} ms of {whole_ms:.2f} ms computation-kernel time{summed_over}",
        mechanism=_MECHANISM,
        predicted_effect=_PREDICTION,
        falsifier=_FALSIFIER,
        confounders=(
            _ACCURACY,
            "on GPUs with a low fp64 rate (most non-datacenter parts: 1/32 to 1/64 of fp32) the saving can be most "
            "of this time, not half",
        ),
        notes={"unknown": "{unknown} computation kernels state no precision and were not counted"},
    ),
}


@rule(
    "float64_compute",
    category="precision",
    scope="trace",
    limits=Float64ComputeLimits,
    finding=Float64Finding,
    words=WORDS,
)
def float64_compute(f: TraceFacts, limits: Float64ComputeLimits) -> Float64Finding | None:
    """Ops or kernels computing in float64 (double) take a large share of the op or kernel time."""
    if f.has_gpu:
        return _on_gpu(f, limits)
    from workbench.hypotheses.rules.host_ops import _under_wrappers_only

    ops = f.require_cpu_ops()
    if (ops["input_types"].astype(str) == "").all():
        raise NotJudged("input types were not recorded (profile with record_shapes=True): dtypes cannot be seen")
    top = ops[_under_wrappers_only(ops)]
    typed, is64, shaped = _float64_flags(ops)
    wide = ops[_deciding_ops(ops, typed) & is64]
    share = pct(per_rank_max_us(wide), per_rank_max_us(top))
    if wide.empty or share < limits.min_share_pct:
        return None
    by = wide.groupby(["name", "input_types"], as_index=False, observed=True).agg(
        n=("dur_us", "size"), dur_us=("dur_us", "sum")
    )
    return Float64Finding(
        branch="cpu",
        share_pct=share,
        n=len(wide),
        float64_ms=wide["dur_us"].sum() / 1e3,
        whole_ms=top["dur_us"].sum() / 1e3,
        summed_over=summed_over(top),
        evidence=(
            Evidence(
                "float64_share_pct",
                share,
                "%",
                limits.min_share_pct,
                ">=",
                source="cpu_ops (input_types, input_dims)",
                rows=rows(by, ["name", "input_types", "n", "dur_us"], by="dur_us"),
            ),
        ),
        time_at_stake_ms=_stake_ms(f, wide),
        notes=() if shaped else ("no_shapes",),
        scope="host threads",
    )


def _on_gpu(f: TraceFacts, limits: Float64ComputeLimits) -> Float64Finding | None:
    from workbench.analysis.kernel_precision import FP64, kernel_precisions

    k = f.kernels[(f.kernels["kind"] == "kernel") & (f.kernels["kernel_type"] == "computation")]
    if k.empty:
        return None
    prec = kernel_precisions(k, f.cpu_ops)
    if (prec["precision"] == "").all():
        raise NotJudged(
            f"the precision of {len(prec)} computation kernels is unknown: their names state no type and their "
            "launching ops record no dtype (profile with record_shapes=True)"
        )
    wide = prec["precision"] == FP64
    ops = f.cpu_ops
    if not ops.empty and "op_index" in prec:  # a kernel a dtype conversion launched is not float64 work
        _, is64, _ = _float64_flags(ops)
        names = ops["name"].astype(str).to_numpy(dtype=object)
        idx = prec["op_index"].to_numpy(np.int64)
        ok = (idx >= 0) & (idx < len(ops))
        at = np.clip(idx, 0, len(ops) - 1)
        conversion = ok & np.isin(names[at], list(CONVERSION_OPS | COPY_OPS)) & ~is64[at]
        wide = wide & ~conversion
    fp64 = prec[wide]
    share = pct(per_rank_max_us(fp64), per_rank_max_us(prec))
    if fp64.empty or share < limits.min_share_pct:
        return None
    by = fp64.groupby(["name", "precision_from"], as_index=False, observed=True).agg(
        n=("dur_us", "size"), dur_us=("dur_us", "sum")
    )
    unknown = int((prec["precision"] == "").sum())
    return Float64Finding(
        branch="gpu",
        share_pct=share,
        n=len(fp64),
        float64_ms=fp64["dur_us"].sum() / 1e3,
        whole_ms=prec["dur_us"].sum() / 1e3,
        summed_over=summed_over(prec),
        unknown=unknown,
        evidence=(
            Evidence(
                "float64_share_pct",
                share,
                "%",
                limits.min_share_pct,
                ">=",
                source="kernels (type in the kernel name, else the launching op's dtype)",
                rows=rows(by, ["name", "precision_from", "n", "dur_us"], by="dur_us"),
            ),
        ),
        time_at_stake_ms=_stake_ms(f, fp64),
        notes=("unknown",) if unknown else (),
        scope="all ranks",
    )


def _stake_ms(f: TraceFacts, wide: pd.DataFrame) -> float:
    """Half the float64 time (float32 moves half the bytes), within the trace's window."""
    return bounded_ms(per_rank_max_us(wide) / 2, f.window_us)
