"""What changed between two traces: ``trace_diff(a, b)`` -> a frozen ``TraceDiff``.

Both traces are brought to one basis first: per step when both have steps (``ProfilerStep#N``
annotations, or NVTX ranges an importer marked as steps), only the work launched inside a step
counted and divided by the number of steps; else per run (everything, once), said in ``notes``.

Kernels are matched by name and ops by their place in the call tree (the path of op names from the
root, ``aten::linear > aten::addmm``). Each kernel name (each op path) is in exactly one of
``appeared`` (only in b), ``disappeared`` (only in a), ``changed`` (in both, count or time differs) or
``unchanged``; ``delta_us`` is b - a per step and ``share_pct`` its share of the total change. The
unit of the totals is the kernel when both traces ran GPU kernels, else the op (self time: a CPU-only
trace). ``groups`` is the change by kernel family or op (what the waterfall chart draws), ``temporal``
and ``idle`` the two traces' breakdowns side by side, ``summary`` one sentence ("14 elementwise kernels
replaced by 2 triton kernels; mm unchanged").
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import pandas as pd

from workbench.analysis.result import AnalysisResult

STATUSES = ("appeared", "disappeared", "changed", "unchanged")
TOP_CONTRIBUTORS = 3
MAX_GROUPS = 12  # waterfall bars; the rest are one "other" bar
SAME_US = 1e-6  # per-step time differences below this are no change
PATH_SEP = " > "
COMPILED_OP = re.compile(
    r"Torch-Compiled Region|CompiledFunction|inductor|cpp_fused|triton_|graph_\d+|"
    r"CompiledFxGraph|TorchDynamo",
    re.IGNORECASE,
)
# ops that only move, view or allocate (named apart when a compiled region replaces eager ops)
HELPER_OP = re.compile(
    r"^aten::(?:to|_to_copy|copy_|empty\w*|as_strided|fill_|resolve_conj|resolve_neg|view\w*|"
    r"reshape|expand\w*|t|transpose|permute|contiguous|detach\w*|lift_fresh|clone|unsqueeze|"
    r"squeeze|select|slice|alias|_unsafe_view|zero_|zeros\w*|ones\w*|matmul)$"
)
_FAMILIES = (
    ("triton", re.compile(r"^triton|triton_", re.I)),
    ("nccl", re.compile(r"nccl|rccl", re.I)),
    ("memcpy", re.compile(r"^Memcpy|^dma", re.I)),
    ("memset", re.compile(r"^Memset", re.I)),
    ("attention", re.compile(r"flash|fmha|attention|sdpa", re.I)),
    (
        "mm",
        re.compile(
            r"gemm|nvjet|cutlass|xmma|cublas|matmul|wmma|Cijk|_mm_|sm\d+_.*tensorop|"
            r"aten::(?:mm|addmm|bmm|matmul|linear)\b",
            re.I,
        ),
    ),
    ("conv", re.compile(r"conv|cudnn", re.I)),
    ("softmax", re.compile(r"softmax", re.I)),
    ("norm", re.compile(r"norm", re.I)),
    ("reduce", re.compile(r"reduce|sum_kernel|argmax|cub::", re.I)),
    ("elementwise", re.compile(r"elementwise|vectorized|unrolled|copy_kernel|fill|cat_", re.I)),
)


def family(name: str) -> str:
    """The kind of kernel a name is ("mm", "elementwise", "triton", "nccl", ...; "other")."""
    for label, pattern in _FAMILIES:
        if pattern.search(name):
            return label
    return "other"


@dataclass(frozen=True, eq=False)
class TraceDiff(AnalysisResult):
    """``table``: the unit's rows (``kernels`` for GPU traces, else ``ops``), largest change first.

    ``kernels``: one row per kernel name: status, count_a, count_b, time_a_us, time_b_us (per step),
    delta_us, share_pct, family, op_a / op_b (the op path that launched it most). ``ops``: one row per op
    path: name, status, count, self time and kernel time on each side, delta_us (self time, or kernel
    time for GPU traces), share_pct. ``groups``: delta per family / op, the waterfall's bars.
    ``temporal`` / ``idle``: the two breakdowns side by side per rank (a_ / b_ columns).
    """

    kernels: pd.DataFrame
    copies: pd.DataFrame  # memcpy / memset rows, like ``kernels``, apart from the kernel totals
    ops: pd.DataFrame
    op_names: pd.DataFrame  # the ops matched by name alone (wherever in the call tree they ran)
    groups: pd.DataFrame
    temporal: pd.DataFrame
    idle: pd.DataFrame
    unit: str  # "kernel" or "op"
    basis: str  # "per ProfilerStep", "per NVTX step range", "per run"
    steps_a: float
    steps_b: float
    total_a_us: float
    total_b_us: float
    delta_us: float
    top: tuple[str, ...]  # the largest contributors to the change (names), largest first
    counts: dict  # status -> number of kernel names (unit rows)
    summary: str
    notes: tuple[str, ...]
    label_a: str
    label_b: str
    source_a: str
    source_b: str
    kind: ClassVar[str] = "trace_diff"

    @property
    def delta_pct(self) -> float:
        return 100.0 * self.delta_us / self.total_a_us if self.total_a_us > 0 else float("nan")

    def status(self, status: str) -> pd.DataFrame:
        """The unit rows of one status (``appeared``, ``disappeared``, ``changed``, ``unchanged``)."""
        return self.table[self.table["status"] == status]


# --- steps ---------------------------------------------------------------------------------------
def _steps(trace) -> pd.DataFrame:
    notes = trace.annotations
    if not len(notes):
        return notes.iloc[0:0]
    names = notes["name"].astype(str)
    is_step = (notes["kind"].astype(str) == "step") | names.str.startswith("ProfilerStep#")
    steps = notes[is_step]
    return steps.drop_duplicates(["rank", "name"], keep="first")


def _basis(steps: pd.DataFrame) -> str:
    return (
        "per ProfilerStep" if steps["name"].astype(str).str.startswith("ProfilerStep#").all() else "per NVTX step range"
    )


def _n_steps(steps: pd.DataFrame) -> float:
    return float(steps.groupby("rank").size().max())


def _in_steps(rows: pd.DataFrame, at: np.ndarray, steps: pd.DataFrame) -> np.ndarray:
    """Which rows' time ``at`` falls inside a step of their rank."""
    keep = np.zeros(len(rows), dtype=bool)
    ranks = rows["rank"].to_numpy()
    for rank, s in steps.groupby("rank"):
        mine = ranks == rank
        if not mine.any():
            continue
        start = np.sort(s["ts_us"].to_numpy())
        end = s["end_us"].to_numpy()[np.argsort(s["ts_us"].to_numpy())]
        t = at[mine]
        i = np.searchsorted(start, t, side="right") - 1
        inside = (i >= 0) & (t <= end[np.clip(i, 0, None)])
        keep[np.flatnonzero(mine)] = inside
    return keep


