"""Attention written by hand, ``softmax(q @ k.transpose(-2, -1) * scale [+ mask]) [dropout] @ v``: the full
``[..., L, S]`` score matrix is materialised, written and read back by every pass over it (scale, mask,
softmax, dropout, the matmul with ``v``), where a fused kernel (``F.scaled_dot_product_attention``: flash or
memory-efficient attention on a GPU, the fused CPU kernel on a CPU) keeps the scores on chip.

Read from the CPU ops where the trace links them (a CPU trace; a GPU trace whose kernels name their launching
op): on one thread, among the ops that share a parent (the same call level), a softmax (``aten::softmax`` /
``aten::_softmax`` / ``aten::_safe_softmax``) with a batched matmul (``aten::bmm`` / ``aten::baddbmm`` /
``aten::matmul``, ``q @ k.transpose``) at most ``max_ops_between`` ops before it and another at most
``max_ops_between`` ops after it, no other softmax in between. Where the ops recorded their shapes they must
agree: the first matmul's ``[L, S]`` output is the softmax's input, the softmax's output the second matmul's
left operand, contracted over ``S``, and each matmul's operands have the same rank (two activations, not an
activation and a weight). Ops inside a fused attention op (``aten::scaled_dot_product_attention`` and its
flash / efficient / math kernels, ``_native_multi_head_attention``) are never matched: that attention is
already fused. ``torch.einsum`` attention is not matched (the ``sdpa_attention`` fix does not rewrite it).

On a GPU trace without op links the same pattern is read from kernel names on one stream: a softmax kernel
between two GEMM kernels (names of the matrix family, not attention kernels), at most ``max_ops_between``
other kernels on each side.

The time at stake is the part a fused kernel replaces: the two matmuls, the softmax, and the passes over the
scores between them (scale, mask, dropout, casts, views: ``SCORE_PASSES``): their op time on a CPU trace, their
kernels' time on a GPU trace. It fires when that is at least ``min_share_pct`` of the measured time (CPU: the
steps, else the ops' span; GPU: computation-kernel time). Where the trace recorded the Python stack (or module
scopes) the attentions are named by the ``nn.Module`` that ran them.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass

import numpy as np
import pandas as pd

from workbench.hypotheses.facts import TraceFacts
from workbench.hypotheses.hypothesis import Evidence
from workbench.hypotheses.registry import Limits, rule
from workbench.hypotheses.rules._common import bounded_ms, pct, per_rank_max_us, rows, summed_over
from workbench.hypotheses.words import Finding, Words

SOFTMAX_OPS = frozenset({"aten::softmax", "aten::_softmax", "aten::_safe_softmax"})
SCORE_MATMUL_OPS = frozenset({"aten::bmm", "aten::baddbmm", "aten::matmul"})
# ops that already compute attention fused (their own children, e.g. SDPA's math fallback, are not a finding)
# (namespaced operators only: aten::, xformers::, flash_attn::, ...; never a user's record_function label)
FUSED_ATTENTION_OP = re.compile(r"^\w+::\w*(?:attention|_transformer_encoder_layer)", re.I)
FUSED_ATTENTION_KERNEL = re.compile(r"flash|fmha|attention|attn", re.I)
# the passes over the score matrix between the two matmuls that a fused kernel absorbs (counted in the stake)
SCORE_PASSES = frozenset(
    {
        "aten::div",
        "aten::div_",
        "aten::mul",
        "aten::mul_",
        "aten::add",
        "aten::add_",
        "aten::sub",
        "aten::masked_fill",
        "aten::masked_fill_",
        "aten::where",
        "aten::dropout",
        "aten::native_dropout",
        "aten::feature_dropout",
        "aten::to",
        "aten::_to_copy",
        "aten::type_as",
        "aten::contiguous",
        "aten::clone",
        "aten::view",
        "aten::reshape",
        "aten::_unsafe_view",
        "aten::transpose",
        "aten::permute",
        "aten::expand",
        "aten::unsqueeze",
        "aten::squeeze",
        "aten::as_strided",
    }
)
_INSTANCE = re.compile(r"_\d+$")


def _shapes(text: str) -> list:
    try:
        got = json.loads(text) if text else []
    except ValueError:
        return []
    return got if isinstance(got, list) else []


def _is_dims(x) -> bool:
    return isinstance(x, list) and all(isinstance(d, int) for d in x)


def _operands(name: str, dims: str) -> tuple[list[int], list[int]] | None:
    """The two matrix operands of a score matmul (``baddbmm``: after the bias); None when not recorded."""
    d = _shapes(dims)
    a, b = (d[1:3] if name == "aten::baddbmm" else d[0:2]) if len(d) >= 2 else ([], [])
    if len(d) < (3 if name == "aten::baddbmm" else 2) or not (_is_dims(a) and _is_dims(b)):
        return None
    if len(a) < 2 or len(b) < 2:
        return None
    return a, b


def _consistent(m1: tuple[str, str], s: str, m2: tuple[str, str]) -> bool | None:
    """Whether the shapes say q·kᵀ -> softmax -> ·v (True / False); None where a shape was not recorded."""
    first, second = _operands(*m1), _operands(*m2)
    scores = _shapes(s)
    if first is None or second is None or not scores or not _is_dims(scores[0]) or len(scores[0]) < 2:
        return None
    (qa, kb), (pa, vb) = first, second
    lm, sn = scores[0][-2], scores[0][-1]
    return (
        len(qa) == len(kb)
        and len(pa) == len(vb)
        and (qa[-2], kb[-1]) == (lm, sn)
        and (pa[-2], pa[-1]) == (lm, sn)
        and vb[-2] == sn
    )


def _ancestor_flag(flag: np.ndarray, parent: np.ndarray) -> np.ndarray:
    """Per op: whether any strict ancestor is flagged (pointer walk up the parent chain)."""
    n = len(flag)
    out = np.zeros(n, dtype=bool)
    cur = np.where((parent >= 0) & (parent < n), parent, -1)
    while (cur >= 0).any():
        live = cur >= 0
        out[live] |= flag[cur[live]]
        nxt = np.full(n, -1, dtype=np.int64)
        nxt[live] = parent[cur[live]]
        cur = np.where((nxt >= 0) & (nxt < n) & ~out, nxt, -1)
    return out


def _owner(counted: np.ndarray, parent: np.ndarray) -> np.ndarray:
    """Per op: itself if ``counted`` >= 0, else its nearest ancestor's ``counted`` (match id), else -1."""
    n = len(counted)
    out = counted.copy()
    cur = np.where((out < 0) & (parent >= 0) & (parent < n), parent, -1)
    while (cur >= 0).any():
        live = cur >= 0
        hit = live & (counted[np.maximum(cur, 0)] >= 0)
        out[hit] = counted[cur[hit]]
        nxt = np.where(live & ~hit, parent[np.maximum(cur, 0)], -1)
        cur = np.where((nxt >= 0) & (nxt < n), nxt, -1)
    return out


