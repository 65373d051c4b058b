"""The demo's elementwise chain (``workbench.demo.elementwise_chain``) fused into one Triton kernel
each way: eight eager passes forward (and more backward) become one read and one write.

    y  = (x * clamp(x + 3, 0, 6)) / 6 * 1.5 - 0.25 + 0.5 * x
    dx = dy * (1.5 / 6 * (clamp(x + 3, 0, 6) + x * [0 <= x + 3 <= 6]) + 0.5)

``fused_chain(x)`` is the launcher (a variant for ``wb.variants.triton``); ``FusedChain.apply(x)``
the ``autograd.Function`` whose backward is the second kernel. Used by the ``triton_kernels``
section of ``benchmarks/gpu/run.sh``; needs a CUDA device (or ``TRITON_INTERPRET=1``).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

BLOCK = 1024


@triton.jit
def _chain_fwd(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    gate = tl.minimum(tl.maximum(x + 3.0, 0.0), 6.0)
    y = x * gate
    y = y / 6.0
    y = y * 1.5 - 0.25
    y = y + 0.5 * x
    tl.store(y_ptr + offs, y.to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _chain_bwd(x_ptr, dy_ptr, dx_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    dy = tl.load(dy_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    shifted = x + 3.0
    gate = tl.minimum(tl.maximum(shifted, 0.0), 6.0)
    inside = ((shifted >= 0.0) & (shifted <= 6.0)).to(tl.float32)  # clamp's gradient, bounds included
    dx = dy * ((gate + x * inside) * (1.5 / 6.0) + 0.5)
    tl.store(dx_ptr + offs, dx.to(dx_ptr.dtype.element_ty), mask=mask)


def _grid(n: int):
    return (triton.cdiv(n, BLOCK),)


def fused_chain(x: torch.Tensor) -> torch.Tensor:
    """Forward only: one pass over ``x``."""
    x = x.contiguous()
    y = torch.empty_like(x)
    n = x.numel()
    _chain_fwd[_grid(n)](x, y, n, BLOCK=BLOCK)
    return y


def fused_chain_backward(x: torch.Tensor, dy: torch.Tensor) -> torch.Tensor:
    x, dy = x.contiguous(), dy.contiguous()
    dx = torch.empty_like(x)
    n = x.numel()
    _chain_bwd[_grid(n)](x, dy, dx, n, BLOCK=BLOCK)
    return dx


class FusedChain(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):  # type: ignore[override]
        ctx.save_for_backward(x)
        return fused_chain(x)

    @staticmethod
    def backward(ctx, dy):  # type: ignore[override]
        (x,) = ctx.saved_tensors
        return fused_chain_backward(x, dy)
