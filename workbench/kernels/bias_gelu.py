"""Fused bias + GELU, ``y = gelu(x + b)``, forward and backward in Triton: replaces the
``Linear -> GELU`` epilogue (``F.gelu(x + b, approximate=...)``), in both of torch's forms:
``approximate="none"`` (exact, ``0.5 z (1 + erf(z / sqrt 2))``) and ``approximate="tanh"``.

Memory: eager runs two elementwise passes forward (``x + b`` materialised, then GELU) and keeps
``x + b`` for the backward; this kernel reads x and b once and writes y, saves x (a reference to the
caller's tensor, not a new buffer) and recomputes ``x + b`` in the backward, which reads x and dy
once and writes dx = dy * gelu'(x + b); db is dx summed over rows (torch's sum, in fp32).
Non-contiguous x is copied (``.contiguous()``); any leading shape; fp32 math for every dtype.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from torch import nn

from workbench.errors import InvalidArgumentError
from workbench.kernels._common import ELEMENTWISE_BLOCK, check_float

# constants written into the kernels (a Triton kernel reads no non-constexpr globals):
# sqrt(2/pi) = 0.7978845608028654, 1/sqrt(2) = 0.7071067811865476, 1/sqrt(2 pi) = 0.3989422804014327,
# 3 * 0.044715 = 0.134145


@triton.jit
def _tanh(u):
    # tanh through exp, overflow-safe at both ends (exp -> inf gives 1, exp -> 0 gives -1)
    return 1.0 - 2.0 / (tl.exp(2.0 * u) + 1.0)


@triton.jit
def _bias_gelu_fwd_kernel(X, B, Y, n, H, HAS_B: tl.constexpr, TANH: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.cast(tl.program_id(0), tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    z = tl.load(X + offs, mask=mask, other=0.0).to(tl.float32)
    if HAS_B:
        z = z + tl.load(B + offs % H, mask=mask, other=0.0).to(tl.float32)
    if TANH:
        t = _tanh(0.7978845608028654 * (z + 0.044715 * z * z * z))
        y = 0.5 * z * (1.0 + t)
    else:
        y = 0.5 * z * (1.0 + tl.erf(z * 0.7071067811865476))
    tl.store(Y + offs, y.to(Y.dtype.element_ty), mask=mask)


@triton.jit
def _bias_gelu_bwd_kernel(X, B, DY, DX, n, H, HAS_B: tl.constexpr, TANH: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.cast(tl.program_id(0), tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    z = tl.load(X + offs, mask=mask, other=0.0).to(tl.float32)
    if HAS_B:
        z = z + tl.load(B + offs % H, mask=mask, other=0.0).to(tl.float32)
    dy = tl.load(DY + offs, mask=mask, other=0.0).to(tl.float32)
    if TANH:
        t = _tanh(0.7978845608028654 * (z + 0.044715 * z * z * z))
        d = 0.5 * (1.0 + t) + 0.5 * z * (1.0 - t * t) * 0.7978845608028654 * (1.0 + 0.134145 * z * z)
    else:
        d = 0.5 * (1.0 + tl.erf(z * 0.7071067811865476)) + z * tl.exp(-0.5 * z * z) * 0.3989422804014327
    tl.store(DX + offs, (dy * d).to(DX.dtype.element_ty), mask=mask)


class BiasGELUFunction(torch.autograd.Function):
    """``apply(x, bias, approximate)``: ``gelu(x + bias)`` with bias ``[H]`` (or None) over the last dim."""

    @staticmethod
    def forward(ctx, x, bias, approximate):
        if approximate not in ("none", "tanh"):
            raise InvalidArgumentError(f"approximate must be 'none' or 'tanh', got {approximate!r}")
        check_float(x, bias)
        h = x.shape[-1] if x.dim() else 1
        if bias is not None and bias.shape != (h,):
            raise InvalidArgumentError(f"bias must have shape ({h},), got {tuple(bias.shape)}")
        xc = x.contiguous()
        b = bias.contiguous() if bias is not None else None
        y = torch.empty_like(xc)
        n = xc.numel()
        if n:
            _bias_gelu_fwd_kernel[(triton.cdiv(n, ELEMENTWISE_BLOCK),)](
                xc,
                b if b is not None else xc,
                y,
                n,
                h,
                HAS_B=b is not None,
                TANH=approximate == "tanh",
                BLOCK=ELEMENTWISE_BLOCK,
            )
        ctx.save_for_backward(xc, b)
        ctx.tanh = approximate == "tanh"
        return y

    @staticmethod
    def backward(ctx, dy):
        xc, b = ctx.saved_tensors
        dy = dy.contiguous()
        dx = torch.empty_like(xc)
        n = xc.numel()
        if n:
            _bias_gelu_bwd_kernel[(triton.cdiv(n, ELEMENTWISE_BLOCK),)](
                xc,
                b if b is not None else xc,
                dy,
                dx,
                n,
                xc.shape[-1] if xc.dim() else 1,
                HAS_B=b is not None,
                TANH=ctx.tanh,
                BLOCK=ELEMENTWISE_BLOCK,
            )
        db = None
        if b is not None and ctx.needs_input_grad[1]:
            db = dx.reshape(-1, b.shape[0]).sum(0, dtype=torch.float32).to(b.dtype)
        return dx, db, None


def bias_gelu(x: torch.Tensor, bias: torch.Tensor | None = None, approximate: str = "none") -> torch.Tensor:
    """``F.gelu(x + bias, approximate=approximate)`` in one Triton pass each way."""
    return BiasGELUFunction.apply(x, bias, approximate)


class TritonBiasGELU(nn.Module):
    """Holds the bias of the Linear before a GELU: ``Linear(d, h) -> GELU`` becomes
    ``Linear(d, h, bias=False) -> TritonBiasGELU(h)`` (``from_modules`` does the split)."""

    def __init__(self, features: int, approximate: str = "none", device=None, dtype=None):
        super().__init__()
        self.approximate = approximate
        self.bias = nn.Parameter(torch.zeros(features, device=device, dtype=dtype))

    @classmethod
    def from_modules(cls, linear: nn.Linear, gelu: nn.GELU | None = None) -> nn.Sequential:
        """``Sequential(Linear without bias (same weight, copied), TritonBiasGELU(its bias))``."""
        approximate = getattr(gelu, "approximate", "none") if gelu is not None else "none"
        w = linear.weight
        lin = nn.Linear(linear.in_features, linear.out_features, bias=False, device=w.device, dtype=w.dtype)
        act = cls(linear.out_features, approximate, device=w.device, dtype=w.dtype)
        with torch.no_grad():
            lin.weight.copy_(w)
            if linear.bias is not None:
                act.bias.copy_(linear.bias)
        return nn.Sequential(lin, act)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return bias_gelu(x, self.bias, self.approximate)

    def extra_repr(self) -> str:
        return f"{self.bias.shape[0]}, approximate={self.approximate!r}"