def _nearest_matmul(
    p: int, step: int, order: np.ndarray, group: np.ndarray, mm: np.ndarray, soft: np.ndarray, max_between: int
) -> tuple[int, list[int]]:
    """From position ``p`` of ``order`` (a softmax), the nearest score matmul at the same level in direction
    ``step`` with at most ``max_between`` ops between (-1 if none, or another softmax comes first), and the
    ops passed on the way."""
    seen: list[int] = []
    q = p + step
    while 0 <= q < len(order) and group[q] == group[p] and len(seen) <= max_between:
        row = int(order[q])
        if mm[row]:
            return row, seen
        if soft[row]:
            return -1, seen
        seen.append(row)
        q += step
    return -1, seen


def op_matches(ops: pd.DataFrame, max_between: int) -> pd.DataFrame:
    """Materialised attentions among CPU ops: one row per softmax with its two matmuls (row positions), the
    score passes counted between them, and whether the shapes were checked."""
    cols = ["rank", "tid", "softmax", "first", "second", "between", "shapes_checked", "scores", "dtype"]
    if ops.empty:
        return pd.DataFrame(columns=cols)
    names = ops["name"].astype(str).to_numpy(dtype=object)
    n = len(names)
    parent = ops["parent"].to_numpy(np.int64) if "parent" in ops else np.full(n, -1, dtype=np.int64)
    is_soft = np.isin(names, list(SOFTMAX_OPS))
    is_mm = np.isin(names, list(SCORE_MATMUL_OPS))
    fused = np.array([bool(FUSED_ATTENTION_OP.search(x)) for x in names], dtype=bool)
    inside = _ancestor_flag(fused | is_soft | is_mm, parent) | fused
    soft = is_soft & ~inside
    mm = is_mm & ~inside
    if not soft.any() or not mm.any():
        return pd.DataFrame(columns=cols)
    dims = ops["input_dims"].astype(str).to_numpy(dtype=object)
    types = ops["input_types"].astype(str).to_numpy(dtype=object)
    tid = pd.factorize(ops["tid"].astype(str))[0]
    rank = ops["rank"].to_numpy(np.int64)
    order = np.lexsort((ops["ts_us"].to_numpy(float), parent, tid, rank))
    pos = np.empty(n, dtype=np.int64)
    pos[order] = np.arange(n)
    key = np.stack([rank[order], tid[order], parent[order]], axis=1)
    same = np.r_[False, (key[1:] == key[:-1]).all(axis=1)]  # same level as the op before it in ``order``
    group = np.cumsum(~same)
    out = []
    for s in np.flatnonzero(soft):
        first, before = _nearest_matmul(int(pos[s]), -1, order, group, mm, soft, max_between)
        second, after = _nearest_matmul(int(pos[s]), +1, order, group, mm, soft, max_between)
        if first < 0 or second < 0:
            continue
        checked = _consistent((names[first], dims[first]), dims[s], (names[second], dims[second]))
        if checked is False:
            continue
        scores = _shapes(dims[s])
        dtype = (re.findall(r'"([^"]*)"', types[s]) or [""])[0]
        out.append(
            {
                "rank": int(rank[s]),
                "tid": str(ops["tid"].iloc[s]),
                "softmax": int(s),
                "first": first,
                "second": second,
                "between": [r for r in before + after if names[r] in SCORE_PASSES],
                "shapes_checked": bool(checked),
                "scores": scores[0] if scores and _is_dims(scores[0]) else [],
                "dtype": dtype,
            }
        )
    return pd.DataFrame(out, columns=cols)


