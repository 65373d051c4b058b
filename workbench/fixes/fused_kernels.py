"""The project's own fused Triton kernels (``workbench.kernels``) swapped into the user's code, one fix each:

=============================  ==============================================================================
``fused_layer_norm``           every ``nn.LayerNorm`` over one dimension -> ``TritonLayerNorm`` (copy of the model)
``fused_rms_norm``             every ``nn.RMSNorm`` over one dimension -> ``TritonRMSNorm`` (copy of the model)
``fused_softmax``              every ``nn.Softmax`` module -> ``TritonSoftmax`` (copy of the model)
``fused_bias_gelu``            ``Linear(bias=True)`` then ``nn.GELU`` in an ``nn.Sequential`` -> the GEMM without
                               its bias, then the bias add and GELU in one kernel (copy of the model; the Linear
                               keeps its weight and bias, by name, and the GELU becomes ``nn.Identity``)
``fused_cross_entropy``        ``F.cross_entropy(logits, targets)`` in the user's code (through ``F`` or the
                               function imported by name) and ``nn.CrossEntropyLoss`` objects -> the chunked
                               Triton cross-entropy (no ``[N, V]`` log-softmax kept); the model is not copied
``fused_linear_cross_entropy`` a model whose output is its Linear head's (found by tracing its forward), when
                               the code calls cross-entropy -> the head returns deferred logits and
                               cross-entropy on them runs ``linear_cross_entropy`` (never the ``[N, V]`` logits)
=============================  ==============================================================================

Each needs triton (``requires=("triton",)``); on a machine without a GPU the kernels run only under
``TRITON_INTERPRET=1`` (set before triton is imported): without it each row says "not applicable: " and the
kernels registry's reason (``workbench.kernels.registry.missing_reason()``); with it they apply and run, for
correctness only (``timing_meaningful=False``: the interpreter's times say nothing about speed). Numerical
class "reordered" (fp32 accumulation in another order).

How the cross-entropy fixes are recognised, honestly: the call is found by name in the code the callable
reaches (the line where ``cross_entropy`` is looked up), and the trace's ops (``aten::cross_entropy_loss``,
``aten::nll_loss*``) where there is a run; its arguments are not traced. A call the kernel does not cover
(a class ``weight``, ``label_smoothing``, class dimension not last, a device the kernels do not run on) runs
``F.cross_entropy`` as before. For the linear form the head's output is deferred: ``view``/``reshape``/
``flatten`` and the size queries keep it deferred, cross-entropy over its rows takes the fused path, and any
other use computes the logits as the head would have (correct, with no gain).
"""

from __future__ import annotations

import dis
import os
import types
from typing import Any, Callable

from workbench.capture.cells import source_line
from workbench.fixes.fix import Fix, Site, absent, applies, not_applicable

_INTERPRETED_NOTE = "under TRITON_INTERPRET=1 on CPU: checked for correctness, its times mean nothing"


def _kernels_reason() -> str | None:
    """None where the kernels run here (a GPU, or the interpreter), else the registry's reason."""
    from workbench.kernels import registry

    reason = registry.missing_reason()
    return None if reason in (None, registry.CPU_ONLY) else reason


def _interpreted() -> bool:
    from workbench.kernels import registry

    return registry.missing_reason() == registry.CPU_ONLY


def _strip(reason: str) -> str:
    return reason[len("not applicable: ") :] if reason.startswith("not applicable: ") else reason


def _row(name: str, context: Any, sites: list[Site], why: str, *, needs_copy: bool = True):
    """The row of a kernel fix whose pattern was found at ``sites``."""
    reason = _kernels_reason() or _device_reason(context)
    if reason is not None:
        return not_applicable(name, reason, sites)
    from workbench.fixes.rebind import copy_reason, with_hypotheses

    if needs_copy:
        problem = copy_reason(context)
        if problem:
            return not_applicable(name, problem, sites)
    if _interpreted():
        why += f" ({_INTERPRETED_NOTE})"
    return with_hypotheses(applies(name, why, sites), context, name)


