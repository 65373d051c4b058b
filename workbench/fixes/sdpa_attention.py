"""``sdpa_attention``: attention written by hand, ``softmax(q @ k.transpose(-2, -1) * scale [+ mask]) [dropout]
@ v``, replaced by ``F.scaled_dot_product_attention`` (one fused kernel: flash or memory-efficient attention
on a GPU, no ``[L, S]`` score matrix kept for the backward).

Recognised by matching each module's graph: every module of the user's own classes whose ``forward`` (or a
function it calls by name) mentions softmax is traced with ``torch.fx`` (``symbolic_trace``, with
``math`` functions and torch's factory functions recorded as calls, so ``1 / math.sqrt(k.size(-1))`` and
``torch.ones(T, T)`` trace); in its graph a softmax over the last dimension whose input is ``q @ kT``
(``kT`` a transpose of the last two dimensions; scalar factors on the scores, on ``q`` or on ``k``, times or
divided) with at most one mask (``masked_fill(cond, -inf)`` or ``+ mask``), followed by at most one dropout
and a matmul with ``v``. A module whose forward has data-dependent control flow cannot be traced; its row
says so ("not applicable: <path> cannot be traced: <why>"). A module inside another matched one is matched
itself (the outer one is left as it is).

The transform works on a deep copy of the model (``workbench.fixes.rebind``): the matched module's forward
is replaced by the rewritten graph, calling ``F.scaled_dot_product_attention(q, k, v, attn_mask, dropout_p,
is_causal, scale)``: ``scale`` is the product of the factors found (1.0 where there were none: sdpa's own
default would be 1/sqrt(E)); a mask that is a lower triangle of ones (``torch.tril(torch.ones(T, T))``, a
registered buffer holding one, sliced from its top-left corner, ``torch.triu(ones, 1)`` as the masked part)
becomes ``is_causal=True``; another boolean mask is passed as ``attn_mask = ~cond``; an additive mask as
it is (a boolean one cast to the scores' dtype, as ``+`` did); the dropout's probability is carried over
and applied while the module (an ``nn.Dropout``: that module) is in training mode (sdpa draws its own
dropout mask, so a check with dropout on cannot match eager's draws). Numerical class "reordered".

Not recognised (said as not an attention): ``torch.einsum`` attention, a softmax whose probabilities are
used elsewhere too (returned attention weights), a softmax with a ``dtype``, a scale held in a tensor.
"""

from __future__ import annotations

import contextlib
import inspect
import math
import numbers
import operator
import os
import traceback
import types
import weakref
from dataclasses import dataclass, field
from typing import Any, Iterable

from workbench.capture.cells import source_line
from workbench.fixes.fix import Fix, Site, absent, applies, not_applicable

NAME = "sdpa_attention"
_FACTORIES = ("ones", "zeros", "full", "empty", "arange", "eye", "tensor", "as_tensor")
_MIN_FILL = -1e4  # a masked_fill value at or below this is taken as -inf (exp underflows to 0 in fp32)
_SCALAR_OPS = (
    operator.mul,
    operator.truediv,
    operator.pow,
    operator.floordiv,
    operator.add,
    operator.sub,
    operator.neg,
)
_CASTS = ("float", "half", "bfloat16", "double", "type_as", "to", "type")


# -- tracing ----------------------------------------------------------------------------------------------------
def _library_file(filename: str) -> bool:
    import torch

    torch_dir = os.path.dirname(torch.__file__)
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    return filename.startswith((torch_dir, here)) or filename.startswith("<frozen")


@contextlib.contextmanager
def _factories_recorded():
    """torch's factory functions (``torch.ones(T, T)`` with a traced ``T``) recorded as graph calls while a
    trace runs (put back after; a factory called with no traced argument runs as usual)."""
    import torch
    import torch.fx as fx

    saved: dict[str, Any] = {}
    for name in _FACTORIES:
        orig = getattr(torch, name, None)
        if orig is None:
            continue

        def wrapper(*args, _orig=orig, **kwargs):
            for a in list(args) + list(kwargs.values()):
                if isinstance(a, fx.Proxy):
                    return a.tracer.create_proxy("call_function", _orig, args, kwargs)
            return _orig(*args, **kwargs)

        saved[name] = orig
        setattr(torch, name, wrapper)
    try:
        yield
    finally:
        for name, orig in saved.items():
            setattr(torch, name, orig)


