"""torch.compile, four ways.  Recognised where a hypothesis of the run names the mode (launch and
host overhead, unfused elementwise chains, an optimizer's many small kernels); ``compiled_dynamic``
only where recompiles on changing shapes were found."""

from __future__ import annotations

from workbench.fixes._recognise import by_hypotheses
from workbench.fixes.fix import Fix


def _compiled(mode=None, dynamic=None):
    def transform(fn, context, name):
        from workbench.variants.builders import compiled

        return compiled(fn, mode=mode, dynamic=dynamic, name=name)

    return transform


def _recognise(name):
    def recognise(context):
        from workbench.fixes.registry import get

        return by_hypotheses(get(name), context)

    return recognise


FIXES = (
    Fix(
        "compiled",
        "torch.compile(fn): fuses elementwise chains and reductions into generated kernels, fewer launches",
        "compile",
        "reordered",
        _compiled(),
        recognise=_recognise("compiled"),
        requires=("torch.compile",),
    ),
    Fix(
        "compiled_dynamic",
        "torch.compile(fn, dynamic=True): one graph for many input sizes instead of a recompile per shape",
        "compile",
        "reordered",
        _compiled(dynamic=True),
        recognise=_recognise("compiled_dynamic"),
        requires=("torch.compile",),
    ),
    Fix(
        "compiled_reduce_overhead",
        "torch.compile(fn, mode='reduce-overhead'): compiled kernels replayed as CUDA graphs",
        "compile",
        "reordered",
        _compiled(mode="reduce-overhead"),
        recognise=_recognise("compiled_reduce_overhead"),
        requires=("torch.compile", "cuda"),
    ),
    Fix(
        "compiled_max_autotune",
        "torch.compile(fn, mode='max-autotune'): autotuned GEMM and Triton kernel configurations",
        "compile",
        "reordered",
        _compiled(mode="max-autotune"),
        recognise=_recognise("compiled_max_autotune"),
        requires=("torch.compile",),
    ),
)