def _device_reason(context: Any) -> str | None:
    """Why the kernels cannot run on this model's tensors (a CPU model on a GPU machine), or None."""
    if _interpreted():
        return None  # the interpreter runs them on CPU tensors
    for _, top in context.reach.modules:
        p = next(iter(top.parameters()), None)
        if p is not None and not p.is_cuda:
            return f"the model's parameters are on {p.device}: the Triton kernels run on CUDA tensors (move it with .cuda())"
    return None


def _variant_options(**kw: Any) -> dict[str, Any]:
    out = dict(kw)
    out["timing_meaningful"] = not _interpreted()
    reason = _kernels_reason()
    out["not_applicable_reason"] = _strip(reason) if reason else None
    return out


# -- module swaps: LayerNorm, RMSNorm, Softmax ------------------------------------------------------------------
def _norm_sites(context: Any, kind: str) -> list[Site]:
    import torch

    sites = []
    rms = getattr(torch.nn, "RMSNorm", None)
    for path, m in context.modules():
        if kind == "layer_norm" and type(m) is torch.nn.LayerNorm and len(m.normalized_shape) == 1:
            sites.append(Site(path or "(model)", "module", f"LayerNorm({m.normalized_shape[0]}) -> TritonLayerNorm"))
        elif kind == "rms_norm" and rms is not None and type(m) is rms and len(m.normalized_shape) == 1:
            sites.append(Site(path or "(model)", "module", f"RMSNorm({m.normalized_shape[0]}) -> TritonRMSNorm"))
        elif kind == "softmax" and type(m) is torch.nn.Softmax:
            if m.dim is None:
                continue  # the implicit dim of nn.Softmax(dim=None) is not the last one in general
            sites.append(Site(path or "(model)", "module", f"Softmax(dim={m.dim}) -> TritonSoftmax"))
    return sites


def _swap_fix(name: str, kind: str, label: str, changes: str, mechanisms: tuple[str, ...]) -> Fix:
    def recognise(context: Any):
        if not context.live:
            return absent(name, "needs the live code: the modules are found in what it reaches")
        sites = _norm_sites(context, kind)
        if not sites:
            return absent(name, f"no {label} module in the models the code reaches")
        n = len(sites)
        return _row(name, context, sites, f"{n} {label} module{'s' if n != 1 else ''} -> the fused Triton kernel")

    def transform(fn: Any, context: Any, variant_name: str):
        from workbench.fixes.rebind import swap_variant

        def change(copy: Any):
            from workbench.kernels.swap import swap_modules

            new, swaps = swap_modules(copy, (kind,), inplace=True)
            return new, [Site(s.path or "(model)", "module", f"{s.replaced} -> {s.by}") for s in swaps]

        return swap_variant(
            fn,
            context,
            variant_name,
            change,
            description=f"{label} modules swapped for the Triton kernel's module (in a copy of the model)",
            kind="kernel",
            requires=("triton",),
            in_place=True,  # wb.fixes.apply: the modules swapped in your model, keeping their parameters
            **_variant_options(),
        )

    return Fix(
        name,
        changes,
        "kernel",
        "reordered",
        transform,
        recognise=recognise,
        requires=("triton",),
        mechanisms=mechanisms,
    )


# -- bias + GELU ------------------------------------------------------------------------------------------------
_BIAS_GELU: list[type] = []


def linear_bias_gelu_class() -> type:
    """``nn.Linear`` whose bias add and GELU (the module after it) run in one Triton kernel after the GEMM;
    the same parameters (weight, bias) under the same names."""
    if not _BIAS_GELU:
        import torch
        import torch.nn.functional as F

        class LinearBiasGELU(torch.nn.Linear):
            approximate = "none"

            def forward(self, x):
                from workbench.kernels.bias_gelu import bias_gelu

                return bias_gelu(F.linear(x, self.weight), self.bias, self.approximate)

            def extra_repr(self) -> str:
                return super().extra_repr() + f", then bias + GELU(approximate={self.approximate!r}) fused"

        _BIAS_GELU.append(LinearBiasGELU)
    return _BIAS_GELU[0]


def _bias_gelu_pairs(modules) -> list[tuple[str, Any, str, Any, str]]:
    """(sequential path, sequential, linear's name, linear, gelu's name) for each Linear(bias) -> GELU."""
    import torch

    out = []
    for path, seq in modules:
        if not isinstance(seq, torch.nn.Sequential):
            continue
        kids = list(seq.named_children())
        for (n1, a), (n2, b) in zip(kids, kids[1:]):
            if type(a) is torch.nn.Linear and a.bias is not None and type(b) is torch.nn.GELU:
                out.append((path, seq, n1, a, n2))
    return out