def _tracer():
    import torch.fx as fx

    class Tracer(fx.Tracer):
        def __init__(self) -> None:
            super().__init__(autowrap_modules=(math,))
            self.record_stack_traces = True
            self.proxy_buffer_attributes = True  # self.mask[:, :, :t, :t] with a traced t

        def _filter_traceback_frames(self, summary):  # the user's frames only (the node's source line)
            return traceback.StackSummary.from_list([f for f in summary if not _library_file(f.filename)])

    return Tracer()


def trace_module(module: Any):
    """``module``'s forward as an ``fx.GraphModule`` over it (parameters and submodules shared); raises
    what the trace raised. Arguments that default to None are traced as None (FX checks it at run time)."""
    import torch.fx as fx

    concrete: dict[str, Any] = {}
    try:
        sig = inspect.signature(module.forward)
        concrete = {n: None for n, p in sig.parameters.items() if p.default is None}
    except (TypeError, ValueError):
        pass
    with _factories_recorded():
        graph = _tracer().trace(module, concrete_args=concrete or None)
    return fx.GraphModule(module, graph, class_name=type(module).__name__)


def _why(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text[:200]}" if text else type(exc).__name__


# -- matching ---------------------------------------------------------------------------------------------------
@dataclass
class Match:
    """One attention found in a module's graph."""

    final: Any  # the probabilities @ v node (replaced)
    q: Any
    k: Any
    v: Any
    scales: list[tuple[str, Any]] = field(default_factory=list)  # ("mul" | "div", number or scalar node)
    mask_kind: str = ""  # "" | "causal" | "bool" | "additive"
    mask: Any = None  # the masked_fill condition (bool) or the additive mask
    dropout_p: float = 0.0
    dropout_from: str = ""  # "" | "module" | "functional"
    dropout_target: str = ""  # the nn.Dropout's path in the module
    line: str = ""

    def describe(self) -> str:
        scale = "" if not self.scales else " * scale"
        mask = {"causal": ", causal tril mask", "bool": ", boolean mask", "additive": " + mask", "": ""}[self.mask_kind]
        drop = f", dropout {self.dropout_p:g}" if self.dropout_p else ""
        args = ["is_causal=True"] if self.mask_kind == "causal" else ["attn_mask"] if self.mask_kind else []
        args += ["scale"] if self.scales else ["scale=1.0"]
        if self.dropout_p:
            args.append(f"dropout_p={self.dropout_p:g}")
        where = f"{self.line}: " if self.line else ""
        return f"{where}softmax(q @ k^T{scale}{mask}){drop} @ v -> F.scaled_dot_product_attention({', '.join(args)})"


def _is_node(x: Any) -> bool:
    import torch.fx as fx

    return isinstance(x, fx.Node)


def _calls(n: Any, functions: tuple = (), methods: tuple[str, ...] = ()) -> bool:
    if not _is_node(n):
        return False
    if n.op == "call_function":
        return any(n.target is f for f in functions)
    if n.op == "call_method":
        return n.target in methods
    return False


def _arg(n: Any, i: int, name: str, default: Any = None) -> Any:
    if name in n.kwargs:
        return n.kwargs[name]
    return n.args[i] if len(n.args) > i else default


def _matmul(n: Any) -> bool:
    import torch

    return _calls(n, (operator.matmul, torch.matmul, torch.bmm), ("matmul", "bmm", "__matmul__"))


