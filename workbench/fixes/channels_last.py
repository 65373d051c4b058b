"""``channels_last``: the model's 4-D parameters and buffers, and the 4-D tensors it is given, in
``torch.channels_last`` (NHWC) memory format, which convolution kernels (cuDNN tensor cores, oneDNN on the
CPU) read without a layout change.

Conv models only: recognised where the reached modules contain ``nn.Conv2d`` (absent otherwise, and where
they are already channels_last, or the trace shows they did not run).  The transform works on a deep copy of
the reached models (``rebind.copy_state``: optimizers rebuilt over the copy) converted with
``.to(memory_format=torch.channels_last)``; 4-D float tensors the code reads by name are converted copies,
and 4-D float tensor arguments are converted on each call (inside the timed call: what a pipeline that
produces NCHW batches pays).  Numerics: reordered (NHWC kernels accumulate in another order).
"""

from __future__ import annotations

from workbench.fixes import _patterns as P
from workbench.fixes.fix import Fix, Site, absent, applies, not_applicable

NAME = "channels_last"


def conv2d_modules(context) -> list[tuple[str, object]]:
    import torch

    return [(p or "(top)", m) for p, m in context.modules() if isinstance(m, torch.nn.Conv2d)]


def _is_channels_last(t) -> bool:
    import torch

    return t.dim() == 4 and t.is_contiguous(memory_format=torch.channels_last) and not t.is_contiguous()


def _to_channels_last(x):
    import torch

    if isinstance(x, torch.Tensor) and x.dim() == 4 and x.is_floating_point():
        return x.contiguous(memory_format=torch.channels_last)
    return x


def _transform(fn, context, name):
    import torch

    from workbench.errors import InvalidArgumentError
    from workbench.fixes.context import FixContext
    from workbench.fixes.rebind import CHANGED, copy_state, rebind
    from workbench.variants.spec import Variant

    if context is None or context.fn is not fn:
        context = FixContext.from_callable(fn)
    description = "the model (a deep copy) and its 4-D inputs in torch.channels_last memory format"

    def failed(reason: str) -> Variant:
        return Variant(
            name=name, fn=fn, kind="data_movement", numerical_class="reordered", description=description,
            not_applicable_reason=reason,
        )  # fmt: skip

    if not conv2d_modules(context):
        return failed("the code reaches no nn.Conv2d: channels_last is for convolution models")

    def convert(module):
        module = module.to(memory_format=torch.channels_last)
        convs = [p or "(top)" for p, m in module.named_modules() if isinstance(m, torch.nn.Conv2d)]
        return module, [Site(p, "module", "Conv2d in channels_last") for p in convs]

    try:
        mapping, notes = copy_state(context, convert)
    except InvalidArgumentError as exc:
        return failed(str(exc))
    data = P.reached_tensors(context)
    converted = []
    for label, t in data.items():
        if id(t) not in mapping and t.dim() == 4 and t.is_floating_point() and not _is_channels_last(t):
            mapping[id(t)] = t.contiguous(memory_format=torch.channels_last)
            converted.append(label)
    rebind_notes: list[str] = []
    inner = rebind(fn, mapping, notes=rebind_notes)

    def with_channels_last(*args, **kwargs):
        args = tuple(_to_channels_last(a) for a in args)
        kwargs = {k: _to_channels_last(v) for k, v in kwargs.items()}
        return inner(*args, **kwargs)

    with_channels_last.__wrapped__ = inner  # type: ignore[attr-defined]
    changed = [n[len(CHANGED) :] for n in notes if n.startswith(CHANGED)]
    return Variant(
        name=name,
        fn=with_channels_last,
        kind="data_movement",
        numerical_class="reordered",
        description=description
        + ("; converted: " + ", ".join(changed[:6]) if changed else "")
        + (f"; tensors read by name converted: {', '.join(converted[:6])}" if converted else ""),
        options={
            "changed": changed,
            "state_notes": [n for n in notes if not n.startswith(CHANGED)] + rebind_notes,
            "converted_tensors": converted,
        },
    )


def recognise(context):
    if not context.live:
        if P.ran_convolutions(context):
            return not_applicable(
                NAME, "the run was loaded from a file: pass the code (run.fixes_for(fn)) to find its Conv2d modules"
            )
        return absent(NAME, "no live code and no convolution in the trace")
    convs = conv2d_modules(context)
    if not convs:
        return absent(NAME, "the code reaches no nn.Conv2d: channels_last is for convolution models")
    if all(_is_channels_last(m.weight) for _, m in convs):
        return absent(NAME, "the Conv2d weights are already channels_last")
    ran = P.ran_convolutions(context)
    if context.trace is not None and context.op_counts and not ran:
        return absent(NAME, f"the code reaches {len(convs)} Conv2d modules, but none ran in the traced call")
    mt = P.matrix_time(context)
    conv_us = sum(r["us"] for r in mt.rows if r["kind"] == "conv") if mt is not None else 0.0
    share = f"; convolutions take {100 * conv_us / mt.total_us:.0f}% of the time" if mt and mt.total_us > 0 else ""
    sites = tuple(
        Site(p, "module", f"Conv2d {m.in_channels}->{m.out_channels}, kernel {tuple(m.kernel_size)}")
        for p, m in convs[:12]
    )
    return applies(
        NAME,
        f"{len(convs)} Conv2d module{'s' if len(convs) != 1 else ''} in NCHW (contiguous) layout{share}; "
        "NHWC lets the convolution kernels skip their layout reorders",
        sites,
    )


FIXES = (
    Fix(
        NAME,
        "the model (a deep copy) converted with .to(memory_format=torch.channels_last), and its 4-D inputs: "
        "NHWC convolutions without layout reorders",
        "data_movement",
        "reordered",
        _transform,
        recognise=recognise,
    ),
)
