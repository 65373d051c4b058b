"""``eager`` (the code as written: the baseline, never offered as a fix) and ``triton`` (your own
@triton.jit kernel through its launcher: named by hand, built with ``wb.variants.triton(launcher)``)."""

from __future__ import annotations

from workbench.errors import InvalidArgumentError
from workbench.fixes.fix import Fix


def _eager(fn, context, name):
    from workbench.variants.builders import eager

    return eager(fn, name=name)


def _triton(fn, context, name):
    raise InvalidArgumentError(
        "a Triton variant cannot be built from the original function alone: write the @triton.jit "
        "kernel and a launcher with the same signature, then pass wb.variants.triton(launcher); the "
        "catalog's own fused kernels are the fused_* fixes (wb.fixes.names())"
    )


FIXES = (Fix("eager", "nothing: the function as written (the baseline)", "baseline", "exact", _eager),)

# listed last in the catalog (BUILTIN_MODULES names it "workbench.fixes.baseline:OWN_KERNEL")
OWN_KERNEL = (
    Fix(
        "triton",
        "your own @triton.jit kernel, through a launcher with the function's signature",
        "user",
        "reordered",
        _triton,
        requires=("triton",),
    ),
)
