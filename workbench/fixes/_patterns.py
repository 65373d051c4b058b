"""What the settings and data-movement fixes read in a run: where its matrix work went (CPU ops or GPU
kernels, with dtype and shapes), host-to-device copies, the machine's cores, and the source of the user's
functions (``inspect`` + ``ast``: the calls a fix looks for, through the functions the code calls).

Only reads: numpy/pandas tables of the trace, the live objects' attributes, source text.  Stdlib at
import; torch inside functions.
"""

from __future__ import annotations

import ast
import functools
import inspect
import os
import re
import textwrap
import types
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator

import numpy as np

from workbench.capture.cells import source_line

# -- matrix work in the trace -----------------------------------------------------------------------------------
GEMM_OPS = frozenset(
    {
        "aten::mm",
        "aten::addmm",
        "aten::bmm",
        "aten::baddbmm",
        "aten::addbmm",
        "aten::matmul",
        "aten::linear",
        "aten::_addmm_activation",
    }
)
CONV_WORDS = ("conv", "convolution")
ATTENTION_WORDS = ("scaled_dot_product",)
# a GPU kernel whose own name says GEMM / convolution / attention (when it has no launching op)
MATRIX_KERNEL = re.compile(r"gemm|cutlass|cublas|xmma|implicit_?conv|conv2d|convolve|wgrad|dgrad|fmha|flash", re.I)
TYPE_NAMES = {
    "float": "float32",
    "double": "float64",
    "c10::BFloat16": "bfloat16",
    "c10::Half": "float16",
    "BFloat16": "bfloat16",
    "Half": "float16",
}
# a GPU kernel's element type from its own name, where its launching op recorded no dtype (the leading
# cases of workbench.analysis.kernel_precision, which this layer does not import): first match wins
KERNEL_DTYPES: tuple[tuple[re.Pattern[str], str, bool], ...] = (  # (pattern, dtype, TF32)
    (re.compile(r"bf16|bfloat16", re.I), "bfloat16", False),
    (re.compile(r"(?<![a-z])(?:f16|fp16)(?![a-z0-9])|h\d{3,5}gemm|hgemm|<half|<__half", re.I), "float16", False),
    (re.compile(r"tf32|tensorop_s\d{3,6}(?:gemm|fprop|dgrad|wgrad)", re.I), "float32", True),
    (re.compile(r"sgemm|scudnn|gcgemm|_simt_s|<float\b|(?<![a-z])(?:f32|fp32)(?![a-z0-9])", re.I), "float32", False),
)
# A cast is one pass over an operand (read 4 bytes, write 2); a matmul uses each operand element min(M, N)
# times.  On a CPU core (tens of FLOP per byte at the ridge) the per-call casts autocast adds cost about what
# bf16 saves when that reuse is below ~100; at 128 they cost under half of it.
AUTOCAST_MIN_REUSE = 128


def is_conv_op(name: str) -> bool:
    return name.startswith("aten::") and any(w in name for w in CONV_WORDS)


def is_matrix_op(name: str) -> bool:
    """A GEMM, convolution or attention op (its backward op too: ``aten::convolution_backward``)."""
    return name in GEMM_OPS or is_conv_op(name) or any(w in name for w in ATTENTION_WORDS)


def op_dtype(input_types: Any) -> str:
    """The dtype of an op's first tensor input from the trace's ``input_types`` ("" when unknown)."""
    for t in re.findall(r'"([^"]*)"', str(input_types or "")):
        if t in TYPE_NAMES:
            return TYPE_NAMES[t]
    return ""


def kernel_dtype(name: str) -> tuple[str, bool]:
    """(element type a GPU kernel's name states or "", whether it says TF32)."""
    for pattern, dtype, tf32 in KERNEL_DTYPES:
        if pattern.search(name):
            return dtype, tf32
    return "", False


def parse_dims(text: Any) -> list[list[int]]:
    return [[int(x) for x in re.findall(r"-?\d+", grp)] for grp in re.findall(r"\[([^\[\]]*)\]", str(text or ""))]