def _bias_gelu_recognise(context: Any):
    name = "fused_bias_gelu"
    if not context.live:
        return absent(name, "needs the live code: the modules are found in what it reaches")
    pairs = _bias_gelu_pairs(context.modules())
    if not pairs:
        return absent(name, "no Linear(bias=True) followed by nn.GELU in an nn.Sequential")
    sites = [
        Site(
            f"{p}.{n1}" if p else n1,
            "module",
            f"Linear({lin.in_features}, {lin.out_features}) + GELU -> GEMM, then bias + GELU in one kernel",
        )
        for p, _, n1, lin, _ in pairs
    ]
    n = len(sites)
    return _row(name, context, sites, f"{n} Linear -> GELU pair{'s' if n != 1 else ''}: bias add and GELU fused")


def _bias_gelu_transform(fn: Any, context: Any, variant_name: str):
    import torch

    from workbench.fixes.rebind import swap_variant

    cls = linear_bias_gelu_class()

    def change(copy: Any):
        sites = []
        for path, seq, n1, lin, n2 in _bias_gelu_pairs(copy.named_modules()):
            gelu = getattr(seq, n2)
            lin.__class__ = cls
            lin.approximate = getattr(gelu, "approximate", "none")
            setattr(seq, n2, torch.nn.Identity())
            where = f"{path}.{n1}" if path else n1
            sites.append(Site(where, "module", "Linear + GELU -> Linear(GEMM) + fused bias-GELU kernel"))
        return sites

    return swap_variant(
        fn,
        context,
        variant_name,
        change,
        description="the bias add and GELU after a Linear in one Triton kernel (in a copy of the model)",
        kind="kernel",
        requires=("triton",),
        in_place=True,
        **_variant_options(),
    )


# -- cross-entropy: where the code calls it ---------------------------------------------------------------------
def _reached_functions(fn: Any) -> list[types.FunctionType]:
    from workbench.fixes.rebind import _Rebinder

    walker = _Rebinder({}, 8, [])
    walker._walk(fn)
    return [o for o in walker.objects.values() if isinstance(o, types.FunctionType)]


def _lines_of(code: types.CodeType, attr: str, depth: int = 0) -> list[int]:
    out = []
    for ins in dis.get_instructions(code):
        if ins.argval == attr and ins.opname in ("LOAD_ATTR", "LOAD_METHOD", "LOAD_GLOBAL", "LOAD_NAME", "LOAD_DEREF"):
            line = ins.positions.lineno if getattr(ins, "positions", None) else None
            if line:
                out.append(line)
    if depth < 4:
        for const in code.co_consts:
            if isinstance(const, types.CodeType):
                out += _lines_of(const, attr, depth + 1)
    return out


class CrossEntropyCalls:
    """Where the code calls cross-entropy: the ``torch.nn.functional`` objects it names it through, the
    function itself bound to a name, ``nn.CrossEntropyLoss`` objects, and the source lines."""

    def __init__(self) -> None:
        self.functional: list[Any] = []  # torch.nn.functional, under whatever name
        self.functions: list[Any] = []  # F.cross_entropy itself, imported by name
        self.losses: list[tuple[str, Any]] = []  # (path, nn.CrossEntropyLoss)
        self.lines: list[str] = []

    @property
    def found(self) -> bool:
        return bool(self.functional or self.functions or self.losses)


