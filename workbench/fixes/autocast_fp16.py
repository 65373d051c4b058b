"""``autocast_fp16``: ``torch.autocast("cuda", dtype=torch.float16)`` around the call (CUDA only).
Recognised where fp32 matrix work dominates the run and its matmuls are large enough to pay for autocast's
casts (``_autocast``); on a CPU run with that pattern "not applicable: no CUDA device".  A call that runs
its own backward gets no GradScaler from this fix: fp16 gradients may underflow, which the gradient check
judges.  Numerics: reduced precision (float16 tolerances)."""

from __future__ import annotations

from workbench.fixes import _autocast
from workbench.fixes.fix import Fix

NAME = "autocast_fp16"


def recognise(context):
    from workbench.fixes.registry import get

    return _autocast.recognise(get(NAME), context, "float16")


FIXES = (
    Fix(
        NAME,
        "torch.autocast('cuda', dtype=torch.float16) around the call: matmuls and convolutions in fp16 on "
        "tensor cores (no GradScaler: a call with its own backward may lose small gradients)",
        "setting",
        "reduced precision",
        _autocast.transform("float16", ("cuda",)),
        recognise=recognise,
        categories=("compute_bound", "precision"),
        mechanisms=_autocast.RULES,
        requires=("cuda",),
        needs_live_code=False,
    ),
)