def _kernel_matches(k: pd.DataFrame, max_between: int) -> pd.DataFrame:
    """Materialised attentions among GPU kernels by name on one stream: GEMM, softmax, GEMM."""
    from workbench.hypotheses.gpu_roofline import family_by_name

    cols = ["rank", "first", "second", "kernels", "dur_us"]
    out = []
    for (rank, _), g in k.sort_values("ts_us").groupby(["rank", "stream"], observed=True):
        names = g["name"].astype(str).to_numpy(dtype=object)
        attn = np.array([bool(FUSED_ATTENTION_KERNEL.search(x)) for x in names], dtype=bool)
        gemm = (family_by_name(g["name"]) == "matrix") & ~attn
        soft = np.array(["softmax" in x.lower() for x in names], dtype=bool) & ~attn
        dur = g["dur_us"].to_numpy(float)
        for s in np.flatnonzero(soft):
            i = s - 1
            while i >= 0 and s - i - 1 <= max_between and not gemm[i] and not soft[i]:
                i -= 1
            j = s + 1
            while j < len(names) and j - s - 1 <= max_between and not gemm[j] and not soft[j]:
                j += 1
            if i < 0 or j >= len(names) or not gemm[i] or not gemm[j]:
                continue
            out.append(
                {
                    "rank": int(rank),
                    "first": str(names[i])[:80],
                    "second": str(names[j])[:80],
                    "kernels": j - i + 1,
                    "dur_us": float(dur[i : j + 1].sum()),
                }
            )
    return pd.DataFrame(out, columns=cols)


