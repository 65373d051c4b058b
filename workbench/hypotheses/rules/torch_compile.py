"""Rules over torch.compile diagnostics: graph breaks, recompiles, eager fallback, cudagraph skips.

The diagnostics come from the capture layer (``run.compile``), object or dict, with fields
``graph_count``, ``graph_break_count``, ``break_reasons``, ``recompile_count``,
``steady_recompile_count``, ``recompile_reasons``, ``recompile_limit_hit``, ``compile_time_ms``,
``steady_compile_time_ms``, ``cudagraph_skip_reasons``, ``fallback_kernels``, and the facts that
do not depend on when the compile happened (``graphs_per_call``, ``breaks_per_call``,
``structure_source``: read from the trace's compiled regions or dynamo's cache, so a function
compiled before the profile shows its graphs and breaks too; ``graph_breaks`` entries then carry
their ``source``). A field that is absent was not recorded.

Recompilation is compiles that repeat in the steady state (after the first call). The first call
compiles every frame it reaches, resume functions after graph breaks included, and may recompile
one of them within that call: one-time costs of the cold call, never counted as recompiles.
Diagnostics without the first-call split (``steady_recompile_count`` absent: older runs,
hand-written dicts) count every recompile logged.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import product

from workbench.hypotheses.fact_types import CompileFacts
from workbench.hypotheses.hypothesis import Evidence
from workbench.hypotheses.registry import Limits, NotJudged, rule
from workbench.hypotheses.run_facts import RunFacts
from workbench.hypotheses.words import Finding, Words


def _break_reasons(diag: CompileFacts) -> list[str]:
    """Reasons from capture's ``graph_breaks`` records (reason, location), or a plain list."""
    found = [b.reason + (f" at {b.location}" if b.location else "") for b in diag.graph_breaks]
    return found or list(diag.break_reasons)


def _reasons_in_words(diag: CompileFacts, reasons: list[str]) -> str:
    """Each distinct reason once, with the places it breaks at (file name and line)."""
    places: dict[str, list[str]] = {}
    for b in diag.graph_breaks:
        at = places.setdefault(b.reason, [])
        if b.location and b.location.rsplit("/", 1)[-1] not in at:
            at.append(b.location.rsplit("/", 1)[-1])
    if not places:
        places = {r: [] for r in reasons}
    return "; ".join(r[:120] + (f" (at {', '.join(at[:3])})" if at else "") for r, at in list(places.items())[:3])


def _break_sources(diag: CompileFacts) -> set[str]:
    return {b.source for b in diag.graph_breaks}


# (words a break reason holds, the fix it suggests): the usual breaks and their usual cures
_FIXES = (
    (
        ("item()", "capture_scalar_outputs"),
        "move the .item() out of the compiled function (keep the value a tensor), or set "
        "torch._dynamo.config.capture_scalar_outputs = True",
    ),
    (("`print`", "print(", "logging"), "move the print()/logging call out of the compiled function"),
    (
        ("data-dependent control flow", "data-dependent branching", "generic_jump"),
        "replace the Python branch on a tensor's value with torch.where or torch.cond",
    ),
    (
        ("Dynamic shape operator", "dynamic_output_shape", "nonzero"),
        "avoid ops whose output shape depends on data (boolean masks, nonzero), or set "
        "torch._dynamo.config.capture_dynamic_output_shape_ops = True",
    ),
)
_FULLGRAPH = "compile with fullgraph=True to make dynamo raise at each break it meets"


def break_fixes(reasons: list[str]) -> list[str]:
    """Fixes the break reasons suggest, the fullgraph=True search last."""
    fixes = [fix for words, fix in _FIXES if any(w in r for r in reasons for w in words)]
    return list(dict.fromkeys(fixes)) + [_FULLGRAPH]


def graphs_per_call(diag: CompileFacts) -> int | None:
    """Graphs a call runs as, read from the traced pass's compiled regions; None where not read."""
    if diag.structure_source != "trace":
        return None
    value = diag.graphs_per_call
    return max(1, round(float(value))) if value else None


def _recompile_reasons(diag: CompileFacts, steady_only: bool = False) -> list[str]:
    found = []
    for r in diag.recompiles:
        if r.text:  # an older record's entry, a plain text
            found.append(r.text)
            continue
        if steady_only and r.on_first_call:
            continue
        found.append(f"{r.function}: {'; '.join(r.guard_failures) or 'reason not recorded'}")
    return found or list(diag.recompile_reasons)