def cross_entropy_calls(context: Any) -> CrossEntropyCalls:
    cached = getattr(context, "_wb_ce_calls", None)
    if cached is not None:
        return cached
    import torch
    import torch.nn.functional as F

    out = CrossEntropyCalls()
    for f in _reached_functions(context.fn) if context.fn is not None else []:
        from workbench.fixes.rebind import _code_names

        names = _code_names(f.__code__)
        g = f.__globals__
        hit = False
        if "cross_entropy" in names:
            for n in names:
                if g.get(n) is F and all(x is not F for x in out.functional):
                    out.functional.append(F)
                    hit = True
                elif g.get(n) is F:
                    hit = True
            if g.get("cross_entropy") is F.cross_entropy:
                if all(x is not F.cross_entropy for x in out.functions):
                    out.functions.append(F.cross_entropy)
                hit = True
        for cell in f.__closure__ or ():
            try:
                if cell.cell_contents is F.cross_entropy:
                    hit = True
                    if all(x is not F.cross_entropy for x in out.functions):
                        out.functions.append(F.cross_entropy)
            except ValueError:
                pass
        if hit:
            out.lines += [
                source_line(f.__code__.co_filename, ln) for ln in dict.fromkeys(_lines_of(f.__code__, "cross_entropy"))
            ]
    for path, m in context.modules():
        if isinstance(m, torch.nn.CrossEntropyLoss):
            out.losses.append((path, m))
    try:
        object.__setattr__(context, "_wb_ce_calls", out)
    except Exception:  # noqa: BLE001
        pass
    return out


def _trace_evidence(context: Any) -> str:
    n = context.ran("aten::cross_entropy_loss")
    m = context.ran("aten::nll_loss_nd", "aten::nll_loss", "aten::nll_loss2d")
    if n or m:
        return f"; the trace ran aten::cross_entropy_loss {n}x, aten::nll_loss* {m}x"
    return ""


def fused_cross_entropy_function(original: Callable[..., Any] | None = None) -> Callable[..., Any]:
    """``F.cross_entropy``'s signature; the Triton kernel where it covers the call, else the original."""
    import torch
    import torch.nn.functional as F

    original = original or F.cross_entropy

    def cross_entropy(
        input,
        target,
        weight=None,
        size_average=None,
        ignore_index=-100,
        reduce=None,
        reduction="mean",
        label_smoothing=0.0,
    ):
        covered = (
            weight is None
            and size_average is None
            and reduce is None
            and not label_smoothing
            and isinstance(input, torch.Tensor)
            and input.dim() == 2
            and input.is_floating_point()
            and isinstance(target, torch.Tensor)
            and target.dim() == 1
            and not target.is_floating_point()
            and reduction in ("mean", "sum", "none")
            and (input.is_cuda or _interpreted())
        )
        if not covered:
            return original(input, target, weight, size_average, ignore_index, reduce, reduction, label_smoothing)
        from workbench.kernels.cross_entropy import cross_entropy as triton_ce

        return triton_ce(input, target, reduction, ignore_index)

    cross_entropy.__wrapped_original__ = original  # type: ignore[attr-defined]
    return cross_entropy


def _functional_proxy(F: Any, fused: Callable[..., Any]) -> Any:
    proxy = types.ModuleType(F.__name__, F.__doc__)
    proxy.__dict__.update({k: v for k, v in F.__dict__.items() if k not in ("__name__", "__doc__")})
    proxy.cross_entropy = fused
    return proxy


def _ce_recognise(context: Any):
    name = "fused_cross_entropy"
    if not context.live:
        return absent(name, "needs the live code: the call is found in it")
    calls = cross_entropy_calls(context)
    if not calls.found:
        return absent(name, "the code calls no F.cross_entropy / nn.CrossEntropyLoss that could be swapped")
    sites = [Site(line, "line", "F.cross_entropy -> the chunked Triton cross-entropy") for line in calls.lines]
    sites += [Site(p or "(loss)", "module", "nn.CrossEntropyLoss -> the Triton cross-entropy") for p, _ in calls.losses]
    why = "cross-entropy called by name in the code (its arguments not traced)" + _trace_evidence(context)
    return _row(name, context, sites, why, needs_copy=False)


