"""``inference_mode``: the call under ``torch.inference_mode()``: a forward that records an autograd graph
nobody uses stops recording it (no graph nodes, no saved tensors, no version-counter bumps).

Recognised on a forward with no gradient use: the code reaches parameters that require grad, no optimizer,
no backward (none in the trace: no ``autograd::engine`` events, no ``*Backward`` nodes or
``aten::*_backward`` ops; none in the source: no ``.backward()``, ``torch.autograd.grad``), and grad mode
was on while it ran (the trace's forward ops carry autograd sequence numbers; without a trace, the run's
settings and the source: no ``torch.no_grad`` / ``inference_mode`` / ``set_grad_enabled(False)``).

Caveats, said in the row: tensors made inside are inference tensors (an in-place change of one outside
inference mode raises; a caller that backpropagates through the output cannot: compare it with
``mode="inference"``, as a training-mode comparison rejects it for having no gradients).
Numerics: exact.
"""

from __future__ import annotations

from workbench.fixes import _patterns as P
from workbench.fixes.fix import Fix, Site, absent, applies, not_applicable

NAME = "inference_mode"
BACKWARD_CALLS = (".backward", "torch.autograd.grad", "autograd.grad", "torch.autograd.backward", "autograd.backward")
NO_GRAD_CALLS = ("no_grad", "inference_mode")


def _transform(fn, context, name):
    import torch

    from workbench.variants.spec import Variant

    def with_inference_mode(*args, **kwargs):
        with torch.inference_mode():
            return fn(*args, **kwargs)

    with_inference_mode.__wrapped__ = fn  # type: ignore[attr-defined]
    return Variant(
        name=name,
        fn=with_inference_mode,
        kind="setting",
        numerical_class="exact",
        description="the call under torch.inference_mode() (no autograd recording)",
    )


def backward_in_trace(context) -> int:
    return sum(
        n
        for name, n in context.op_counts.items()
        if name.startswith("autograd::engine") or "Backward" in name or name.endswith("_backward")
    )


def _grad_off_in_source(sources) -> list[str]:
    def pred(name, call):
        if name.endswith(NO_GRAD_CALLS):
            return True
        if name.endswith("set_grad_enabled") and call.args:
            arg = call.args[0]
            return getattr(arg, "value", True) is False
        return False

    return [src.where(c) for src, c in P.any_call(sources, pred)]


def recognise(context):
    if not context.live:
        if backward_in_trace(context) == 0 and context.trace is not None:
            return not_applicable(NAME, "the run was loaded from a file: pass the code (run.fixes_for(fn)) to judge it")
        return absent(NAME, "no live code to judge")
    reach = context.reach
    if context.optimizers:
        return absent(NAME, f"the code reaches {len(context.optimizers)} optimizer(s): a training step")
    grads = [n for n, p in reach.params.items() if getattr(p, "requires_grad", False)]
    if not grads:
        return absent(NAME, "the code reaches no tensor that requires grad: autograd records nothing to drop")
    n_back = backward_in_trace(context)
    if n_back:
        return absent(NAME, f"the traced call runs backward ({n_back} autograd ops): its gradients are used")
    sources, unread = P.code_sources(context.fn)
    back = [src.where(c) for src, c in P.any_call(sources, lambda n, c: n.endswith(BACKWARD_CALLS))]
    if back:
        return absent(NAME, f"the code computes gradients ({', '.join(back[:3])})")
    trace_ops = context.trace is not None and bool(context.op_counts)
    if trace_ops:
        ops = context.trace.cpu_ops
        recorded = int((ops["sequence_number"] >= 0).sum()) if "sequence_number" in ops else -1
        if recorded == 0:
            return absent(NAME, "its ops ran with grad mode off (torch.no_grad or inference_mode already)")
        if recorded < 0:
            trace_ops = False
    if not trace_ops:
        off = _grad_off_in_source(sources)
        if off:
            return absent(NAME, f"the code already turns grad mode off ({', '.join(off[:3])})")
        grad_on = P.run_setting(context, "grad_enabled", None)
        if grad_on is None:
            import torch

            grad_on = torch.is_grad_enabled()
        if not grad_on:
            return absent(NAME, "the run had grad mode off")
        if not sources and unread:
            return absent(NAME, "no trace and no source to tell whether the call uses gradients")
    where = f"{len(grads)} parameters that require grad ({', '.join(grads[:3])}{', ...' if len(grads) > 3 else ''})"
    by = "its traced ops recorded autograd nodes" if trace_ops else "grad mode was on"
    return applies(
        NAME,
        f"a forward with no gradient use: the code reaches {where}, no optimizer and no backward, and {by}; "
        "inference_mode stops the recording (a caller that backpropagates through the output needs it: "
        "compare with mode='inference')",
        (Site("torch.inference_mode", "setting", "around the call"),),
    )


FIXES = (
    Fix(
        NAME,
        "the call under torch.inference_mode(): no autograd graph, saved tensors or version counters for a "
        "forward whose gradients nobody uses",
        "setting",
        "exact",
        _transform,
        recognise=recognise,
    ),
)
