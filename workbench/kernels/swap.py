"""Swapping the Triton kernels into a model for the modules they replace (what ``workbench.fixes``
builds its fused-kernel variants from): a copy of the model (or the model itself, ``inplace=True``)
in which

* ``nn.LayerNorm`` over one dimension becomes ``TritonLayerNorm`` (parameters copied),
* ``nn.RMSNorm`` over one dimension becomes ``TritonRMSNorm``,
* ``nn.Softmax`` becomes ``TritonSoftmax``,
* in an ``nn.Sequential``, ``Linear(bias=True)`` directly followed by ``nn.GELU`` becomes
  ``Linear(bias=False)`` + ``TritonBiasGELU`` (the bias moves into the fused epilogue).

Functional calls inside ``forward`` (``F.cross_entropy``, ``F.silu(a) * b``) cannot be swapped this
way: call ``cross_entropy`` / ``linear_cross_entropy`` / ``swiglu`` there. Importing this module does
not import triton; swapping does (the modules it builds run Triton kernels).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

from torch import nn

KINDS = ("layer_norm", "rms_norm", "softmax", "bias_gelu")


@dataclass(frozen=True)
class Swap:
    path: str  # the module's dotted name in the model ("" for the model itself)
    replaced: str  # the type it had
    by: str  # the type it has now
    kernel: str  # the registry name


def _one(module: nn.Module, kinds) -> tuple[nn.Module, str] | None:
    if "layer_norm" in kinds and type(module) is nn.LayerNorm and len(module.normalized_shape) == 1:
        from workbench.kernels.layer_norm import TritonLayerNorm

        return TritonLayerNorm.from_module(module), "layer_norm"
    rms = getattr(nn, "RMSNorm", None)  # torch >= 2.4
    if "rms_norm" in kinds and rms is not None and type(module) is rms and len(module.normalized_shape) == 1:
        from workbench.kernels.rms_norm import TritonRMSNorm

        return TritonRMSNorm.from_module(module), "rms_norm"
    if "softmax" in kinds and type(module) is nn.Softmax:
        from workbench.kernels.softmax import TritonSoftmax

        return TritonSoftmax.from_module(module), "softmax"
    return None


def swap_modules(
    model: nn.Module, kinds: tuple[str, ...] = KINDS, *, inplace: bool = False
) -> tuple[nn.Module, list[Swap]]:
    """``(model with the Triton modules swapped in, the swaps made)``; see the module docstring."""
    model = model if inplace else copy.deepcopy(model)
    swaps: list[Swap] = []
    top = _one(model, kinds)
    if top is not None:
        swaps.append(Swap("", type(model).__name__, type(top[0]).__name__, top[1]))
        return top[0], swaps
    for name, parent in list(model.named_modules()):
        if "bias_gelu" in kinds and isinstance(parent, nn.Sequential):
            _fuse_bias_gelu(parent, name, swaps)
        for child_name, child in list(parent.named_children()):
            found = _one(child, kinds)
            if found is not None:
                setattr(parent, child_name, found[0])
                swaps.append(
                    Swap(
                        f"{name}.{child_name}" if name else child_name,
                        type(child).__name__,
                        type(found[0]).__name__,
                        found[1],
                    )
                )
    return model, swaps


def _fuse_bias_gelu(seq: nn.Sequential, name: str, swaps: list[Swap]) -> None:
    from workbench.kernels.bias_gelu import TritonBiasGELU

    children = list(seq.named_children())
    for (n1, a), (n2, b) in zip(children, children[1:]):
        if type(a) is nn.Linear and a.bias is not None and type(b) is nn.GELU:
            lin, act = TritonBiasGELU.from_modules(a, b)
            setattr(seq, n1, lin)
            setattr(seq, n2, act)
            where = f"{name}.{n1}" if name else n1
            swaps.append(Swap(where, "Linear+GELU", "Linear(bias=False)+TritonBiasGELU", "bias_gelu"))