def _modules(f: TraceFacts, ops: pd.DataFrame, at_rows: np.ndarray) -> np.ndarray:
    """The ``nn.Module`` path enclosing each op of ``at_rows`` ("" where the trace recorded no module scope)."""
    from workbench.analysis.python_stack import MODULE_PREFIX, python_stack

    cols = ["rank", "pid", "tid", "name", "ts_us", "end_us"]
    text = {"pid": str, "tid": str, "name": str}
    parts = []
    calls = f.python_calls
    if len(calls) and set(cols) <= set(calls.columns):
        parts.append(calls[cols].astype(text))
    notes = f.annotations
    if len(notes):
        scopes = notes[notes["name"].astype(str).str.startswith(MODULE_PREFIX).to_numpy()]
        if len(scopes):
            parts.append(scopes[cols].astype(text))
    if not parts or not len(at_rows):
        return np.full(len(at_rows), "", dtype=object)
    stack = python_stack(pd.concat(parts, ignore_index=True))
    if not stack.has_modules:
        return np.full(len(at_rows), "", dtype=object)
    points = ops.iloc[at_rows][["rank", "pid", "tid", "ts_us", "end_us"]].astype({"pid": str, "tid": str})
    at = stack.enclosing(points.reset_index(drop=True))
    module = np.where(at >= 0, stack.module[np.clip(at, 0, None)], -1)
    return np.where(module >= 0, stack.module_path[np.clip(module, 0, None)], "").astype(object)


def _class_of(path: str) -> str:
    last = path.rsplit("/", 1)[-1] if path else ""
    return _INSTANCE.sub("", last)


def _score_bytes(scores: list, dtype: str) -> int:
    from workbench.analysis.work_formulas import DTYPE_BYTES

    return int(np.prod(scores)) * DTYPE_BYTES.get(dtype, 4) if scores else 0


def _measured_us(f: TraceFacts) -> float:
    """The measured time of the busiest rank: its steps, else the span of its events."""
    if not f.steps.empty:
        return float(f.steps.groupby("rank")["dur_us"].sum().max())
    return f.window_us


@dataclass(frozen=True)
class MaterialisedAttentionLimits(Limits):
    """The thresholds of ``materialised_attention``."""

    min_share_pct: float = 5.0
    max_ops_between: int = 8


@dataclass(frozen=True, kw_only=True)
class MaterialisedAttentionFinding(Finding):
    share_pct: float  # the matched attentions' time, of the measured (CPU) or computation-kernel (GPU) time
    n_matches: int  # softmax ops (kernels) between two batched matmuls (GEMM kernels)
    summed_over: str  # how the ranks' times were summed (empty for one rank)
    stake_ms: float  # the matched attentions' time (matmuls, softmax and the passes between them)
    whole_ms: float  # the time the share is of (measured or computation-kernel time)
    module_class: str = ""  # the nn.Module class that ran most of them (part "in_module")
    n_module_calls: int = 0  # how many of them it ran
    largest_scores: str = ""  # the shape of the largest score matrix (part "sized")
    largest_dtype: str = ""  # its dtype
    largest_mib: float = 0.0  # its size in MiB
    n_unchecked: int = 0  # matches whose ops recorded no shapes (note "unchecked")