def _is_scalar(x: Any, depth: int = 0) -> bool:
    """A number, or a node computing one from sizes (``k.size(-1)``, ``x.shape[-1]``, ``math.sqrt``, + - * /)."""
    if isinstance(x, bool):
        return False
    if isinstance(x, numbers.Number):
        return True
    if not _is_node(x) or depth > 12:
        return False
    if x.op == "call_method" and x.target == "size":
        return len(x.args) > 1 or "dim" in x.kwargs
    if x.op == "call_function":
        if x.target is operator.getitem:
            src = x.args[0]
            sized = _is_node(src) and (
                (src.op == "call_function" and src.target is getattr and src.args[1] == "shape")
                or (src.op == "call_method" and src.target == "size" and len(src.args) == 1)
            )
            return sized and isinstance(x.args[1], int)
        if getattr(x.target, "__module__", None) == "math" or x.target in _SCALAR_OPS:
            return all(_is_scalar(a, depth + 1) for a in x.args) and not x.kwargs
    return False


def _strip_casts(n: Any) -> Any:
    while _is_node(n) and n.op == "call_method" and n.target in ("bool", "float", "to", "type_as", "int", "long"):
        n = n.args[0]
    return n


def _strip_scales(n: Any, scales: list[tuple[str, Any]]) -> Any:
    import torch

    while _is_node(n):
        if _calls(n, (operator.mul, torch.mul), ("mul", "__mul__")) and len(n.args) == 2 and not n.kwargs:
            a, b = n.args
            if _is_scalar(b):
                scales.append(("mul", b))
                n = a
                continue
            if _is_scalar(a):
                scales.append(("mul", a))
                n = b
                continue
        if _calls(n, (operator.truediv, torch.div, torch.true_divide), ("div", "truediv", "__truediv__")):
            if len(n.args) == 2 and not n.kwargs and _is_scalar(n.args[1]):
                scales.append(("div", n.args[1]))
                n = n.args[0]
                continue
        break
    return n


def _rank(n: Any, depth: int = 0) -> int | None:
    """The number of dimensions of a node's tensor where the graph says it (a view/reshape/permute)."""
    if not _is_node(n) or depth > 20:
        return None
    if n.op == "call_method" and n.target in ("view", "reshape", "expand", "permute"):
        dims = n.args[1:]
        if len(dims) == 1 and isinstance(dims[0], (tuple, list)):
            dims = dims[0]
        return len(dims) if dims else None
    if n.op == "call_method" and n.target in ("transpose", "contiguous", "float", "half", "to", "type_as", "clone"):
        return _rank(n.args[0], depth + 1)
    if n.op == "call_function" and n.target in (operator.mul, operator.truediv) and n.args:
        return _rank(n.args[0], depth + 1) if _is_node(n.args[0]) else _rank(n.args[1], depth + 1)
    return None


def _untranspose(n: Any) -> Any:
    """``k`` where ``n`` is ``k`` with its last two dimensions swapped, else None."""
    import torch

    if _calls(n, (torch.transpose,), ("transpose", "swapaxes", "swapdims")) and len(n.args) >= 3:
        d0, d1 = n.args[1], n.args[2]
        if isinstance(d0, int) and isinstance(d1, int):
            if {d0, d1} == {-2, -1}:
                return n.args[0]
            r = _rank(n.args[0])
            if r is not None and {d0 % r, d1 % r} == {r - 2, r - 1}:
                return n.args[0]
        return None
    if _calls(n, (torch.permute,), ("permute",)):
        dims = n.args[1:]
        if len(dims) == 1 and isinstance(dims[0], (tuple, list)):
            dims = dims[0]
        dims = list(dims)
        if len(dims) >= 2 and all(isinstance(d, int) for d in dims):
            r = len(dims)
            want = list(range(r - 2)) + [r - 1, r - 2]
            if [d % r for d in dims] == want:
                return n.args[0]
        return None
    if _is_node(n) and n.op == "call_function" and n.target is getattr and n.args[1] == "mT":
        return n.args[0]
    return None