def reuse(name: str, dims_text: Any) -> int | None:
    """How many times a matrix op uses each element of its operands (min of M and N for a GEMM; of the
    output positions and the filter size for a convolution); None where the shapes do not say."""
    d = [x for x in parse_dims(dims_text)]
    try:
        if name == "aten::linear":  # input [..., K], weight [N, K]
            m = int(np.prod(d[0][:-1])) if len(d[0]) > 1 else 1
            return min(m, d[1][0])
        if name in ("aten::addmm", "aten::baddbmm", "aten::addbmm", "aten::_addmm_activation"):  # bias, a, b
            return min(d[1][-2] if len(d[1]) > 1 else 1, d[2][-1])
        if name in ("aten::mm", "aten::bmm", "aten::matmul"):
            m = d[0][-2] if len(d[0]) > 1 else 1
            n = d[1][-1] if len(d[1]) > 1 else 1
            return min(m, n)
        if is_conv_op(name) and len(d) >= 2 and len(d[0]) >= 3 and len(d[1]) >= 3:
            positions = d[0][0] * int(np.prod(d[0][2:]))  # N x spatial
            taps = d[1][0] * int(np.prod(d[1][2:]))  # out channels x kernel size
            return min(positions, taps)
    except (IndexError, ValueError):
        return None
    return None


@dataclass
class MatrixTime:
    """Where a traced run's time went: ``total_us`` of op time (CPU run: the top-level ops) or of
    computation-kernel time (GPU run), and one row per top-level matrix op (or its kernels' time on a GPU):
    op name, input dims, dtype, time, reuse, kernel names."""

    device: str  # "cpu" or "cuda"
    total_us: float
    rows: list[dict[str, Any]] = field(default_factory=list)
    calls: int = 1

    def us(self, *, dtype: str | None = None, gemm_only: bool = False, min_reuse: int = 0, exclude_tf32=False) -> float:
        total = 0.0
        for r in self.rows:
            if dtype is not None and r["dtype"] != dtype:
                continue
            if gemm_only and r["kind"] != "gemm":
                continue
            if min_reuse and r["reuse"] is not None and r["reuse"] < min_reuse:
                continue
            if exclude_tf32 and r.get("tf32"):
                continue
            total += r["us"]
        return total

    def share(self, **kw: Any) -> float:
        return 100.0 * self.us(**kw) / self.total_us if self.total_us > 0 else 0.0

    def per_call_ms(self, **kw: Any) -> float:
        return self.us(**kw) / 1e3 / max(1, self.calls)

    def top(self, n: int = 3, **kw: Any) -> str:
        """The largest matrix ops in words: ``aten::mm [384,384]x[384,384] (float32, 1.2 ms)``."""
        by: dict[tuple[str, str, str], float] = {}
        for r in self.rows:
            if kw.get("dtype") is not None and r["dtype"] != kw["dtype"]:
                continue
            key = (r["op"], _short_dims(r["dims"]), r["dtype"] or "dtype unknown")
            by[key] = by.get(key, 0.0) + r["us"]
        best = sorted(by.items(), key=lambda kv: -kv[1])[:n]
        shown = []
        for (op, dims, dt), us in best:
            label = " ".join(x for x in (op, dims) if x)
            about = (
                f"{us / 1e3 / max(1, self.calls):.3g} ms"
                if kw.get("dtype")
                else f"{dt}, {us / 1e3 / max(1, self.calls):.3g} ms"
            )
            shown.append(f"{label} ({about})")
        return ", ".join(shown)


def _short_dims(text: Any) -> str:
    dims = [d for d in parse_dims(text) if d]
    return "x".join("[" + ",".join(str(x) for x in d) + "]" for d in dims[:3])


def _calls(context: Any) -> int:
    run = getattr(context, "run", None)
    for attr in ("trace_repeat", "traced_calls"):
        try:
            n = int(getattr(run, attr, 0) or 0)
        except (TypeError, ValueError):
            n = 0
        if n > 0:
            return n
    return 1