def steady_recompiles(diag: CompileFacts) -> int:
    """Compiles repeated after the first call; every recompile logged where the split is absent."""
    steady = diag.steady_recompile_count
    return int(steady if steady is not None else diag.recompile_count)


def first_recompiles(diag: CompileFacts) -> int:
    """Recompiles logged inside the first call (0 where the split is absent)."""
    return sum(1 for r in diag.recompiles if not r.text and r.on_first_call)


def steady_compile_ms(diag: CompileFacts) -> float | None:
    """Compile time after the first call, None where the split is absent."""
    return diag.steady_compile_time_ms


def break_compile_ms(f: RunFacts) -> float:
    """Compile time owed to graph breaks: each break adds a graph (and a resume function) to compile,
    so of the graphs compiled on the first call, all but one are the breaks' doing. The first call's
    compile time is the total less the steady state's where the split is recorded, else the total
    shared evenly with each steady-state recompile."""
    diag = f.compile_record
    if diag is None:
        return 0.0
    n_breaks = diag.graph_break_count
    compile_ms = diag.compile_time_ms
    if n_breaks <= 0 or compile_ms <= 0:
        return 0.0
    steady_ms = steady_compile_ms(diag)
    if steady_ms is not None:
        first_compile_ms = max(0.0, compile_ms - steady_ms)
    else:
        first_compile_ms = compile_ms / (steady_recompiles(diag) + 1)
    return first_compile_ms * n_breaks / (n_breaks + 1)


def _median(f: RunFacts) -> float:
    return f.require_timing().median_ms


NOT_RECORDED = "not recorded"  # the reason a finding names where the diagnostics recorded none


def _branch(*parts: str) -> str:
    """The name of the branch where each of a rule's independent choices of words took the part named: the
    words hold one block per combination (``Words`` has no clause that shows only sometimes but its notes)."""
    return "/".join(parts)


@dataclass(frozen=True)
class GraphBreaksLimits(Limits):
    """The thresholds of ``graph_breaks``."""

    min_breaks: int = 1


@dataclass(frozen=True, kw_only=True)
class GraphBreaksFinding(Finding):
    n_breaks: int  # graph breaks logged
    n_graphs: int  # graphs a call runs as (per_call) or graphs compiled (total)
    reasons_said: str = ""  # each distinct break reason once, with its places (empty: none recorded)
    fixes_said: str  # the fixes the reasons suggest, joined with "; or "
    first_fix: str  # the first of them
    extra_compile_ms: float  # compile time owed to the breaks (one-time)
    one_time_basis: str  # how a one-time cost is ranked, in words (RunFacts.one_time_basis)


# the graph_breaks words: one block per (how the graphs were counted, whether reasons were recorded, where the
# breaks were found, whether the breaks cost compile time)
_GRAPH_BREAKS_TITLE = {
    "per_call": "torch.compile runs the function as {n_graphs} graphs per call",
    "total": "torch.compile breaks the function into {n_graphs} graphs",
}
_GRAPH_BREAKS_COUNTED = {
    "per_call": "runs as {n_graphs} graphs per call: {n_breaks} graph break(s)",
    "total": "{n_breaks} graph break(s), {n_graphs} graph(s)",
}
_GRAPH_BREAKS_REASONS = {"reasons": "; reasons: {reasons_said}", "no_reason": "; reason: not recorded"}
_GRAPH_BREAKS_FOUND = {
    "trace": "; found in the traced pass's compiled regions (they count whenever the function was compiled, "
    "before the profile too)",
    "dynamo_cache": "; found in dynamo's cache for the function (compiled before the profile)",
    "profile": "",
}
_GRAPH_BREAKS_COMPILE = {
    "compile_cost": "; the extra graphs' {extra_compile_ms:.3g} ms of compilation is one-time, {one_time_basis}",
    "no_compile_cost": "",
}
GRAPH_BREAKS_WORDS = {
    _branch(counted, reasons, found, compiled): Words(
        title=_GRAPH_BREAKS_TITLE[counted],
        observed=_GRAPH_BREAKS_COUNTED[counted]
        + _GRAPH_BREAKS_REASONS[reasons]
        + _GRAPH_BREAKS_FOUND[found]
        + "; fixing the break: {fixes_said}"
        + _GRAPH_BREAKS_COMPILE[compiled],
        mechanism="At each break dynamo returns to Python: the code between graphs runs eagerly, "
        "and fusion cannot cross the break.",
        predicted_effect="fixing the break ({first_fix}) leaves fewer graphs; removing them all (fullgraph=True "
        "passes) fuses across them; the gain is at most the eager time between graphs",
        falsifier="compile with fullgraph=True after removing the reported cause: if the time per call does not "
        "drop, the breaks did not cost time (no variant in the registry removes a break: the function is compiled "
        "already, so that experiment is your own rewrite)",
        confounders=("a break around cheap Python costs little", "the compiled graphs may be slower than eager anyway"),
    )
    for counted, reasons, found, compiled in product(
        _GRAPH_BREAKS_TITLE, _GRAPH_BREAKS_REASONS, _GRAPH_BREAKS_FOUND, _GRAPH_BREAKS_COMPILE
    )
}


