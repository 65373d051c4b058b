"""The project's own fused Triton kernels, each a ``torch.autograd.Function`` with its forward and
backward written in Triton, a functional wrapper and (where one makes sense) an ``nn.Module``
drop-in, checked against eager torch under the interpreter on CPU and timed on a GPU.

=====================  ============================================  =============================================
name                   replaces                                      Triton entry points
=====================  ============================================  =============================================
layer_norm             ``nn.LayerNorm`` / ``F.layer_norm``           ``layer_norm``, ``TritonLayerNorm.from_module``
rms_norm               ``nn.RMSNorm`` / ``F.rms_norm``               ``rms_norm``, ``TritonRMSNorm.from_module``
bias_gelu              ``F.gelu(x + b)`` after a Linear              ``bias_gelu``, ``TritonBiasGELU.from_modules``
swiglu                 ``F.silu(a) * b`` in a SwiGLU MLP             ``swiglu``, ``TritonSwiGLUMLP.from_linears``
softmax                ``torch.softmax(x, dim)``                     ``softmax``, ``TritonSoftmax``
cross_entropy          ``F.cross_entropy(logits, targets)``          ``cross_entropy``
linear_cross_entropy   ``F.cross_entropy(F.linear(h, W, b), t)``     ``linear_cross_entropy``, ``TritonLinearCrossEntropy``
=====================  ============================================  =============================================

Beside the kernel modules: ``registry`` (the table above as data: what each replaces, its torch
reference, its autograd Function, its requirements), ``reference`` (the eager torch versions),
``swap.swap_modules(model)`` (the Triton modules swapped in for ``nn.LayerNorm``, ``nn.RMSNorm``,
``nn.Softmax`` and ``Linear -> GELU`` in a Sequential), ``checking`` (every kernel against float64,
forward and backward, at awkward shapes) and ``bench`` (do_bench timing on CUDA; the command line is
``benchmarks/kernels.py``; ``device_check`` below is the GPU check's entry point).

Importing this package does not import triton: the registry names each kernel's module and
resolves it on first use, so ``workbench.kernels`` imports (and says why nothing runs) where triton
is not installed. ``available()`` / ``missing_reason()`` say whether the kernels can run here and,
where not, why: triton missing, or no GPU (then they run under ``TRITON_INTERPRET=1`` for
correctness only; the variable must be set before triton is first imported).
"""

from __future__ import annotations

from typing import Any

from workbench.kernels.registry import (
    CPU_ONLY,
    KERNELS,
    NO_DEVICE_NO_INTERPRETER,
    NOT_INSTALLED,
    Kernel,
    available,
    get,
    interpreted,
    missing_reason,
    names,
    triton_installed,
)

__all__ = [
    "KERNELS",
    "Kernel",
    "available",
    "missing_reason",
    "get",
    "names",
    "device_check",
    "interpreted",
    "triton_installed",
    "NOT_INSTALLED",
    "CPU_ONLY",
    "NO_DEVICE_NO_INTERPRETER",
]


def device_check(workdir: str | None = None, budget_s: float = 25.0) -> dict[str, Any]:
    """The GPU check's entry point (benchmarks/gpu/sections.py): the kernels checked against float64
    and timed forward+backward against eager with ``triton.testing.do_bench``, within ``budget_s``
    (see ``workbench.kernels.bench.device_check``). Writes ``kernels.json`` into ``workdir`` when
    given. Returns a dict with an ``ok`` key; without CUDA ``{"ok": False, "status": "not_applicable", ...}``."""
    reason = missing_reason()
    if reason is not None:
        return {"ok": False, "status": "not_applicable", "reason": reason}
    import workbench.kernels.bench as bench

    return bench.device_check(workdir, budget_s=budget_s)