# --- call-tree paths --------------------------------------------------------------------------
def op_paths(ops: pd.DataFrame) -> np.ndarray:
    """Each op's place in the call tree: the names from its root op down to it, joined by " > "."""
    n = len(ops)
    if not n:
        return np.zeros(0, dtype=object)
    names = ops["name"].astype(str).to_numpy(dtype=object)
    parent = ops["parent"].to_numpy()
    depth = ops["depth"].to_numpy()
    path = np.empty(n, dtype=object)
    for level in range(int(depth.max()) + 1):
        at = np.flatnonzero(depth == level)
        if not len(at):
            continue
        up = parent[at]
        has = up >= 0
        out = names[at].copy()
        if has.any():
            out[has] = path[up[has]] + PATH_SEP + names[at][has]
        path[at] = out
    missing = np.array([p is None for p in path])
    path[missing] = names[missing]
    return path


# --- one side --------------------------------------------------------------------------------
@dataclass
class _Side:
    kernels: pd.DataFrame  # name, family, count, time_us, op (most common launching path)
    copies: pd.DataFrame  # the same for memcpy / memset rows
    ops: pd.DataFrame  # path, name, count, self_us, kernel_us
    steps: float
    basis: str | None
    has_gpu: bool


def _by_kernel_name(k: pd.DataFrame, op_path_of: pd.Series, n: float) -> tuple[pd.DataFrame, pd.Series]:
    """GPU rows per name (count and time per step, the op path that launched most of them, the family),
    and their time per launching op path."""
    if not len(k):
        empty = pd.DataFrame(
            {
                "name": pd.Series(dtype=object),
                "count": pd.Series(dtype=float),
                "time_us": pd.Series(dtype=float),
                "op": pd.Series(dtype=object),
                "family": pd.Series(dtype=object),
            }
        )
        return empty, pd.Series(dtype=float)
    index = k["op_index"].to_numpy()
    launch_path = np.where(index >= 0, op_path_of.reindex(index).to_numpy() if len(op_path_of) else "", "")
    launch_path = np.where(pd.isna(launch_path), "", launch_path)
    frame = pd.DataFrame(
        {"name": k["name"].astype(str).to_numpy(), "dur_us": k["dur_us"].to_numpy(), "op": launch_path}
    )
    out = frame.groupby("name", sort=False).agg(count=("dur_us", "size"), time_us=("dur_us", "sum")).reset_index()
    launched = frame[frame["op"] != ""]
    top_op = launched.groupby(["name", "op"]).size().reset_index(name="n")
    top_op = top_op.sort_values("n", ascending=False).drop_duplicates("name").set_index("name")["op"]
    out["op"] = out["name"].map(top_op).fillna("")
    out[["count", "time_us"]] = out[["count", "time_us"]].astype(float) / n
    out["family"] = [family(s) for s in out["name"]]
    return out, launched.groupby("op")["dur_us"].sum() / n