def _ce_transform(fn: Any, context: Any, variant_name: str):
    import copy

    import torch.nn.functional as F

    from workbench.fixes.context import FixContext
    from workbench.fixes.rebind import rebind
    from workbench.variants.spec import Variant

    if context is None or context.fn is not fn:
        context = FixContext.from_callable(fn)
    opts = _variant_options()
    calls = cross_entropy_calls(context)
    fused = fused_cross_entropy_function(F.cross_entropy)
    mapping: dict[int, object] = {}
    if calls.functional:
        mapping[id(F)] = _functional_proxy(F, fused)
    if calls.functions:
        mapping[id(F.cross_entropy)] = fused
    cls = _loss_class()
    for _, loss in calls.losses:
        new = copy.copy(loss)
        new.__class__ = cls
        mapping[id(loss)] = new
    desc = "F.cross_entropy / nn.CrossEntropyLoss -> the chunked Triton cross-entropy (where it covers the call)"
    if not mapping and not opts["not_applicable_reason"]:
        opts["not_applicable_reason"] = "the code calls no F.cross_entropy / nn.CrossEntropyLoss that could be swapped"
    return Variant(
        name=variant_name,
        fn=rebind(fn, mapping) if mapping else fn,
        kind="kernel",
        numerical_class="reordered",
        requires=("triton",),
        description=desc,
        options={"changed": calls.lines + [p for p, _ in calls.losses]},
        **opts,
    )


_LOSS: list[type] = []


def _loss_class() -> type:
    if not _LOSS:
        import torch
        import torch.nn.functional as F

        class TritonCrossEntropyLoss(torch.nn.CrossEntropyLoss):
            def forward(self, input, target):
                return fused_cross_entropy_function(F.cross_entropy)(
                    input,
                    target,
                    weight=self.weight,
                    ignore_index=self.ignore_index,
                    reduction=self.reduction,
                    label_smoothing=self.label_smoothing,
                )

        _LOSS.append(TritonCrossEntropyLoss)
    return _LOSS[0]


# -- the Linear head and its cross-entropy ----------------------------------------------------------------------
def _head_of(context: Any) -> tuple[str, Any, str]:
    """``(path, Linear, "")`` of the first model's Linear head (its forward returns that Linear's output, by
    tracing), else ``("", None, why not)``."""
    cached = getattr(context, "_wb_lm_head", None)
    if cached is not None:
        return cached
    import torch

    out: tuple[str, Any, str] = ("", None, "the code reaches no model")
    tops = [(n, m) for n, m in context.reach.modules if not isinstance(m, torch.nn.modules.loss._Loss)]
    if tops:
        top_name, top = tops[0]
        out = head_of_module(top)
        if out[1] is not None and top_name:
            out = (f"{top_name}.{out[0]}", out[1], "")
    try:
        object.__setattr__(context, "_wb_lm_head", out)
    except Exception:  # noqa: BLE001
        pass
    return out


def head_of_module(model: Any) -> tuple[str, Any, str]:
    import torch

    from workbench.fixes.sdpa_attention import _why, trace_module

    try:
        gm = trace_module(model)
    except Exception as exc:  # noqa: BLE001
        return "", None, f"the model cannot be traced to find its head: {_why(exc)}"
    output = next(n for n in gm.graph.nodes if n.op == "output")
    ret = output.args[0]
    if getattr(ret, "op", None) == "call_module":
        sub = model.get_submodule(ret.target)
        if type(sub) is torch.nn.Linear:
            return ret.target, sub, ""
    return "", None, "the model's output is not a Linear layer's (traced)"


_DEFERRED: list[type] = []


