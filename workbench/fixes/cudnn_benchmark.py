"""``cudnn_benchmark``: ``torch.backends.cudnn.benchmark = True`` during the call: cuDNN times its
convolution algorithms for each new input shape once and keeps the fastest.

Recognised on conv models (the code reaches ``nn.Conv*`` modules, or the trace ran convolutions); on a CPU
run with convolutions "not applicable: no CUDA device".  Where the convolutions' input shapes change from
call to call, every new shape is timed again: the row says how many shapes the trace saw.  The setting is
put back in a ``finally``.  Numerics: reordered (another algorithm sums in another order).
"""

from __future__ import annotations

from workbench.fixes import _patterns as P
from workbench.fixes.fix import Fix, Site, absent, applies, not_applicable

NAME = "cudnn_benchmark"
CONV_TYPES = ("Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d")


def _transform(fn, context, name):
    import torch

    from workbench.variants.spec import Variant

    def with_cudnn_benchmark(*args, **kwargs):
        saved = torch.backends.cudnn.benchmark
        torch.backends.cudnn.benchmark = True
        try:
            return fn(*args, **kwargs)
        finally:
            torch.backends.cudnn.benchmark = saved

    with_cudnn_benchmark.__wrapped__ = fn  # type: ignore[attr-defined]
    return Variant(
        name=name,
        fn=with_cudnn_benchmark,
        requires=("cuda",),
        kind="setting",
        numerical_class="reordered",
        description="torch.backends.cudnn.benchmark = True during the call (restored after)",
    )


def conv_modules(context) -> list[tuple[str, str]]:
    """(module path, type name) of every convolution module the code reaches."""
    out = []
    for path, m in context.modules():
        if type(m).__name__ in CONV_TYPES and type(m).__module__.startswith("torch.nn"):
            out.append((path or "(top)", type(m).__name__))
    return out


def conv_shapes(context) -> int:
    """How many distinct input shapes the traced forward convolutions had."""
    trace = context.trace
    if trace is None:
        return 0
    ops = trace.cpu_ops
    if ops is None or not len(ops) or "input_dims" not in ops:
        return 0
    conv = ops[ops["name"].astype(str) == "aten::convolution"]
    return int(conv["input_dims"].astype(str).nunique())


def recognise(context):
    mods = conv_modules(context) if context.live else []
    ran = P.ran_convolutions(context)
    if not mods and not ran:
        return absent(NAME, "no convolution in the reached modules or the traced ops")
    what = (
        f"{len(mods)} convolution module{'s' if len(mods) != 1 else ''} ({', '.join(p for p, _ in mods[:3])})"
        if mods
        else f"{ran} convolution ops in the trace"
    )
    sites = tuple(Site(p, "module", t) for p, t in mods[:12]) or (Site("aten::convolution", "op", f"{ran} calls"),)
    if not context.cuda:
        return not_applicable(
            NAME,
            f"no CUDA device: cudnn.benchmark chooses among cuDNN's GPU algorithms; here {what} ran on the CPU",
            sites,
        )
    try:
        import torch

        if torch.backends.cudnn.benchmark and context.live:
            return absent(NAME, "torch.backends.cudnn.benchmark is already on in this process")
    except Exception:  # noqa: BLE001
        pass
    shapes = conv_shapes(context)
    note = (
        f"; the convolutions saw {shapes} input shapes: each new shape is benchmarked again (a one-time cost each)"
        if shapes > 4
        else ""
    )
    return applies(
        NAME,
        f"{what}: cuDNN's default heuristic picks an algorithm without timing it; benchmark mode times them on "
        f"the first call of each shape and keeps the fastest{note}",
        sites,
    )


FIXES = (
    Fix(
        NAME,
        "torch.backends.cudnn.benchmark = True during the call: the fastest cuDNN convolution algorithm per "
        "input shape (timed once per shape); restored after the call",
        "setting",
        "reordered",
        _transform,
        recognise=recognise,
        categories=("compute_bound",),
        requires=("cuda",),
        needs_live_code=False,
    ),
)