@rule(
    "graph_breaks",
    category="graph_break",
    scope="run",
    limits=GraphBreaksLimits,
    finding=GraphBreaksFinding,
    words=GRAPH_BREAKS_WORDS,
)
def graph_breaks(f: RunFacts, limits: GraphBreaksLimits) -> GraphBreaksFinding | None:
    """torch.compile split the function into several graphs with eager code between them."""
    diag = f.require_compile()
    n_breaks = diag.graph_break_count
    if n_breaks < limits.min_breaks:
        return None
    per_call = graphs_per_call(diag)
    n_graphs = per_call or diag.graph_count or n_breaks + 1
    reasons = _break_reasons(diag)
    fixes = break_fixes(reasons)
    sources = _break_sources(diag)
    found = "trace" if "trace" in sources else "dynamo_cache" if "dynamo cache" in sources else "profile"
    median = _median(f)
    # Between graphs the code runs eagerly and each graph is a separate call: the share of a
    # call the breaks can cost is bounded by the call itself; spread evenly over the segments.
    # The extra graphs' compile time is a one-time cost, on the one basis every one-time cost is
    # ranked on (the run's expected_calls, else the stated default), as cold start is.
    extra_compile_ms = break_compile_ms(f)
    calls = f.one_time_cost_calls
    stake = median * n_breaks / (n_breaks + 1) + extra_compile_ms / calls
    rows = tuple({"reason": r[:200]} for r in dict.fromkeys(reasons))[:5]
    return GraphBreaksFinding(
        branch=_branch(
            "per_call" if per_call else "total",
            "reasons" if reasons else "no_reason",
            found,
            "compile_cost" if extra_compile_ms > 0 else "no_compile_cost",
        ),
        n_breaks=n_breaks,
        n_graphs=n_graphs,
        reasons_said=_reasons_in_words(diag, reasons) if reasons else "",
        fixes_said="; or ".join(fixes),
        first_fix=fixes[0],
        extra_compile_ms=extra_compile_ms,
        one_time_basis=f.one_time_basis,
        evidence=(
            Evidence("graph_break_count", n_breaks, "breaks", limits.min_breaks, ">=", "run.compile", rows),
            Evidence(
                "graphs_per_call" if per_call else "graph_count",
                n_graphs,
                "graphs",
                source="run.compile (compiled regions per traced call)" if per_call else "run.compile",
                rows=tuple({"fix": fix} for fix in fixes),
            ),
            Evidence(
                "extra_graph_compile_ms",
                extra_compile_ms,
                "ms",
                source="run.compile (compile time x breaks / graphs)",
                rows=({"one_time_cost_calls": calls},),
            ),
        ),
        time_at_stake_ms=stake,
        confidence="high" if reasons else "medium",
        scope="compiled function",
    )


@dataclass(frozen=True)
class RecompilesLimits(Limits):
    """The thresholds of ``recompiles``."""

    min_recompiles: int = 1


@dataclass(frozen=True, kw_only=True)
class RecompilesFinding(Finding):
    n_recompiles: int  # compiles repeated in the steady state
    first_reason: str  # the first steady-state reason, cut to 120 characters (NOT_RECORDED: none)
    n_calls_profiled: int  # every call the profile made (RunFacts.calls_profiled)
    n_first_call: int  # recompiles inside the first call (one-time, not counted)


