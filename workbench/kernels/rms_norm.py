"""Fused RMSNorm (``y = x / sqrt(mean(x^2) + eps) * weight``) over the last dimension, forward and
backward in Triton: replaces ``nn.RMSNorm`` / ``F.rms_norm`` (and the hand-written
``x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w`` of many LLaMA-style models).

Same kernels as LayerNorm without the mean (``_norm.py``): forward writes y and a per-row fp32
``rstd``; backward writes dx and reduces dweight over rows in fp32. ``eps=None`` means what
``nn.RMSNorm`` means: ``torch.finfo(x.dtype).eps``.
"""

from __future__ import annotations

import torch
from torch import nn

from workbench.errors import InvalidArgumentError
from workbench.kernels._norm import NormFunction

RMSNormFunction = NormFunction


def rms_norm(
    x: torch.Tensor, weight: torch.Tensor | None = None, eps: float | None = None, *, block_size: int | None = None
) -> torch.Tensor:
    """``F.rms_norm(x, (x.shape[-1],), weight, eps)`` in Triton (fp32 accumulation)."""
    if eps is None:
        eps = torch.finfo(x.dtype).eps
    return NormFunction.apply(x, weight, None, eps, True, block_size)


class TritonRMSNorm(nn.Module):
    """Drop-in for ``nn.RMSNorm(H)`` (one normalised dimension)."""

    def __init__(
        self, normalized_shape: int, eps: float | None = None, elementwise_affine: bool = True, device=None, dtype=None
    ):
        super().__init__()
        if isinstance(normalized_shape, (tuple, list, torch.Size)):
            if len(normalized_shape) != 1:
                raise InvalidArgumentError("TritonRMSNorm normalises the last dimension only")
            normalized_shape = int(normalized_shape[0])
        self.normalized_shape = (int(normalized_shape),)
        self.eps = eps
        self.weight = (
            nn.Parameter(torch.ones(normalized_shape, device=device, dtype=dtype)) if elementwise_affine else None
        )

    @classmethod
    def from_module(cls, module: nn.Module) -> "TritonRMSNorm":
        """From ``nn.RMSNorm`` (or any module with ``weight`` and ``eps`` / ``variance_epsilon``)."""
        shape = getattr(module, "normalized_shape", None)
        w = module.weight
        if shape is None:
            shape = tuple(w.shape)
        if len(shape) != 1:
            raise InvalidArgumentError(f"only an RMSNorm over the last dimension is replaced, got {shape}")
        eps = getattr(module, "eps", getattr(module, "variance_epsilon", None))
        new = cls(
            shape[0],
            eps=eps,
            elementwise_affine=w is not None,
            device=w.device if w is not None else None,
            dtype=w.dtype if w is not None else None,
        )
        if w is not None:
            with torch.no_grad():
                new.weight.copy_(w)
        return new

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return rms_norm(x, self.weight, self.eps)

    def extra_repr(self) -> str:
        return f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.weight is not None}"