_TITLE = "Attention materialises its score matrix"
_IN_MODULE = " in {module_class} ({n_module_calls} calls)"
_LARGEST = "; largest score matrix {largest_scores} {largest_dtype} ({largest_mib:,.1f} MiB)"
_OF_WHAT = {"cpu": "the measured time", "gpu": "computation-kernel time"}
_FIXES = ("sdpa_attention", "fused_softmax", "compiled")
_OPS_CONFOUNDERS = (
    "the fused kernel still does the matmuls' arithmetic: the saving is the score matrix's passes through "
    "memory (softmax, scale, mask, dropout) and some matmul time, less than the whole stake",
    "in training the backward of the same attention materialises the scores again; it is not counted here",
)
_CPU_CONFOUNDER = "on a CPU the fused attention kernel gains less than flash attention on a GPU"


def _ops_words(device: str) -> Words:
    """The words of a match among CPU ops on ``device`` ("cpu": a CPU trace, "gpu": its kernels timed); the
    parts name the module that ran it (``in_module``) and the largest score matrix (``sized``) where the trace
    tells them."""
    what = _OF_WHAT[device]
    return Words(
        title=_TITLE + "{in_module}: {share_pct:.0f}% of " + what,
        observed="{n_matches} softmax ops between two batched matmuls (q·kᵀ, then ·v){summed_over}, "
        "{stake_ms:.2f} ms with the passes over the scores between them, of {whole_ms:.2f} ms " + what + "{sized}",
        mechanism="Attention written as softmax(q @ k.transpose) @ v materialises the whole [L, S] score matrix: "
        "the first matmul writes it, the scale / mask / softmax / dropout each read and write it again, and the "
        "matmul with v reads it once more. A fused attention kernel (flash or memory-efficient attention) tiles "
        "q, k and v and keeps the scores on chip, never writing them out.",
        predicted_effect="F.scaled_dot_product_attention (the sdpa_attention fix rewrites the module) computes "
        "these ops in one fused kernel: the score matrix's passes through memory go, so this time falls "
        "(by more at long sequence lengths, where the score matrix is large)",
        falsifier="apply sdpa_attention (or call F.scaled_dot_product_attention) and re-time: if the attention's "
        "time does not fall, the materialised scores were not the cost (short sequences, where they fit in cache)",
        confounders=_OPS_CONFOUNDERS + ((_CPU_CONFOUNDER,) if device == "cpu" else ()),
        notes={
            "unchecked": "{n_unchecked} of {n_matches} matches recorded no shapes: matched by op order only "
            "(profile with record_shapes=True to check q·kᵀ -> softmax -> ·v)",
            "fused_elsewhere": "the trace also runs fused attention (scaled_dot_product_attention / flash / "
            "efficient) elsewhere",
        },
        suggested_variants=_FIXES,
        parts={"in_module": _IN_MODULE, "sized": _LARGEST},
    )


# a match among ops: "cpu" / "gpu" (where its time was measured; parts "in_module" where the trace names the
# module that ran it, "sized" where the ops recorded the score matrix's shape); "kernels": matched by kernel
# names alone
WORDS = {device: _ops_words(device) for device in ("cpu", "gpu")}
WORDS["kernels"] = Words(
    title=_TITLE + ": {share_pct:.0f}% of computation-kernel time",
    observed="{n_matches} softmax kernels between two GEMM kernels on one stream{summed_over}, "
    "{stake_ms:.2f} ms of {whole_ms:.2f} ms computation-kernel time",
    mechanism="Attention written as softmax(q @ k.transpose) @ v materialises the whole [L, S] score matrix: "
    "a GEMM writes it, the softmax and the passes around it read and write it again, and a second GEMM reads "
    "it once more. A fused attention kernel (flash or memory-efficient attention) keeps the scores on chip.",
    predicted_effect="F.scaled_dot_product_attention (the sdpa_attention fix) runs these kernels as one fused "
    "attention kernel: the score matrix's passes through memory go, so this time falls",
    falsifier="apply sdpa_attention (or call F.scaled_dot_product_attention) and re-time: if these kernels' "
    "time does not fall, the materialised scores were not the cost",
    confounders=(
        "matched by kernel names only (the trace links no kernel to its op): a softmax between two unrelated "
        "GEMMs matches too",
        "the fused kernel still does the matmuls' arithmetic: the saving is less than the whole stake",
    ),
    notes={"fused_elsewhere": "the trace also runs fused attention kernels elsewhere"},
    suggested_variants=_FIXES,
)