def _side(trace, use_steps: bool) -> _Side:
    steps = _steps(trace)
    k = trace.kernels
    ops = trace.cpu_ops
    n = 1.0
    basis = None
    if use_steps:
        n, basis = _n_steps(steps), _basis(steps)
        launch = k["launch_ts_us"].to_numpy() if len(k) else np.zeros(0)
        at = np.where(np.isfinite(launch), launch, k["ts_us"].to_numpy()) if len(k) else np.zeros(0)
        k = k[_in_steps(k, at, steps)] if len(k) else k
        ops = ops[_in_steps(ops, ops["ts_us"].to_numpy(), steps)] if len(ops) else ops
    paths = op_paths(trace.cpu_ops)
    op_path_of = pd.Series(paths, dtype=object)
    is_kernel = (k["kind"].astype(str) == "kernel").to_numpy() if len(k) else np.zeros(0, dtype=bool)
    kernels, kernel_per_path = _by_kernel_name(k[is_kernel], op_path_of, n)
    copies, _ = _by_kernel_name(k[~is_kernel], op_path_of, n)
    if len(ops):
        kept_paths = op_path_of.reindex(ops.index.to_numpy()).to_numpy() if len(ops) != len(trace.cpu_ops) else paths
        frame = pd.DataFrame(
            {"path": kept_paths, "name": ops["name"].astype(str).to_numpy(), "self_us": ops["self_us"].to_numpy()}
        )
        opt = (
            frame.groupby("path", sort=False)
            .agg(name=("name", "first"), count=("self_us", "size"), self_us=("self_us", "sum"))
            .reset_index()
        )
        opt[["count", "self_us"]] = opt[["count", "self_us"]].astype(float) / n
        opt["kernel_us"] = opt["path"].map(kernel_per_path).fillna(0.0)
    else:
        opt = pd.DataFrame(
            {
                "path": pd.Series(dtype=object),
                "name": pd.Series(dtype=object),
                "count": pd.Series(dtype=float),
                "self_us": pd.Series(dtype=float),
                "kernel_us": pd.Series(dtype=float),
            }
        )
    return _Side(kernels, copies, opt, n, basis, bool(is_kernel.any()))