def deferred_logits_class() -> type:
    """A tensor standing for ``F.linear(hidden, weight, bias)`` (then views) not computed yet; see the
    module docstring."""
    if _DEFERRED:
        return _DEFERRED[0]
    import torch
    import torch.nn.functional as F

    keep_deferred = {"view", "reshape", "flatten", "contiguous"}
    metadata = {"size", "dim", "numel", "ndimension", "nelement", "is_floating_point", "element_size", "is_complex"}

    class DeferredLogits(torch.Tensor):
        @staticmethod
        def __new__(cls, hidden, weight, bias, ops=(), shape=None):
            if shape is None:
                shape = (*hidden.shape[:-1], weight.shape[0])
            meta = torch.empty(shape, device="meta", dtype=hidden.dtype)
            r = torch.Tensor._make_subclass(cls, meta, False)
            r._src = (hidden, weight, bias)
            r._ops = tuple(ops)
            r._real = None
            return r

        def materialize(self):
            if self._real is None:
                hidden, weight, bias = self._src
                y = F.linear(hidden, weight, bias)
                for f, a, k in self._ops:
                    y = f(y, *a, **k)
                self._real = y
            return self._real

        @classmethod
        def __torch_function__(cls, func, types_, args=(), kwargs=None):
            kwargs = kwargs or {}
            self = args[0] if args and isinstance(args[0], cls) else None
            name = getattr(func, "__name__", "")
            if self is not None and name == "__get__":
                prop = getattr(getattr(func, "__self__", None), "__name__", "")
                hidden, weight, _ = self._src
                if prop in ("device", "is_cuda", "is_cpu"):
                    return getattr(hidden, prop)
                if prop == "requires_grad":
                    return bool(torch.is_grad_enabled() and (hidden.requires_grad or weight.requires_grad))
                if prop in ("shape", "dtype", "ndim", "layout"):
                    with torch._C.DisableTorchFunctionSubclass():
                        return func(*args, **kwargs)
            elif self is not None and name in metadata:
                with torch._C.DisableTorchFunctionSubclass():
                    return func(*args, **kwargs)
            elif self is not None and name in keep_deferred:
                with torch._C.DisableTorchFunctionSubclass():
                    shape = func(torch.empty(self.shape, device="meta", dtype=self.dtype), *args[1:], **kwargs).shape
                return cls(*self._src, ops=(*self._ops, (func, args[1:], kwargs)), shape=shape)
            elif func is F.cross_entropy:
                got = _linear_cross_entropy_call(cls, args, kwargs)
                if got is not None:
                    return got
            return func(*_materialized(cls, args), **_materialized(cls, kwargs))

    _DEFERRED.append(DeferredLogits)
    return DeferredLogits


def _materialized(cls: type, obj: Any) -> Any:
    if isinstance(obj, cls):
        return obj.materialize()
    if isinstance(obj, tuple):
        return tuple(_materialized(cls, x) for x in obj)
    if isinstance(obj, list):
        return [_materialized(cls, x) for x in obj]
    if isinstance(obj, dict):
        return {k: _materialized(cls, v) for k, v in obj.items()}
    return obj


def _linear_cross_entropy_call(cls: type, args: tuple, kwargs: dict) -> Any:
    """``linear_cross_entropy`` for ``F.cross_entropy(deferred rows [N, V], targets [N])``, or None where it
    does not cover the call (then the logits are computed and ``F.cross_entropy`` runs)."""
    names = ("input", "target", "weight", "size_average", "ignore_index", "reduce", "reduction", "label_smoothing")
    defaults = (None, None, None, None, -100, None, "mean", 0.0)
    bound = dict(zip(names, defaults))
    bound.update(dict(zip(names, args)))
    bound.update(kwargs)
    x, t = bound["input"], bound["target"]
    if not isinstance(x, cls) or isinstance(t, cls):
        return None
    hidden, weight, bias = x._src
    rows = 1
    for d in hidden.shape[:-1]:
        rows *= d
    if (
        bound["weight"] is not None
        or bound["size_average"] is not None
        or bound["reduce"] is not None
        or bound["label_smoothing"]
        or bound["reduction"] not in ("mean", "sum")
        or tuple(x.shape) != (rows, weight.shape[0])
        or t.numel() != rows
        or t.is_floating_point()
        or not (hidden.is_cuda or _interpreted())
    ):
        return None
    from workbench.kernels.cross_entropy import linear_cross_entropy

    return linear_cross_entropy(
        hidden.reshape(rows, hidden.shape[-1]),
        weight,
        t.reshape(rows),
        bias,
        reduction=bound["reduction"],
        ignore_index=bound["ignore_index"],
    )


_HEAD: list[type] = []


def deferred_head_class() -> type:
    """``nn.Linear`` returning ``DeferredLogits`` (same parameters, same names)."""
    if not _HEAD:
        import torch

        class DeferredLinearHead(torch.nn.Linear):
            def forward(self, x):
                return deferred_logits_class()(x, self.weight, self.bias)

        _HEAD.append(DeferredLinearHead)
    return _HEAD[0]