@rule(
    "materialised_attention",
    category="memory_bound",
    scope="trace",
    limits=MaterialisedAttentionLimits,
    finding=MaterialisedAttentionFinding,
    words=WORDS,
)
def materialised_attention(f: TraceFacts, limits: MaterialisedAttentionLimits) -> MaterialisedAttentionFinding | None:
    """Attention computed by hand (softmax between two batched matmuls): the full score matrix is materialised."""
    max_between = int(limits.max_ops_between)
    ops = f.cpu_ops
    linked = f.has_gpu and "op_index" in f.kernels and bool((f.kernels["op_index"].to_numpy() >= 0).any())
    if f.has_gpu and not linked:
        return _from_kernels(f, limits, max_between)
    f.require_cpu_ops()
    found = op_matches(ops, max_between)
    if found.empty:
        return None
    n = len(ops)
    counted = np.full(n, -1, dtype=np.int64)
    for i, m in enumerate(found.itertuples()):
        for r in (m.first, m.softmax, m.second, *m.between):
            if counted[r] < 0:  # an op two matches share (a chain of attentions) is counted once
                counted[r] = i
    if f.has_gpu:  # the kernels the matched ops (and their children) launched
        parent = ops["parent"].to_numpy(np.int64)
        owner = _owner(counted, parent)
        k = f.kernels[(f.kernels["kind"] == "kernel") & (f.kernels["kernel_type"] == "computation")]
        idx = k["op_index"].to_numpy(np.int64)
        of = np.where((idx >= 0) & (idx < n), owner[np.clip(idx, 0, n - 1)], -1)
        per_match = np.bincount(of[of >= 0], weights=k["dur_us"].to_numpy(float)[of >= 0], minlength=len(found))
        whole_df = k
    else:
        mine = counted >= 0
        per_match = np.bincount(counted[mine], weights=ops["dur_us"].to_numpy(float)[mine], minlength=len(found))
        whole_df = None
    found = found.assign(stake_us=per_match)
    found = found[found["stake_us"] > 0]
    if found.empty:
        return None
    stake_us = per_rank_max_us(found, "stake_us")
    whole = per_rank_max_us(whole_df) if whole_df is not None else _measured_us(f)
    share = pct(stake_us, whole)
    if share < limits.min_share_pct:
        return None
    found = found.assign(module=_modules(f, ops, found["softmax"].to_numpy(np.int64)))
    return _finding(f, limits, found, stake_us, whole, share, ops)