def _status(count_a: np.ndarray, count_b: np.ndarray, time_a: np.ndarray, time_b: np.ndarray) -> np.ndarray:
    return np.where(
        count_a == 0,
        "appeared",
        np.where(
            count_b == 0,
            "disappeared",
            np.where((np.abs(count_a - count_b) > 1e-9) | (np.abs(time_b - time_a) > SAME_US), "changed", "unchanged"),
        ),
    )


def _match(a: pd.DataFrame, b: pd.DataFrame, key: str, value: str, carry: list[str]) -> pd.DataFrame:
    m = a.merge(b, on=key, how="outer", suffixes=("_a", "_b"))
    for col in ("count", value):
        for side in ("_a", "_b"):
            m[col + side] = m[col + side].fillna(0.0)
    for col in carry:
        if col + "_a" in m:
            m[col] = m[col + "_a"].where(m[col + "_a"].notna(), m[col + "_b"]).fillna("")
    m["status"] = _status(
        m["count_a"].to_numpy(), m["count_b"].to_numpy(), m[value + "_a"].to_numpy(), m[value + "_b"].to_numpy()
    )
    m["delta_us"] = m[value + "_b"] - m[value + "_a"]
    total = float(m["delta_us"].sum())
    m["share_pct"] = 100.0 * m["delta_us"] / total if abs(total) > SAME_US else np.nan
    m = m.reindex(m["delta_us"].abs().sort_values(ascending=False, kind="stable").index)
    return m.reset_index(drop=True)


def _kernels_table(a: _Side, b: _Side, copies: bool = False) -> pd.DataFrame:
    m = _match(a.copies if copies else a.kernels, b.copies if copies else b.kernels, "name", "time_us", ["family"])
    m = m.rename(columns={"time_us_a": "time_a_us", "time_us_b": "time_b_us"})
    for col in ("op_a", "op_b"):  # the op path that launched the kernel most, on each side
        m[col] = m[col].fillna("") if col in m else ""
    cols = [
        "name",
        "status",
        "family",
        "count_a",
        "count_b",
        "time_a_us",
        "time_b_us",
        "delta_us",
        "share_pct",
        "op_a",
        "op_b",
    ]
    return m[cols]


def _ops_table(a: _Side, b: _Side, value: str) -> pd.DataFrame:
    m = _match(a.ops, b.ops, "path", value, ["name"])
    other = "kernel_us" if value == "self_us" else "self_us"
    for side in ("_a", "_b"):
        m[other + side] = m[other + side].fillna(0.0)
    m = m.rename(columns={f"{v}{s}": f"{v[:-3]}_{s[1]}_us" for v in ("self_us", "kernel_us") for s in ("_a", "_b")})
    cols = [
        "path",
        "name",
        "status",
        "count_a",
        "count_b",
        "self_a_us",
        "self_b_us",
        "kernel_a_us",
        "kernel_b_us",
        "delta_us",
        "share_pct",
    ]
    return m[cols]


def _groups(unit_table: pd.DataFrame, by: str) -> pd.DataFrame:
    g = unit_table.groupby(by, sort=False)["delta_us"].sum().reset_index().rename(columns={by: "group"})
    g = g.reindex(g["delta_us"].abs().sort_values(ascending=False, kind="stable").index)
    if len(g) > MAX_GROUPS:
        head, rest = g.iloc[: MAX_GROUPS - 1], g.iloc[MAX_GROUPS - 1 :]
        g = pd.concat(
            [head, pd.DataFrame({"group": [f"other ({len(rest)})"], "delta_us": [rest["delta_us"].sum()]})],
            ignore_index=True,
        )
    total = float(g["delta_us"].sum())
    g["share_pct"] = 100.0 * g["delta_us"] / total if abs(total) > SAME_US else np.nan
    return g.reset_index(drop=True)