def _ones(n: Any) -> bool:
    import torch

    n = _strip_casts(n)
    if _calls(n, (torch.ones, torch.ones_like), ("new_ones",)):
        return True
    if _calls(n, (torch.full,), ("new_full",)):
        value = _arg(n, 1, "fill_value")
        return value in (1, True)
    # the factory recorded while tracing is the original torch.ones, compared by name as a fallback
    return _is_node(n) and n.op == "call_function" and getattr(n.target, "__name__", "") in ("ones", "ones_like")


def _tensor_attr(root: Any, target: str) -> Any:
    obj = root
    for part in target.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            return None
    return obj


def _tril_buffer(t: Any) -> bool:
    import torch

    if not isinstance(t, torch.Tensor) or t.dim() < 2 or t.shape[-1] != t.shape[-2] or t.numel() > 1 << 26:
        return False
    b = t.detach()
    if b.dtype != torch.bool:
        if not bool(((b == 0) | (b == 1)).all()):
            return False
        b = b != 0
    return bool(torch.equal(b, torch.ones(b.shape[-2:], dtype=torch.bool, device=b.device).tril().expand_as(b)))


def _top_left(index: Any) -> bool:
    items = index if isinstance(index, tuple) else (index,)
    for it in items:
        if it is Ellipsis:
            continue
        if not isinstance(it, slice) or it.start not in (None, 0) or it.step not in (None, 1):
            return False
    return True


def _is_tril(n: Any, root: Any) -> bool:
    import torch

    n = _strip_casts(n)
    if _calls(n, (torch.tril,), ("tril",)):
        return _arg(n, 1, "diagonal", 0) == 0 and _ones(n.args[0])
    if _is_node(n) and n.op == "call_function" and n.target is operator.getitem and _top_left(n.args[1]):
        n = n.args[0]
    if _is_node(n) and n.op == "get_attr":
        return _tril_buffer(_tensor_attr(root, n.target))
    return False


def _causal_condition(cond: Any, root: Any) -> bool:
    """Whether ``masked_fill(cond, -inf)`` masks exactly the positions above the diagonal."""
    import torch

    c = _strip_casts(cond)
    if _calls(c, (operator.invert, torch.logical_not, torch.bitwise_not), ("logical_not", "bitwise_not", "__invert__")):
        return _is_tril(c.args[0], root)
    if _calls(c, (operator.eq, torch.eq), ("eq", "__eq__")) and len(c.args) == 2:
        a, b = c.args
        if b in (0, 0.0, False) and not isinstance(b, type(None)):
            return _is_tril(a, root)
        if a in (0, 0.0, False):
            return _is_tril(b, root)
        return False
    if _calls(c, (torch.triu,), ("triu",)):
        return _arg(c, 1, "diagonal", 0) == 1 and _ones(c.args[0])
    return False


def _single_user(n: Any) -> Any:
    users = list(n.users)
    return users[0] if len(users) == 1 else None


def _through_casts(n: Any) -> Any:
    """The first user of ``n`` past dtype casts used once (``.float()``, ``.type_as(q)``)."""
    while True:
        u = _single_user(n)
        if u is not None and u.op == "call_method" and u.target in _CASTS and u.args[0] is n:
            n = u
            continue
        return n


def _softmax_dim(n: Any, root: Any) -> Any:
    import torch
    import torch.nn.functional as F

    if n.op == "call_module":
        sub = _tensor_attr(root, n.target)
        return getattr(sub, "dim", None) if isinstance(sub, torch.nn.Softmax) else "no"
    if _calls(n, (F.softmax, torch.softmax, getattr(torch.special, "softmax", F.softmax)), ("softmax",)):
        dtype = _arg(n, 3, "dtype") if (n.op == "call_function" and n.target is F.softmax) else _arg(n, 2, "dtype")
        return "dtype" if dtype is not None else _arg(n, 1, "dim")
    return "no"


