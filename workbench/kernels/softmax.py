"""Row softmax over the last dimension (or ``dim``, moved last), forward and backward in Triton,
fp32 accumulation: replaces ``torch.softmax(x, dim)`` / ``F.softmax`` / ``nn.Softmax``.

Forward, one program per row: a row that fits one block is read once (max, exp, sum, write); a
longer row takes an online pass (running max and rescaled running sum, block by block) and a write
pass. It keeps y (the output, which autograd holds anyway) and nothing else. Backward, one program per
row: ``c = sum(dy * y)``, ``dx = y * (dy - c)``, reading y and dy once per pass. Inputs are viewed as
rows through their row stride where the last dimension has stride 1, else copied.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from torch import nn

from workbench.kernels._common import block_for, check_float, num_warps_for, rows


@triton.jit
def _softmax_fwd_kernel(X, Y, stride_x, stride_y, N, BLOCK: tl.constexpr, SINGLE: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    X += row * stride_x
    Y += row * stride_y
    if SINGLE:
        cols = tl.arange(0, BLOCK)
        mask = cols < N
        x = tl.load(X + cols, mask=mask, other=float("-inf")).to(tl.float32)
        e = tl.exp(x - tl.max(x, axis=0))
        e = tl.where(mask, e, 0.0)
        tl.store(Y + cols, (e / tl.sum(e, axis=0)).to(Y.dtype.element_ty), mask=mask)
    else:
        m = float("-inf")
        s = 0.0
        for off in range(0, N, BLOCK):
            cols = off + tl.arange(0, BLOCK)
            x = tl.load(X + cols, mask=cols < N, other=float("-inf")).to(tl.float32)
            m_new = tl.maximum(m, tl.max(x, axis=0))
            s = s * tl.exp(m - m_new) + tl.sum(tl.where(cols < N, tl.exp(x - m_new), 0.0), axis=0)
            m = m_new
        inv = 1.0 / s
        for off in range(0, N, BLOCK):
            cols = off + tl.arange(0, BLOCK)
            mask = cols < N
            x = tl.load(X + cols, mask=mask, other=float("-inf")).to(tl.float32)
            tl.store(Y + cols, (tl.exp(x - m) * inv).to(Y.dtype.element_ty), mask=mask)


@triton.jit
def _softmax_bwd_kernel(Y, DY, DX, stride_y, stride_dy, stride_dx, N, BLOCK: tl.constexpr, SINGLE: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    Y += row * stride_y
    DY += row * stride_dy
    DX += row * stride_dx
    if SINGLE:
        cols = tl.arange(0, BLOCK)
        mask = cols < N
        y = tl.load(Y + cols, mask=mask, other=0.0).to(tl.float32)
        dy = tl.load(DY + cols, mask=mask, other=0.0).to(tl.float32)
        c = tl.sum(y * dy, axis=0)
        tl.store(DX + cols, (y * (dy - c)).to(DX.dtype.element_ty), mask=mask)
    else:
        acc = tl.zeros([BLOCK], dtype=tl.float32)
        for off in range(0, N, BLOCK):
            cols = off + tl.arange(0, BLOCK)
            mask = cols < N
            y = tl.load(Y + cols, mask=mask, other=0.0).to(tl.float32)
            dy = tl.load(DY + cols, mask=mask, other=0.0).to(tl.float32)
            acc += y * dy
        c = tl.sum(acc, axis=0)
        for off in range(0, N, BLOCK):
            cols = off + tl.arange(0, BLOCK)
            mask = cols < N
            y = tl.load(Y + cols, mask=mask, other=0.0).to(tl.float32)
            dy = tl.load(DY + cols, mask=mask, other=0.0).to(tl.float32)
            tl.store(DX + cols, (y * (dy - c)).to(DX.dtype.element_ty), mask=mask)


class SoftmaxFunction(torch.autograd.Function):
    """``apply(x, block_size)``: softmax over the last dimension."""

    @staticmethod
    def forward(ctx, x, block_size):
        check_float(x)
        shape = x.shape
        x2 = rows(x)
        m, h = x2.shape
        y = torch.empty((m, h), dtype=x.dtype, device=x.device)
        block, single = block_for(h, block_size)
        if m and h:
            _softmax_fwd_kernel[(m,)](
                x2, y, x2.stride(0), y.stride(0), h, BLOCK=block, SINGLE=single, num_warps=num_warps_for(block)
            )
        ctx.save_for_backward(y)
        ctx.block, ctx.single, ctx.shape = block, single, shape
        return y.view(shape)

    @staticmethod
    def backward(ctx, dy):
        (y,) = ctx.saved_tensors
        m, h = y.shape
        dy2 = rows(dy)
        dx = torch.empty_like(y)
        if m and h:
            _softmax_bwd_kernel[(m,)](
                y,
                dy2,
                dx,
                y.stride(0),
                dy2.stride(0),
                dx.stride(0),
                h,
                BLOCK=ctx.block,
                SINGLE=ctx.single,
                num_warps=num_warps_for(ctx.block),
            )
        return dx.view(ctx.shape), None


def softmax(x: torch.Tensor, dim: int = -1, *, block_size: int | None = None) -> torch.Tensor:
    """``torch.softmax(x, dim)`` in Triton; a ``dim`` other than the last is moved last (a copy)."""
    d = dim % x.dim() if x.dim() else 0
    if x.dim() and d != x.dim() - 1:
        return SoftmaxFunction.apply(x.movedim(d, -1), block_size).movedim(-1, d)
    return SoftmaxFunction.apply(x, block_size)


class TritonSoftmax(nn.Module):
    """Drop-in for ``nn.Softmax(dim)``."""

    def __init__(self, dim: int = -1):
        super().__init__()
        self.dim = dim

    @classmethod
    def from_module(cls, module: nn.Softmax) -> "TritonSoftmax":
        return cls(module.dim if module.dim is not None else -1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return softmax(x, self.dim)
