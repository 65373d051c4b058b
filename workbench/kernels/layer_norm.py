"""Fused LayerNorm (weight and bias optional) over the last dimension, forward and backward in
Triton: replaces ``nn.LayerNorm`` / ``F.layer_norm`` with a ``normalized_shape`` of one dimension.

Forward reads x once (rows up to ``MAX_BLOCK`` features; longer rows in blocks) and writes y plus the
per-row ``mean`` and ``rstd`` (fp32 ``[M]``); backward reads x, dy and the statistics once and writes
dx, with dweight / dbias reduced over rows in fp32 (see ``_norm.py``). Inputs of any leading shape;
a column slice is read in place through its row stride, other non-contiguous layouts are copied.
"""

from __future__ import annotations

import torch
from torch import nn

from workbench.errors import InvalidArgumentError
from workbench.kernels._norm import NormFunction

LayerNormFunction = NormFunction


def layer_norm(
    x: torch.Tensor,
    weight: torch.Tensor | None = None,
    bias: torch.Tensor | None = None,
    eps: float = 1e-5,
    *,
    block_size: int | None = None,
) -> torch.Tensor:
    """``F.layer_norm(x, (x.shape[-1],), weight, bias, eps)`` in Triton (fp32 accumulation)."""
    return NormFunction.apply(x, weight, bias, eps, False, block_size)


class TritonLayerNorm(nn.Module):
    """Drop-in for ``nn.LayerNorm(H)`` (one normalised dimension)."""

    def __init__(
        self,
        normalized_shape: int,
        eps: float = 1e-5,
        elementwise_affine: bool = True,
        bias: bool = True,
        device=None,
        dtype=None,
    ):
        super().__init__()
        if isinstance(normalized_shape, (tuple, list, torch.Size)):
            if len(normalized_shape) != 1:
                raise InvalidArgumentError("TritonLayerNorm normalises the last dimension only")
            normalized_shape = int(normalized_shape[0])
        self.normalized_shape = (int(normalized_shape),)
        self.eps = eps
        kw = {"device": device, "dtype": dtype}
        self.weight = nn.Parameter(torch.ones(normalized_shape, **kw)) if elementwise_affine else None
        self.bias = nn.Parameter(torch.zeros(normalized_shape, **kw)) if elementwise_affine and bias else None

    @classmethod
    def from_module(cls, module: nn.LayerNorm) -> "TritonLayerNorm":
        """A TritonLayerNorm sharing nothing with ``module`` but a copy of its parameters."""
        if len(module.normalized_shape) != 1:
            raise InvalidArgumentError(
                f"only a LayerNorm over the last dimension is replaced, got {module.normalized_shape}"
            )
        w = module.weight
        new = cls(
            module.normalized_shape[0],
            eps=module.eps,
            elementwise_affine=w is not None,
            bias=module.bias is not None,
            device=w.device if w is not None else None,
            dtype=w.dtype if w is not None else None,
        )
        with torch.no_grad():
            if w is not None:
                new.weight.copy_(w)
            if module.bias is not None:
                new.bias.copy_(module.bias)
        return new

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return layer_norm(x, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.weight is not None}"