def _side_by_side(fa, fb, on: list[str]) -> pd.DataFrame:
    if fa is None and fb is None:
        return pd.DataFrame()
    a = fa if fa is not None else pd.DataFrame(columns=on)
    b = fb if fb is not None else pd.DataFrame(columns=on)
    m = (
        a.add_prefix("a_")
        .rename(columns={f"a_{c}": c for c in on})
        .merge(b.add_prefix("b_").rename(columns={f"b_{c}": c for c in on}), on=on, how="outer")
    )
    return m.sort_values(on).reset_index(drop=True)


def _breakdowns(trace, semantics):
    """(temporal table, idle per rank and category) of one trace; None where it cannot say."""
    from workbench.analysis.idle import idle_breakdown
    from workbench.analysis.temporal import temporal_breakdown
    from workbench.trace.fidelity import missing

    temporal = idle = None
    if len(trace.kernels) and not missing(trace.meta, ("kernels",)):
        temporal = temporal_breakdown(trace, semantics).table
        if not missing(trace.meta, ("kernels.launch_ts_us",)):
            t = idle_breakdown(trace, semantics).table
            idle = t.groupby(["rank", "idle_category"], observed=True)["idle_us"].sum().reset_index()
    return temporal, idle


def _plural(n: int, what: str) -> str:
    return f"{n} {what}{'' if n == 1 else 's'}"


_HASH = re.compile(r"(CompiledFxGraph)\s+\w{16,}")


def _clean(name: str) -> str:
    return _short(_HASH.sub(r"\1", name).strip("# ").strip())


def _by_name(ops: pd.DataFrame) -> pd.DataFrame:
    """The op rows summed per op name (matched by name alone, wherever in the call tree)."""
    if not len(ops):
        return pd.DataFrame(columns=["name", "status", "count_a", "count_b", "self_a_us", "self_b_us", "delta_us"])
    g = ops.groupby("name", sort=False)[["count_a", "count_b", "self_a_us", "self_b_us"]].sum().reset_index()
    g["status"] = _status(
        g["count_a"].to_numpy(), g["count_b"].to_numpy(), g["self_a_us"].to_numpy(), g["self_b_us"].to_numpy()
    )
    g["delta_us"] = g["self_b_us"] - g["self_a_us"]
    return g.reindex(g["delta_us"].abs().sort_values(ascending=False, kind="stable").index).reset_index(drop=True)


def _counted(rows: pd.DataFrame, key: str, count: str, unit: str, limit: int = 3) -> str:
    by = rows.groupby(key)[count].sum().sort_values(ascending=False)
    words = [f"{_count(c)} {_clean(str(k))} {unit}{'' if round(c) == 1 else 's'}" for k, c in by.head(limit).items()]
    return ", ".join(words) + (f" and {len(by) - limit} more kind(s)" if len(by) > limit else "")