# the recompiles words: one block per (whether the recompile limit was hit, whether the recompiles' compile time
# is ranked at the rate seen, whether the first call recompiled too)
_RECOMPILES_TITLE = {
    "limit_hit": "torch.compile hit its recompile limit and fell back to eager",
    "recompiled": "torch.compile recompiled {n_recompiles} time(s)",
}
_RECOMPILES_COUNTED = {
    "limit_hit": "{n_recompiles} recompile(s) and the limit was reached; reason: {first_reason}",
    "recompiled": "{n_recompiles} recompile(s); reason: {first_reason}",
}
_RECOMPILES_RATE = {
    "steady_rate": "; not a one-time cost: they recur in the steady state, so their compile time is ranked at the "
    "rate seen ({n_recompiles} in {n_calls_profiled} calls profiled)",
    "no_rate": "",
}
_RECOMPILES_FIRST_CALL = {
    "first_call": "; {n_first_call} more inside the first call, one-time and not counted",
    "no_first_call": "",
}
RECOMPILES_WORDS = {
    _branch(limit, rate, first): Words(
        title=_RECOMPILES_TITLE[limit],
        observed=_RECOMPILES_COUNTED[limit] + _RECOMPILES_RATE[rate] + _RECOMPILES_FIRST_CALL[first],
        mechanism="A guard (shape, dtype, Python value) failed, so dynamo compiled again; each compile costs "
        "compile time, and past the limit the function silently runs eagerly.",
        predicted_effect="marking the changing dimension dynamic (or padding to fixed shapes) leaves one compile; "
        "calls then run compiled",
        falsifier="compile with dynamic=True (or mark_dynamic on the named input): if the count of compiles stays "
        "the same, the guard named is not the cause",
        confounders=(
            "the first compile is expected; only repeats count",
            "a legitimately new input shape needs a compile",
        ),
        # dynamic shapes (and automatic dynamic ints) leave one graph for the changing values: the mechanism
        suggested_variants=("compiled_dynamic",),
    )
    for limit, rate, first in product(_RECOMPILES_TITLE, _RECOMPILES_RATE, _RECOMPILES_FIRST_CALL)
}


@rule(
    "recompiles",
    category="recompilation",
    scope="run",
    limits=RecompilesLimits,
    finding=RecompilesFinding,
    words=RECOMPILES_WORDS,
)
def recompiles(f: RunFacts, limits: RecompilesLimits) -> RecompilesFinding | None:
    """torch.compile recompiled during the steady state (guard failures, changing shapes)."""
    diag = f.require_compile()
    n = steady_recompiles(diag)
    limit_hit = diag.recompile_limit_hit or "recompile_limit" in (diag.note)
    if n < limits.min_recompiles and not limit_hit:
        return None
    reasons = _recompile_reasons(diag, steady_only=True)
    n_first = first_recompiles(diag)
    compile_ms = diag.compile_time_ms
    steady_ms = steady_compile_ms(diag)
    if steady_ms is not None:  # measured after the first call: the steady state's own
        per_compile = steady_ms / n if n and steady_ms > 0 else 0.0
    else:
        per_compile = compile_ms / max(1, n + 1) if compile_ms else 0.0
    # recompiles happen in the steady state: their compile time, per call profiled
    stake = per_compile * n / f.calls_profiled if per_compile and n else _median(f)
    ev = [
        Evidence(
            "recompile_count",
            n,
            "recompiles",
            limits.min_recompiles,
            ">=",
            "run.compile",
            tuple({"reason": r[:200]} for r in dict.fromkeys(reasons))[:5],
        )
    ]
    if limit_hit:
        ev.append(Evidence("recompile_limit_hit", 1, "flag", source="run.compile"))
    return RecompilesFinding(
        branch=_branch(
            "limit_hit" if limit_hit else "recompiled",
            "steady_rate" if per_compile and n else "no_rate",
            "first_call" if n_first else "no_first_call",
        ),
        n_recompiles=n,
        first_reason=reasons[0][:120] if reasons else NOT_RECORDED,
        n_calls_profiled=f.calls_profiled,
        n_first_call=n_first,
        evidence=tuple(ev),
        time_at_stake_ms=stake,
        confidence="high" if reasons or limit_hit else "medium",
        scope="compiled function",
    )