def _lce_recognise(context: Any):
    name = "fused_linear_cross_entropy"
    if not context.live:
        return absent(name, "needs the live code: the head is found by tracing the model")
    calls = cross_entropy_calls(context)
    path, head, why_not = _head_of(context)
    if head is None:
        if calls.found and why_not.startswith("the model cannot be traced"):
            return not_applicable(name, why_not)
        return absent(name, why_not or "no Linear head")
    if not calls.found:
        return absent(name, f"the model ends in a Linear head ({path}) but the code calls no cross-entropy")
    where = ", ".join(calls.lines[:3] + [p for p, _ in calls.losses][:2]) or "the code"
    site = Site(
        path,
        "module",
        f"Linear({head.in_features}, {head.out_features}) head, the model's output (traced); cross-entropy called "
        f"at {where} (by name: its input is not traced) -> linear_cross_entropy when it gets the head's rows",
    )
    why = (
        f"the model ends in a Linear head ({path}, V={head.out_features}) and the code calls cross-entropy: "
        "the loss in chunks, never the [N, V] logits" + _trace_evidence(context)
    )
    return _row(name, context, [site], why)


def _lce_transform(fn: Any, context: Any, variant_name: str):
    from workbench.fixes.context import FixContext
    from workbench.fixes.rebind import swap_variant

    if context is None or context.fn is not fn:
        context = FixContext.from_callable(fn)
    path, head, why_not = _head_of(context)
    opts = _variant_options()
    if head is None and not opts["not_applicable_reason"]:
        opts["not_applicable_reason"] = why_not or "no Linear head"
    import torch

    tops = context.reach.modules
    index = next((i for i, (_, m) in enumerate(tops) if not isinstance(m, torch.nn.modules.loss._Loss)), None)
    top_name = tops[index][0] if index is not None else ""
    rel = path[len(top_name) + 1 :] if top_name and path.startswith(top_name + ".") else path
    cls = deferred_head_class()
    calls = [0]

    def change(copy: Any):
        i = calls[0]
        calls[0] += 1
        if i != index:
            return []
        try:
            sub = copy.get_submodule(rel)
        except AttributeError:
            return []
        if type(sub) is not torch.nn.Linear:
            return []
        sub.__class__ = cls
        return [Site(rel, "module", "the head returns deferred logits; cross-entropy on them -> linear_cross_entropy")]

    return swap_variant(
        fn,
        context,
        variant_name,
        change,
        description="the Linear head and its cross-entropy fused (linear_cross_entropy, in a copy of the model)",
        kind="kernel",
        requires=("triton",),
        **opts,
    )


_NORM_RULES = ("memory_bound_kernels",)

FIXES = (
    _swap_fix(
        "fused_layer_norm",
        "layer_norm",
        "LayerNorm",
        "nn.LayerNorm over one dimension -> the fused Triton LayerNorm (forward and backward kernels)",
        _NORM_RULES,
    ),
    _swap_fix(
        "fused_rms_norm",
        "rms_norm",
        "RMSNorm",
        "nn.RMSNorm over one dimension -> the fused Triton RMSNorm (forward and backward kernels)",
        _NORM_RULES,
    ),
    Fix(
        "fused_bias_gelu",
        "Linear(bias=True) -> GELU in an nn.Sequential: the GEMM without its bias, then bias add + GELU in one "
        "Triton kernel (no x + b temporary kept)",
        "kernel",
        "reordered",
        _bias_gelu_transform,
        recognise=_bias_gelu_recognise,
        requires=("triton",),
        mechanisms=_NORM_RULES,
    ),
    _swap_fix(
        "fused_softmax",
        "softmax",
        "Softmax",
        "nn.Softmax modules -> the fused Triton softmax (one pass per row each way)",
        _NORM_RULES,
    ),
    Fix(
        "fused_cross_entropy",
        "F.cross_entropy / nn.CrossEntropyLoss -> the chunked Triton cross-entropy (no [N, V] log-softmax kept)",
        "kernel",
        "reordered",
        _ce_transform,
        recognise=_ce_recognise,
        requires=("triton",),
        mechanisms=("activations_dominate_peak", "temporary_at_peak"),
    ),
    Fix(
        "fused_linear_cross_entropy",
        "a Linear LM head and its cross-entropy fused (linear_cross_entropy): the loss in row chunks, never the "
        "[N, V] logits",
        "kernel",
        "reordered",
        _lce_transform,
        recognise=_lce_recognise,
        requires=("triton",),
        mechanisms=("activations_dominate_peak", "temporary_at_peak"),
    ),
)