def match_graph(gm: Any, root: Any) -> tuple[list[Match], list[str]]:
    """The attentions in ``gm``'s graph (``root``: the module traced, for its buffers) and, for each softmax
    that is not one, why not."""
    import torch
    import torch.nn.functional as F

    found: list[Match] = []
    why_not: list[str] = []
    for s in list(gm.graph.nodes):
        dim = _softmax_dim(s, root)
        if dim == "no":
            continue
        line = _line(s)
        at = f" at {line}" if line else ""
        if dim == "dtype":
            why_not.append(f"the softmax{at} casts to a dtype")
            continue
        if dim not in (-1,):
            why_not.append(f"the softmax{at} is over dim={dim!r}, not the last dimension")
            continue
        m = Match(final=None, q=None, k=None, v=None, line=line)
        # after the softmax: [casts] [dropout] [casts] then @ v
        after = _through_casts(s)
        nxt = _single_user(after)
        if nxt is None:
            why_not.append(f"the softmax{at} is used more than once (its probabilities are kept or returned)")
            continue
        if _calls(nxt, (F.dropout,), ()):
            p, training = _arg(nxt, 1, "p", 0.5), _arg(nxt, 2, "training", True)
            if not isinstance(p, numbers.Number) or not isinstance(training, bool):
                why_not.append(f"the dropout after the softmax{at} has a computed probability")
                continue
            m.dropout_p, m.dropout_from = (float(p), "functional") if training else (0.0, "")
            after = _through_casts(nxt)
            nxt = _single_user(after)
        elif (
            nxt is not None and nxt.op == "call_module" and isinstance(_tensor_attr(root, nxt.target), torch.nn.Dropout)
        ):
            m.dropout_p, m.dropout_from, m.dropout_target = (
                float(_tensor_attr(root, nxt.target).p),
                "module",
                nxt.target,
            )
            after = _through_casts(nxt)
            nxt = _single_user(after)
        if nxt is None or not _matmul(nxt) or nxt.args[0] is not after:
            why_not.append(f"the softmax{at} is not followed by a matmul with v")
            continue
        m.final, m.v = nxt, nxt.args[1]
        # before the softmax: [casts] [mask] [scales] q @ kT
        x = s.args[0]
        while _is_node(x) and x.op == "call_method" and x.target in _CASTS:
            x = x.args[0]
        x = _strip_scales(x, m.scales)
        if _calls(x, (torch.masked_fill,), ("masked_fill", "masked_fill_")) and len(x.args) >= 2:
            fill = _arg(x, 2, "value")
            if not isinstance(fill, numbers.Number) or not (fill == -math.inf or fill <= _MIN_FILL):
                why_not.append(f"the mask before the softmax{at} fills {fill!r}, not -inf")
                continue
            m.mask = x.args[1]
            m.mask_kind = "causal" if _causal_condition(m.mask, root) else "bool"
            x = _strip_scales(x.args[0], m.scales)
        elif _calls(x, (operator.add, torch.add), ("add", "__add__")) and len(x.args) == 2 and not x.kwargs:
            a, b = x.args
            probe: list[Any] = []
            if _matmul(_strip_scales(a, probe)) and not _is_scalar(b):
                m.mask, x = b, a
            elif _matmul(_strip_scales(b, [])) and not _is_scalar(a):
                m.mask, x = a, b
            else:
                why_not.append(f"the input of the softmax{at} is a sum without q @ k^T")
                continue
            if m.scales:
                why_not.append(f"the additive mask before the softmax{at} is scaled with the scores")
                continue
            m.mask_kind = "additive"
            x = _strip_scales(x, m.scales)
        if not _matmul(x):
            why_not.append(f"the input of the softmax{at} is not q @ k^T (times a scale)")
            continue
        q = _strip_scales(x.args[0], m.scales)
        k = _untranspose(_strip_scales(x.args[1], m.scales))
        if k is None:
            why_not.append(f"the scores before the softmax{at} are not q @ k.transpose(-2, -1)")
            continue
        m.q, m.k = q, _strip_scales(k, m.scales)
        found.append(m)
    return found, why_not