def _summary(
    unit: str,
    kernels: pd.DataFrame,
    groups: pd.DataFrame,
    names: pd.DataFrame,
    label_b: str,
    basis: str,
    total_a: float,
    total_b: float,
) -> str:
    """One sentence: what was replaced by what (or fused into what), the largest changes, what stayed."""
    from workbench.units import format_ms

    parts = []
    if unit == "kernel":
        gone, new = kernels[kernels["status"] == "disappeared"], kernels[kernels["status"] == "appeared"]
        if len(gone) and len(new):
            parts.append(
                f"{_counted(gone, 'family', 'count_a', 'kernel')} replaced by "
                f"{_counted(new, 'family', 'count_b', 'kernel')}"
            )
        elif len(gone):
            parts.append(f"{_counted(gone, 'family', 'count_a', 'kernel')} gone")
        elif len(new):
            parts.append(f"{_counted(new, 'family', 'count_b', 'kernel')} new")
        # the families that moved time, apart from those wholly replaced (said above)
        replaced = {f for f, s in kernels.groupby("family")["status"] if set(s) <= {"appeared", "disappeared"}}
        moved = groups[~groups["group"].astype(str).str.startswith("other") & ~groups["group"].isin(replaced)]
        moved = moved[moved["delta_us"].abs() > 0.01 * max(abs(total_b - total_a), SAME_US)].head(3)
        parts += [f"{g} kernels {_delta(d)}" for g, d in zip(moved["group"], moved["delta_us"])]
        fam_a = kernels.groupby("family")["time_a_us"].sum()
        fam_d = kernels.groupby("family")["delta_us"].sum()
        touched = set(gone["family"]) | set(new["family"])
        steady = [f for f in fam_a.index if fam_a[f] > 0 and abs(fam_d[f]) <= 0.02 * fam_a[f] and f not in touched]
        if steady:
            parts.append(f"{', '.join(steady[:3])} unchanged")
    else:
        gone, new = names[names["status"] == "disappeared"], names[names["status"] == "appeared"]
        region = new[new["name"].astype(str).str.contains(COMPILED_OP)]
        if len(gone) and len(region):
            container = next(
                (n for n in region["name"].astype(str) if n.startswith("Torch-Compiled Region")),
                str(region["name"].iloc[0]),
            )
            fused = gone.sort_values("self_a_us", ascending=False)
            helper = fused["name"].astype(str).str.match(HELPER_OP)
            work, helpers = fused[~helper], fused[helper]
            shown = work.head(10)
            parts.append(
                f"fused into {_clean(container)}: "
                + ", ".join(f"{_clean(str(n))} ({_count(c)})" for n, c in zip(shown["name"], shown["count_a"]))
                + (f" and {len(work) - len(shown)} more" if len(work) > len(shown) else "")
                + (f" (and {_plural(len(helpers), 'helper op')}: copies, views, allocations)" if len(helpers) else "")
            )
        elif len(gone) or len(new):
            if len(gone):
                parts.append(f"gone: {_counted(gone, 'name', 'count_a', 'call', 4)}")
            if len(new):
                parts.append(f"new: {_counted(new, 'name', 'count_b', 'call', 4)}")
        kept = names[(names["status"] == "changed") | (names["status"] == "unchanged")]
        kept = kept[kept["self_a_us"] > 0.02 * max(total_a, SAME_US)]
        for _, row in kept.head(2).iterrows():
            steady = abs(row["delta_us"]) <= 0.05 * row["self_a_us"]
            parts.append(f"{_clean(str(row['name']))} " + ("unchanged" if steady else _delta(row["delta_us"])))
    pct = 100.0 * (total_b - total_a) / total_a if total_a > 0 else float("nan")
    head = f"{label_b}: " if label_b else ""
    total = f"{unit} time {format_ms(total_a / 1000)} -> {format_ms(total_b / 1000)} {basis}" + (
        f" ({pct:+.1f} %)" if np.isfinite(pct) else ""
    )
    return head + "; ".join(parts + [total])


def _delta(us: float) -> str:
    from workbench.units import format_ms

    return ("+" if us >= 0 else "-") + format_ms(abs(us) / 1000)


def _count(c: float) -> str:
    return f"{c:.0f}" if abs(c - round(c)) < 0.05 else f"{c:.1f}"


def _short(name: str, n: int = 48) -> str:
    return name if len(name) <= n else name[: n - 1] + "…"