@dataclass(frozen=True)
class CudagraphSkippedLimits(Limits):
    """The thresholds of ``cudagraph_skipped``."""

    min_skips: int = 1


@dataclass(frozen=True, kw_only=True)
class CudagraphSkippedFinding(Finding):
    n_skips: int  # skip reasons inductor recorded
    first_reason: str  # the first of them, cut to 120 characters


CUDAGRAPH_SKIPPED_WORDS = Words(
    title="CUDA graphs were skipped for the compiled function",
    observed="{n_skips} skip reason(s): {first_reason}",
    mechanism="Without the CUDA graph every kernel is launched from the host, paying launch cost per kernel.",
    predicted_effect="removing the skip reason lets the graph replay: launch gaps shrink",
    falsifier="capture with torch.cuda.graphs directly (cuda_graph variant): if it is not faster, launches were not "
    "the cost",
    confounders=("a GPU-bound function gains little from graphs",),
    suggested_variants=("cuda_graph",),
)


@rule(
    "cudagraph_skipped",
    category="launch_overhead",
    scope="run",
    limits=CudagraphSkippedLimits,
    finding=CudagraphSkippedFinding,
    words=CUDAGRAPH_SKIPPED_WORDS,
)
def cudagraph_skipped(f: RunFacts, limits: CudagraphSkippedLimits) -> CudagraphSkippedFinding | None:
    """Inductor wanted CUDA graphs (mode=reduce-overhead) but skipped them, with reasons."""
    diag = f.require_compile()
    reasons = list(diag.cudagraph_skip_reasons)
    if not reasons or len(reasons) < limits.min_skips:
        return None
    return CudagraphSkippedFinding(
        n_skips=len(reasons),
        first_reason=reasons[0][:120],
        evidence=(
            Evidence(
                "cudagraph_skips",
                len(reasons),
                "skips",
                limits.min_skips,
                ">=",
                "run.compile",
                rows=tuple({"reason": r[:200]} for r in reasons[:5]),
            ),
        ),
        time_at_stake_ms=_median(f) / 2,
        confidence="medium",
        scope="compiled function",
    )


@dataclass(frozen=True)
class FallbackKernelsLimits(Limits):
    """The thresholds of ``fallback_kernels``."""

    min_fallback_ops: int = 1


@dataclass(frozen=True, kw_only=True)
class FallbackKernelsFinding(Finding):
    n_ops: int  # fallback ops inductor recorded
    op_names: str  # the distinct ones, joined with ", " and cut to 160 characters


FALLBACK_KERNELS_WORDS = Words(
    title="Inductor fell back to eager kernels for {n_ops} op(s)",
    observed="fallback ops: {op_names}",
    mechanism="A fallback op runs its eager kernel: no fusion with its neighbours, an extra pass over memory.",
    predicted_effect="rewriting the op in lowerable terms lets inductor fuse it",
    falsifier="replace the fallback op with an equivalent lowered op: if the time per call does not drop, the "
    "fallback was cheap",
    confounders=("some fallbacks (matmul, conv) call vendor libraries and are fast",),
    suggested_variants=(),  # rewriting the op is the user's own change: no catalog fix does it
)


@rule(
    "fallback_kernels",
    category="graph_break",
    scope="run",
    limits=FallbackKernelsLimits,
    finding=FallbackKernelsFinding,
    words=FALLBACK_KERNELS_WORDS,
)
def fallback_kernels(f: RunFacts, limits: FallbackKernelsLimits) -> FallbackKernelsFinding | None:
    """Inductor left ops as eager fallback kernels inside the compiled graph."""
    diag = f.require_compile()
    ops = list(diag.fallback_kernels)
    if not ops or len(ops) < limits.min_fallback_ops:
        return None
    return FallbackKernelsFinding(
        n_ops=len(ops),
        op_names=", ".join(dict.fromkeys(ops))[:160],
        evidence=(
            Evidence(
                "fallback_kernel_count",
                len(ops),
                "ops",
                limits.min_fallback_ops,
                ">=",
                "run.compile",
                rows=tuple({"op": o} for o in list(dict.fromkeys(ops))[:5]),
            ),
        ),
        time_at_stake_ms=_median(f) * min(1.0, len(ops) / 10),
        confidence="low",
        scope="compiled function",
    )