def _line(node: Any) -> str:
    text = getattr(node, "stack_trace", None) or ""
    frames = [ln.strip() for ln in text.splitlines() if ln.strip().startswith("File ")]
    for frame in reversed(frames):
        # File "/path/x.py", line 12, in forward
        try:
            path = frame.split('"')[1]
            lineno = frame.split(", line ")[1].split(",")[0]
        except IndexError:
            continue
        if not _library_file(path):
            return source_line(path, lineno)
    return ""


# -- the rewrite ------------------------------------------------------------------------------------------------
def _sdpa_call(is_causal: bool, dropout_p: float, training_of: Any):
    """The function the rewritten graph calls: sdpa with this match's causal flag, and its dropout applied
    while ``training_of()`` (a weak reference to the module that decides) is in training mode."""
    import torch.nn.functional as F

    def scaled_dot_product_attention(q, k, v, attn_mask=None, scale=None):
        owner = training_of() if training_of is not None else None
        p = dropout_p if (dropout_p and owner is not None and owner.training) else 0.0
        return F.scaled_dot_product_attention(
            q, k, v, attn_mask=attn_mask, dropout_p=p, is_causal=is_causal, scale=scale
        )

    return scaled_dot_product_attention


def _additive_mask(mask, like):
    """An additive mask as ``scores + mask`` used it (a boolean one adds 0/1, so it is cast, not kept)."""
    return mask if mask.is_floating_point() else mask.to(like.dtype)


def rewrite(gm: Any, owner: Any, matches: list[Match]) -> None:
    """``gm``'s graph with each match's softmax ... @ v replaced by one sdpa call (then recompiled)."""
    import torch

    graph = gm.graph
    for m in matches:
        with graph.inserting_before(m.final):
            scale: Any = 1.0
            numbers_only = all(isinstance(v, numbers.Number) for _, v in m.scales)
            if numbers_only:
                for op, v in m.scales:
                    scale = scale * v if op == "mul" else scale / v
                scale = float(scale)
            else:
                for op, v in m.scales:
                    scale = graph.call_function(operator.mul if op == "mul" else operator.truediv, (scale, v))
            attn_mask = None
            if m.mask_kind == "bool":
                attn_mask = graph.call_function(torch.logical_not, (m.mask,))
            elif m.mask_kind == "additive":
                attn_mask = graph.call_function(_additive_mask, (m.mask, m.q))
            if m.dropout_from == "module":
                ref = weakref.ref(_tensor_attr(owner, m.dropout_target))
            elif m.dropout_from == "functional":
                ref = weakref.ref(owner)
            else:
                ref = None
            fn = _sdpa_call(m.mask_kind == "causal", m.dropout_p, ref)
            call = graph.call_function(fn, (m.q, m.k, m.v), {"attn_mask": attn_mask, "scale": scale})
        m.final.replace_all_uses_with(call)
    graph.eliminate_dead_code()
    graph.lint()
    gm.recompile()


# -- recognising ------------------------------------------------------------------------------------------------
def _mentions_softmax(module: Any) -> bool:
    import torch

    from workbench.fixes.rebind import _code_names

    if type(module).__module__.startswith("torch."):
        return False
    if any(isinstance(c, torch.nn.Softmax) for c in module.children()):
        return True
    for cls in type(module).__mro__:  # the forward and those it may call through super()
        if cls is torch.nn.Module or (cls.__module__ or "").startswith("torch."):
            break
        fwd = cls.__dict__.get("forward")
        if not isinstance(fwd, types.FunctionType):
            continue
        names = _code_names(fwd.__code__)
        if "softmax" in names:
            return True
        g = fwd.__globals__
        if any(
            isinstance(g.get(n), types.FunctionType) and "softmax" in _code_names(g[n].__code__)
            for n in names
            if n != "softmax"
        ):
            return True
    return False


