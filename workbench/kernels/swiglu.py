"""Fused SiLU-gated product, ``y = silu(a) * b``, forward and backward in Triton: the elementwise
part of a SwiGLU MLP (``w2(silu(w1 x) * w3 x)``, LLaMA-style), replacing ``F.silu(a) * b``.

Memory: eager writes ``silu(a)`` (one tensor, kept for the backward) and then the product, and its
backward runs several elementwise passes; here the forward reads a and b once and writes y, keeping
only references to a and b; the backward reads a, b, dy once and writes da and db:
``da = dy * b * s * (1 + a (1 - s))``, ``db = dy * a * s``, ``s = sigmoid(a)``, all in fp32.
``a`` and ``b`` must have the same shape; non-contiguous inputs are copied.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from torch import nn

from workbench.errors import InvalidArgumentError
from workbench.kernels._common import ELEMENTWISE_BLOCK, check_float


@triton.jit
def _swiglu_fwd_kernel(A, B, Y, n, BLOCK: tl.constexpr):
    offs = tl.cast(tl.program_id(0), tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    a = tl.load(A + offs, mask=mask, other=0.0).to(tl.float32)
    b = tl.load(B + offs, mask=mask, other=0.0).to(tl.float32)
    y = a * tl.sigmoid(a) * b
    tl.store(Y + offs, y.to(Y.dtype.element_ty), mask=mask)


@triton.jit
def _swiglu_bwd_kernel(A, B, DY, DA, DB, n, BLOCK: tl.constexpr):
    offs = tl.cast(tl.program_id(0), tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    a = tl.load(A + offs, mask=mask, other=0.0).to(tl.float32)
    b = tl.load(B + offs, mask=mask, other=0.0).to(tl.float32)
    dy = tl.load(DY + offs, mask=mask, other=0.0).to(tl.float32)
    s = tl.sigmoid(a)
    silu = a * s
    da = dy * b * s * (1.0 + a * (1.0 - s))
    db = dy * silu
    tl.store(DA + offs, da.to(DA.dtype.element_ty), mask=mask)
    tl.store(DB + offs, db.to(DB.dtype.element_ty), mask=mask)


class SwiGLUFunction(torch.autograd.Function):
    """``apply(a, b)``: ``silu(a) * b`` for two tensors of one shape."""

    @staticmethod
    def forward(ctx, a, b):
        check_float(a, b)
        if a.shape != b.shape:
            raise InvalidArgumentError(f"a and b must have one shape, got {tuple(a.shape)} and {tuple(b.shape)}")
        ac, bc = a.contiguous(), b.contiguous()
        y = torch.empty_like(ac)
        n = ac.numel()
        if n:
            _swiglu_fwd_kernel[(triton.cdiv(n, ELEMENTWISE_BLOCK),)](ac, bc, y, n, BLOCK=ELEMENTWISE_BLOCK)
        ctx.save_for_backward(ac, bc)
        return y

    @staticmethod
    def backward(ctx, dy):
        ac, bc = ctx.saved_tensors
        dy = dy.contiguous()
        da, db = torch.empty_like(ac), torch.empty_like(bc)
        n = ac.numel()
        if n:
            _swiglu_bwd_kernel[(triton.cdiv(n, ELEMENTWISE_BLOCK),)](ac, bc, dy, da, db, n, BLOCK=ELEMENTWISE_BLOCK)
        return da, db


def swiglu(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``F.silu(a) * b`` in one Triton pass each way."""
    return SwiGLUFunction.apply(a, b)


class TritonSwiGLUMLP(nn.Module):
    """A SwiGLU MLP, ``down(silu(gate(x)) * up(x))``, with the gated product in Triton
    (``from_linears(gate, up, down)`` copies the three projections of an existing MLP)."""

    def __init__(self, dim: int, hidden: int, bias: bool = False, device=None, dtype=None):
        super().__init__()
        kw = {"bias": bias, "device": device, "dtype": dtype}
        self.gate, self.up, self.down = (
            nn.Linear(dim, hidden, **kw),
            nn.Linear(dim, hidden, **kw),
            nn.Linear(hidden, dim, **kw),
        )

    @classmethod
    def from_linears(cls, gate: nn.Linear, up: nn.Linear, down: nn.Linear) -> "TritonSwiGLUMLP":
        w = gate.weight
        new = cls(gate.in_features, gate.out_features, bias=gate.bias is not None, device=w.device, dtype=w.dtype)
        new.load_state_dict(
            {f"{n}.{k}": v for n, m in (("gate", gate), ("up", up), ("down", down)) for k, v in m.state_dict().items()}
        )
        return new

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(swiglu(self.gate(x), self.up(x)))
