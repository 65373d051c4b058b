"""``autocast_bf16``: ``torch.autocast(dtype=torch.bfloat16)`` around the call, on the CPU and (where there
is one) the GPU.  Recognised where fp32 matrix work dominates the run and its matmuls are large enough to
pay for autocast's casts (``_autocast``); on a CPU without native bf16 (AVX512-BF16, AMX) "not applicable"
with the reason.  Numerics: reduced precision (the comparison sees the bf16 matmuls and judges the outputs
and gradients with bfloat16 tolerances).  Autocast is thread-local and ends with the call."""

from __future__ import annotations

from workbench.fixes import _autocast
from workbench.fixes.fix import Fix

NAME = "autocast_bf16"


def recognise(context):
    from workbench.fixes.registry import get

    return _autocast.recognise(get(NAME), context, "bfloat16")


FIXES = (
    Fix(
        NAME,
        "torch.autocast(device, dtype=torch.bfloat16) around the call: matmuls and convolutions in bf16 "
        "(fp32 range, 8-bit mantissa), the rest as autocast's op lists say",
        "setting",
        "reduced precision",
        _autocast.transform("bfloat16", ("cpu", "cuda")),
        recognise=recognise,
        categories=("compute_bound", "precision"),
        mechanisms=_autocast.RULES,
        needs_live_code=False,
    ),
)