@dataclass
class Scan:
    matched: list[tuple[str, Any, list[Match]]] = field(default_factory=list)  # path, module, matches
    untraceable: list[tuple[str, str]] = field(default_factory=list)  # path, why
    not_attention: list[tuple[str, str]] = field(default_factory=list)  # path, why
    graphs: dict[str, Any] = field(default_factory=dict)  # path -> GraphModule (the transform rewrites these)


def _inside(path: str, other: str) -> bool:
    """Whether ``other`` is a module strictly inside ``path``."""
    return other != path and (path == "" or other.startswith(path + "."))


def scan(modules: Iterable[tuple[str, Any]]) -> Scan:
    """Every candidate module traced and matched; a matched module that holds another matched one is left
    out (the inner one is changed)."""
    out = Scan()
    for path, module in modules:
        if not _mentions_softmax(module):
            continue
        try:
            gm = trace_module(module)
        except Exception as exc:  # noqa: BLE001 - data-dependent control flow, an untraceable call
            out.untraceable.append((path, _why(exc)))
            continue
        found, why_not = match_graph(gm, module)
        if found:
            out.matched.append((path, module, found))
            out.graphs[path] = gm
        elif why_not:
            out.not_attention.append((path, "; ".join(why_not[:2])))
    paths = [p for p, _, _ in out.matched]
    out.matched = [t for t in out.matched if not any(_inside(t[0], o) for o in paths)]
    out.untraceable = [t for t in out.untraceable if not any(_inside(t[0], o) for o in paths)]
    return out


def _scan_of(context: Any) -> Scan:
    cached = getattr(context, "_wb_sdpa_scan", None)
    if cached is None:
        cached = scan(context.modules())
        try:
            object.__setattr__(context, "_wb_sdpa_scan", cached)
        except Exception:  # noqa: BLE001
            pass
    return cached


def _recognise(context: Any):
    if not context.live:
        return absent(NAME, "needs the live code: its modules are matched by tracing them")
    found = _scan_of(context)
    sites = [Site(path or "(model)", "module", m.describe()) for path, _, ms in found.matched for m in ms]
    untraceable = "; ".join(f"{p or '(model)'} cannot be traced: {why}" for p, why in found.untraceable)
    if not sites:
        if untraceable:
            return not_applicable(NAME, untraceable)
        return absent(NAME, "no hand-written attention (softmax(q @ k^T) @ v) in the modules the code reaches")
    from workbench.fixes.rebind import copy_reason, with_hypotheses

    reason = copy_reason(context)
    if reason:
        return not_applicable(NAME, reason, sites)
    n = len(sites)
    why = (
        f"{n} hand-written attention{'s' if n != 1 else ''} (softmax of q @ k^T, then @ v) -> one fused sdpa call each"
    )
    if untraceable:
        why += f" (left as written: {untraceable})"
    return with_hypotheses(applies(NAME, why, sites), context, NAME)


def _transform(fn: Any, context: Any, name: str):
    from workbench.fixes.rebind import swap_variant

    def change(copy: Any) -> list[Site]:
        found = scan(copy.named_modules())
        sites = []
        for path, module, matches in found.matched:
            gm = found.graphs[path]
            rewrite(gm, module, matches)
            module.forward = gm.forward  # the copy's module runs the rewritten graph (same parameters)
            sites += [Site(path or "(model)", "module", m.describe()) for m in matches]
        return sites

    return swap_variant(
        fn,
        context,
        name,
        change,
        description="hand-written attention replaced by F.scaled_dot_product_attention (in a copy of the model)",
        numerical_class="reordered",
        in_place=True,  # wb.fixes.apply: the same rewrite of your model's attention modules (same parameters)
    )


FIXES = (
    Fix(
        NAME,
        "hand-written attention softmax(q @ k^T * scale [+ mask]) [dropout] @ v -> F.scaled_dot_product_attention "
        "(a fused flash / memory-efficient kernel; a tril mask becomes is_causal=True)",
        "module_swap",
        "reordered",
        _transform,
        recognise=_recognise,
        mechanisms=("memory_bound_kernels", "activations_dominate_peak"),
    ),
)