def _finding(
    f, limits: MaterialisedAttentionLimits, found, stake_us, whole, share, ops
) -> MaterialisedAttentionFinding:
    names = ops["name"].astype(str).to_numpy(dtype=object)
    dims = ops["input_dims"].astype(str).to_numpy(dtype=object)
    table = found.assign(
        score_matmul=[f"{names[r]} {dims[r]}" for r in found["first"]],
        scores=[str(s) for s in found["scores"]],
        score_bytes=[_score_bytes(s, d) for s, d in zip(found["scores"], found["dtype"])],
        where=[m or "(no module scope)" for m in found["module"]],
    )
    by = table.groupby(["where", "score_matmul", "scores", "dtype"], as_index=False).agg(
        n=("stake_us", "size"), stake_us=("stake_us", "sum"), score_bytes=("score_bytes", "max")
    )
    classes = Counter(_class_of(m) for m in found["module"] if m)
    top_class, top_n = classes.most_common(1)[0] if classes else ("", 0)
    biggest = table.loc[table["score_bytes"].idxmax()] if table["score_bytes"].max() > 0 else None
    unchecked = int((~found["shapes_checked"].astype(bool)).sum())
    fused_elsewhere = int(
        sum(bool(FUSED_ATTENTION_OP.search(x)) for x in ops["name"].astype(str).unique())
        + (
            sum(bool(FUSED_ATTENTION_KERNEL.search(x)) for x in f.kernels["name"].astype(str).unique())
            if f.has_gpu
            else 0
        )
    )
    evidence = [
        Evidence(
            "materialised_attention_pct",
            share,
            "%",
            limits.min_share_pct,
            ">=",
            source="cpu_ops (softmax between two batched matmuls, same thread and level)"
            + (" -> kernels (op_index)" if f.has_gpu else ""),
            rows=rows(by, ["where", "score_matmul", "scores", "dtype", "n", "stake_us"], by="stake_us"),
        )
    ]
    if biggest is not None:
        evidence.append(
            Evidence(
                "score_matrix_bytes",
                float(biggest["score_bytes"]),
                "bytes",
                source="cpu_ops (the softmax's input shape and dtype)",
                rows=({"scores": biggest["scores"], "dtype": biggest["dtype"], "where": biggest["where"]},),
            )
        )
    return MaterialisedAttentionFinding(
        branch="gpu" if f.has_gpu else "cpu",
        share_pct=share,
        n_matches=len(found),
        summed_over=summed_over(found),
        stake_ms=stake_us / 1e3,
        whole_ms=whole / 1e3,
        module_class=top_class,
        n_module_calls=top_n,
        largest_scores=biggest["scores"] if biggest is not None else "",
        largest_dtype=biggest["dtype"] if biggest is not None else "",
        largest_mib=float(biggest["score_bytes"]) / 2**20 if biggest is not None else 0.0,
        n_unchecked=unchecked,
        evidence=tuple(evidence),
        time_at_stake_ms=bounded_ms(stake_us, f.window_us),
        notes=(("unchecked",) if unchecked else ()) + (("fused_elsewhere",) if fused_elsewhere else ()),
        parts=(("in_module",) if top_class else ()) + (("sized",) if biggest is not None else ()),
        confidence="low" if unchecked else "medium",
        scope=f"nn.Module {top_class}" if top_class else ("all ranks" if f.has_gpu else "host threads"),
    )


def _from_kernels(
    f: TraceFacts, limits: MaterialisedAttentionLimits, max_between: int
) -> MaterialisedAttentionFinding | None:
    """A GPU trace without op links: GEMM, softmax, GEMM kernels in a row on one stream."""
    k = f.kernels[(f.kernels["kind"] == "kernel") & (f.kernels["kernel_type"] == "computation")]
    found = _kernel_matches(k, max_between)
    if found.empty:
        return None
    stake_us = per_rank_max_us(found)
    whole = per_rank_max_us(k)
    share = pct(stake_us, whole)
    if share < limits.min_share_pct:
        return None
    by = found.groupby(["first", "second"], as_index=False).agg(
        n=("dur_us", "size"), kernels=("kernels", "max"), dur_us=("dur_us", "sum")
    )
    fused = sum(bool(FUSED_ATTENTION_KERNEL.search(x)) for x in k["name"].astype(str).unique())
    return MaterialisedAttentionFinding(
        branch="kernels",
        share_pct=share,
        n_matches=len(found),
        summed_over=summed_over(found),
        stake_ms=stake_us / 1e3,
        whole_ms=whole / 1e3,
        evidence=(
            Evidence(
                "materialised_attention_pct",
                share,
                "%",
                limits.min_share_pct,
                ">=",
                source="kernels by name (GEMM, softmax, GEMM on one stream; no op links in the trace)",
                rows=rows(by, ["first", "second", "kernels", "n", "dur_us"], by="dur_us"),
            ),
        ),
        time_at_stake_ms=bounded_ms(stake_us, f.window_us),
        notes=("fused_elsewhere",) if fused else (),
        confidence="low",
        scope="all ranks",
    )