def _tree(ops: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(names, is_matrix, top matrix ancestor index or -1, depth) per CPU op row; a row inside a matrix op
    points at the outermost matrix op above it (or itself)."""
    names = ops["name"].astype(str).to_numpy()
    n = len(names)
    uniq = {u: is_matrix_op(u) for u in set(names)}
    is_mat = np.fromiter((uniq[x] for x in names), dtype=bool, count=n)
    parent = ops["parent"].to_numpy(np.int64) if "parent" in ops else np.full(n, -1)
    depth = ops["depth"].to_numpy(np.int64) if "depth" in ops else np.zeros(n, np.int64)
    anc = np.full(n, -1, dtype=np.int64)
    order = np.argsort(depth, kind="stable")
    for i in order:  # parents come before their children (lower depth)
        p = parent[i]
        inherited = anc[p] if 0 <= p < n else -1
        anc[i] = inherited if inherited >= 0 else (i if is_mat[i] else -1)
    return names, is_mat, anc, depth


def matrix_time(context: Any) -> MatrixTime | None:
    """The run's matrix work (``MatrixTime``), None without a trace with ops."""
    trace = getattr(context, "trace", None)
    if trace is None:
        return None
    try:
        ops = trace.cpu_ops
    except Exception:  # noqa: BLE001 - a trace without the table
        return None
    if ops is None or len(ops) == 0 or "name" not in ops:
        return None
    ops = ops.reset_index(drop=True)
    names, is_mat, anc, depth = _tree(ops)
    dims = ops["input_dims"].astype(str).to_numpy() if "input_dims" in ops else np.full(len(ops), "")
    types_ = ops["input_types"].astype(str).to_numpy() if "input_types" in ops else np.full(len(ops), "")
    dur = ops["dur_us"].to_numpy(np.float64)
    calls = _calls(context)

    def row(i: int, us: float, kernel: str = "") -> dict[str, Any]:
        name = names[i]
        dtype, tf32 = op_dtype(types_[i]), False
        if kernel:
            by_name, tf32 = kernel_dtype(kernel)
            dtype = dtype or by_name
        return {
            "op": name,
            "dims": dims[i],
            "dtype": dtype,
            "us": us,
            "reuse": reuse(name, dims[i]),
            "kind": "gemm" if name in GEMM_OPS else "conv" if is_conv_op(name) else "attention",
            "tf32": tf32,
        }

    kernels = _computation_kernels(trace)
    if kernels is not None and len(kernels):
        total = float(kernels["dur_us"].sum())
        op_index = kernels["op_index"].to_numpy(np.int64) if "op_index" in kernels else np.full(len(kernels), -1)
        knames = kernels["name"].astype(str).to_numpy()
        kdur = kernels["dur_us"].to_numpy(np.float64)
        out = MatrixTime("cuda", total, calls=calls)
        for j in range(len(kernels)):
            i = op_index[j]
            top = anc[i] if 0 <= i < len(anc) else -1
            if top >= 0:
                out.rows.append(row(int(top), float(kdur[j]), knames[j]))
            elif MATRIX_KERNEL.search(knames[j]):
                dtype, tf32 = kernel_dtype(knames[j])
                kind = "conv" if re.search(r"conv|fprop|dgrad|wgrad", knames[j], re.I) else "gemm"
                out.rows.append(
                    {"op": knames[j][:60], "dims": "", "dtype": dtype, "us": float(kdur[j]), "reuse": None,
                     "kind": kind, "tf32": tf32}
                )  # fmt: skip
        return out
    top_level = depth == 0
    out = MatrixTime("cpu", float(dur[top_level].sum()), calls=calls)
    for i in np.flatnonzero(anc == np.arange(len(anc))):
        out.rows.append(row(int(i), float(dur[i])))
    return out


def _computation_kernels(trace: Any) -> Any:
    try:
        k = trace.kernels
    except Exception:  # noqa: BLE001
        return None
    if k is None or len(k) == 0 or "kind" not in k:
        return None
    k = k[k["kind"].astype(str) == "kernel"]
    if "kernel_type" in k:
        k = k[k["kernel_type"].astype(str) == "computation"]
    return k


def ran_convolutions(context: Any) -> int:
    """How many convolution ops (forward or backward) the traced pass ran."""
    return sum(n for name, n in context.op_counts.items() if is_conv_op(name))


def host_to_device_copies(context: Any) -> Any:
    """The trace's host-to-device memcpy rows (empty frame or None without GPU activity)."""
    trace = getattr(context, "trace", None)
    if trace is None:
        return None
    try:
        k = trace.kernels
    except Exception:  # noqa: BLE001
        return None
    if k is None or len(k) == 0 or "kind" not in k:
        return None
    copies = k[k["kind"].astype(str) == "memcpy"]
    return copies[copies["name"].astype(str).str.contains("HtoD")]


def compute_capability(context: Any) -> tuple[int, int] | None:
    """The run's GPU compute capability (trace device properties, else this machine's GPU), or None."""
    trace = getattr(context, "trace", None)
    try:
        props = [p for entries in trace.meta.device_properties.values() for p in entries] if trace is not None else []
    except Exception:  # noqa: BLE001
        props = []
    majors = [(int(p.get("computeMajor", 0) or 0), int(p.get("computeMinor", 0) or 0)) for p in props]
    majors = [m for m in majors if m[0] > 0]
    if majors:
        return max(majors)
    try:
        import torch

        if torch.cuda.is_available():
            return tuple(torch.cuda.get_device_capability())  # type: ignore[return-value]
    except Exception:  # noqa: BLE001
        pass
    return None


# -- the machine's cores ----------------------------------------------------------------------------------------
def usable_cpus() -> list[int]:
    try:
        return sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return list(range(os.cpu_count() or 1))


def physical_cores(cpus: Iterable[int] | None = None) -> int | None:
    """Physical cores among ``cpus`` (default: this process's affinity), from the kernel's topology; None
    where it cannot be read."""
    seen: set[tuple[str, str]] = set()
    for c in usable_cpus() if cpus is None else cpus:
        base = f"/sys/devices/system/cpu/cpu{c}/topology"
        try:
            with open(f"{base}/core_id") as f1, open(f"{base}/physical_package_id") as f2:
                seen.add((f2.read().strip(), f1.read().strip()))
        except OSError:
            return None
    return len(seen) or None


# -- the user's functions and their source ------------------------------------------------------------------------
_LIBRARY_PREFIXES = (
    "torch",
    "numpy",
    "pandas",
    "builtins",
    "functools",
    "typing",
    "collections",
    "IPython",
    "ipykernel",
    "workbench.",
)


def _is_user_function(obj: Any) -> bool:
    if not isinstance(obj, types.FunctionType):
        return False
    mod = getattr(obj, "__module__", "") or ""
    return not mod.startswith(_LIBRARY_PREFIXES) and mod != "workbench"


def _code_names(code: types.CodeType, depth: int = 0) -> list[str]:
    names = list(code.co_names)
    if depth < 6:
        for const in code.co_consts:
            if isinstance(const, types.CodeType):
                names += _code_names(const, depth + 1)
    return list(dict.fromkeys(names))


def root_function(fn: Any) -> tuple[types.FunctionType | None, Any]:
    """(the plain function behind ``fn``, the ``self`` it is bound to or None): a bound method's function,
    a ``functools.partial``'s, a wrapper's ``__wrapped__``, a user's module's ``forward``; None where there
    is no Python function."""
    seen = 0
    obj = fn
    while seen < 8:
        seen += 1
        if isinstance(obj, types.MethodType):
            return (obj.__func__ if isinstance(obj.__func__, types.FunctionType) else None), obj.__self__
        if isinstance(obj, functools.partial):
            obj = obj.func
            continue
        inner = getattr(obj, "_torchdynamo_orig_callable", None) or getattr(obj, "__wrapped__", None)
        if inner is not None and inner is not obj:
            obj = inner
            continue
        if isinstance(obj, types.FunctionType):
            return obj, None
        forward = getattr(type(obj), "forward", None)
        if isinstance(forward, types.FunctionType) and type(obj).__module__.split(".")[0] != "torch":
            return forward, obj  # a user's nn.Module called directly: its forward
        return None, None
    return None, None


def user_functions(fn: Any, max_depth: int = 4) -> list[types.FunctionType]:
    """``fn``'s own function and the user's functions it reaches (closure cells, the globals its code names,
    defaults, bound methods of what it holds), nearest first; library functions are not entered."""
    root, _ = root_function(fn)
    out: list[types.FunctionType] = []
    seen: set[int] = set()
    frontier: list[Any] = [root] if root is not None else []
    for _ in range(max_depth + 1):
        nxt: list[Any] = []
        for f in frontier:
            if f is None or id(f) in seen:
                continue
            seen.add(id(f))
            if isinstance(f, types.MethodType):
                f = f.__func__
            if isinstance(f, functools.partial):
                nxt.append(f.func)
                continue
            if not isinstance(f, types.FunctionType) or (out and not _is_user_function(f)):
                continue
            out.append(f)
            for cell in f.__closure__ or ():
                try:
                    nxt.append(cell.cell_contents)
                except ValueError:
                    pass
            g = f.__globals__
            nxt += [g[n] for n in _code_names(f.__code__) if n in g]
            nxt += list(f.__defaults__ or ())
        frontier = [x for x in nxt if isinstance(x, (types.FunctionType, types.MethodType, functools.partial))]
    return out


@dataclass
class Source:
    """One function's source: its ``ast`` (the ``def`` itself), file and first line."""

    fn: types.FunctionType
    tree: ast.FunctionDef | ast.AsyncFunctionDef
    filename: str
    firstline: int

    def where(self, node: ast.AST) -> str:
        line = self.firstline + getattr(node, "lineno", 1) - 1
        return source_line(self.filename, line)


@functools.lru_cache(maxsize=256)
def _parse(code: types.CodeType) -> tuple[ast.AST | None, str, int]:
    try:
        lines, first = inspect.getsourcelines(code)
    except (OSError, TypeError):
        return None, "", 0
    text = textwrap.dedent("".join(lines))
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return None, "", 0
    return tree, code.co_filename, first


def source_of(fn: types.FunctionType) -> Source | None:
    """The source of ``fn`` (a ``def``; a lambda has none here), None where it cannot be read."""
    if not isinstance(fn, types.FunctionType) or fn.__name__ == "<lambda>":
        return None
    tree, filename, first = _parse(fn.__code__)
    if tree is None:
        return None
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == fn.__name__:
            return Source(fn, node, filename, first)
    return None


def lambda_source(fn: types.FunctionType) -> ast.AST | None:
    """The parsed line(s) a lambda was written on (for looking at its calls), None where not readable."""
    if not isinstance(fn, types.FunctionType):
        return None
    tree, _, _ = _parse(fn.__code__)
    return tree


def calls(tree: ast.AST) -> Iterator[ast.Call]:
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            yield node


def call_name(call: ast.Call) -> str:
    """``torch.no_grad`` for ``torch.no_grad()``, ``.backward`` for ``x.backward()`` (a method on an
    expression), ``f`` for ``f()``."""
    f = call.func
    if isinstance(f, ast.Name):
        return f.id
    if isinstance(f, ast.Attribute):
        parts = [f.attr]
        v = f.value
        while isinstance(v, ast.Attribute):
            parts.append(v.attr)
            v = v.value
        if isinstance(v, ast.Name):
            parts.append(v.id)
            return ".".join(reversed(parts))
        return "." + ".".join(reversed(parts))
    return ""


def code_sources(fn: Any) -> tuple[list[Source], list[types.FunctionType]]:
    """(sources read, functions whose source could not be read) of ``fn`` and the user functions it reaches."""
    found, unread = [], []
    for f in user_functions(fn):
        src = source_of(f)
        if src is not None:
            found.append(src)
        else:
            unread.append(f)
    return found, unread


def any_call(sources: Iterable[Source], predicate: Callable[[str, ast.Call], bool]) -> list[tuple[Source, ast.Call]]:
    out = []
    for src in sources:
        for c in calls(src.tree):
            if predicate(call_name(c), c):
                out.append((src, c))
    return out


# -- the objects the code reaches ---------------------------------------------------------------------------------
def reached_tensors(context: Any) -> dict[str, Any]:
    """Plain tensors (no gradient) the code reads by name: the reach's ``data`` where it keeps them, else the
    closure cells and globals of the user's functions."""
    data = getattr(context.reach, "data", None)
    if isinstance(data, dict) and data:
        return dict(data)
    import torch

    out: dict[str, Any] = {}
    if context.fn is None:
        return out
    for f in user_functions(context.fn):
        named = list(zip(f.__code__.co_freevars, f.__closure__ or ()))
        for name, cell in named:
            try:
                v = cell.cell_contents
            except ValueError:
                continue
            if isinstance(v, torch.Tensor) and not v.requires_grad:
                out.setdefault(name, v)
        g = f.__globals__
        for name in _code_names(f.__code__):
            v = g.get(name)
            if isinstance(v, torch.Tensor) and not v.requires_grad:
                out.setdefault(name, v)
    return out


def run_setting(context: Any, key: str, default: Any = None) -> Any:
    run = getattr(context, "run", None)
    settings = getattr(run, "settings", None) or {}
    return settings.get(key, default) if isinstance(settings, dict) else default


def stake(hyps: list[Any]) -> float:
    return max((float(getattr(h, "time_at_stake_ms", 0.0) or 0.0) for h in hyps), default=0.0)


def titles(hyps: list[Any]) -> tuple[str, ...]:
    return tuple(str(getattr(h, "title", "")) for h in hyps)