def trace_diff(a, b, *, label_a: str = "a", label_b: str = "b", semantics="workbench") -> TraceDiff:
    """What changed from trace ``a`` to trace ``b`` (two ``TraceData``), per step where both have steps."""
    steps_a, steps_b = _steps(a), _steps(b)
    notes: list[str] = []
    use_steps = bool(len(steps_a)) and bool(len(steps_b))
    if not use_steps:
        if len(steps_a) or len(steps_b):
            which = label_a if len(steps_a) else label_b
            notes.append(
                f"only {which} has step annotations: compared per run (each trace's whole recorded "
                "window, once), not per step"
            )
        else:
            notes.append(
                "neither trace has step annotations (ProfilerStep# or NVTX step ranges): compared per "
                "run, each trace's whole recorded window once; a longer window reads as more time"
            )
    sa, sb = _side(a, use_steps), _side(b, use_steps)
    basis = "per run"
    if use_steps:
        basis = sa.basis if sa.basis and sa.basis == sb.basis else "per step"
    if use_steps:
        notes.append(
            f"{basis}: {sa.steps:g} step(s) in {label_a}, {sb.steps:g} in {label_b}; only the work "
            "launched inside a step is counted"
        )
    kernels = _kernels_table(sa, sb)
    copies = _kernels_table(sa, sb, copies=True)
    if len(copies):
        copy_delta = float(copies["delta_us"].sum())
        notes.append(
            f"copies and sets are apart from the kernel totals: {len(copies)} kind(s), "
            f"{'+' if copy_delta >= 0 else '-'}{abs(copy_delta) / 1000:.3f} ms {basis} (see .copies)"
        )
    unit = "kernel" if sa.has_gpu and sb.has_gpu else "op"
    if sa.has_gpu != sb.has_gpu:
        notes.append(f"only {label_a if sa.has_gpu else label_b} ran GPU kernels: the ops' self time is compared")
    ops = _ops_table(sa, sb, "kernel_us" if unit == "kernel" else "self_us")
    if unit == "kernel":
        table, total_a, total_b = kernels, float(sa.kernels["time_us"].sum()), float(sb.kernels["time_us"].sum())
        groups = _groups(kernels, "family")
    else:
        table, total_a, total_b = ops, float(sa.ops["self_us"].sum()), float(sb.ops["self_us"].sum())
        groups = _groups(ops.assign(group=ops["name"]), "group")
        if not len(ops):
            notes.append("neither trace has CPU ops or kernels to compare")
    for side, trace, label in ((sa, a, label_a), (sb, b, label_b)):
        from workbench.trace.fidelity import missing

        lacking = missing(trace.meta, ("cpu_ops",))
        if lacking:
            notes.append(
                f"{label} ({getattr(trace.meta, 'source', 'kineto')}) has no CPU ops: ops not compared ({lacking[0]})"
            )
    ta, ia = _breakdowns(a, semantics)
    tb, ib = _breakdowns(b, semantics)
    temporal = _side_by_side(ta, tb, ["rank"])
    idle = _side_by_side(ia, ib, ["rank", "idle_category"])
    top = tuple(str(n) for n in (table["name"] if unit == "kernel" else table["path"]).head(TOP_CONTRIBUTORS))
    counts = {s: int((table["status"] == s).sum()) for s in STATUSES}
    names = _by_name(ops)
    summary = _summary(
        unit, kernels, groups, names, label_b if label_b not in ("b", "") else "", basis, total_a, total_b
    )
    return TraceDiff(
        table=table,
        kernels=kernels,
        copies=copies,
        ops=ops,
        op_names=names,
        groups=groups,
        temporal=temporal,
        idle=idle,
        unit=unit,
        basis=basis,
        steps_a=float(sa.steps),
        steps_b=float(sb.steps),
        total_a_us=total_a,
        total_b_us=total_b,
        delta_us=total_b - total_a,
        top=top,
        counts=counts,
        summary=summary,
        notes=tuple(notes),
        label_a=label_a,
        label_b=label_b,
        source_a=getattr(a.meta, "source", "kineto"),
        source_b=getattr(b.meta, "source", "kineto"),
    )
