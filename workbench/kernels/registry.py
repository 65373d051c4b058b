"""The registry of the kernels (stdlib only: importing it imports neither torch nor triton);
``workbench.kernels`` re-exports it."""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from dataclasses import dataclass, field
from typing import Any, Callable

from workbench.errors import RegistryError

__all__ = [
    "KERNELS",
    "Kernel",
    "available",
    "missing_reason",
    "get",
    "names",
    "interpreted",
    "triton_installed",
    "NOT_INSTALLED",
    "CPU_ONLY",
    "NO_DEVICE_NO_INTERPRETER",
]

NOT_INSTALLED = "not applicable: triton not installed"
CPU_ONLY = "CPU only: runs under TRITON_INTERPRET=1 for correctness, not for speed"
NO_DEVICE_NO_INTERPRETER = (
    "not applicable: no CUDA device; set TRITON_INTERPRET=1 before triton is imported "
    "to run the kernels on CPU for correctness (not for speed)"
)


@dataclass(frozen=True)
class Kernel:
    """One entry of the registry. ``function`` / ``autograd`` / ``module`` are names in
    ``workbench.kernels.<module_name>``, resolved (importing triton) on first use; ``reference`` is
    the eager torch function in ``workbench.kernels.reference`` (torch only)."""

    name: str
    replaces: str
    module_name: str
    function_name: str
    autograd_name: str
    module_class: str | None
    memory: str
    requires: tuple[str, ...] = ("triton", "cuda")
    correctness_on_cpu: str = "TRITON_INTERPRET=1 (the interpreter), CPU tensors"
    extra: dict[str, str] = field(default_factory=dict)

    def _mod(self):
        return importlib.import_module(f"workbench.kernels.{self.module_name}")

    @property
    def function(self) -> Callable[..., Any]:
        return getattr(self._mod(), self.function_name)

    @property
    def autograd(self) -> type:
        return getattr(self._mod(), self.autograd_name)

    @property
    def module(self) -> type | None:
        return getattr(self._mod(), self.module_class) if self.module_class else None

    @property
    def reference(self) -> Callable[..., Any]:
        import workbench.kernels.reference as reference

        return getattr(reference, self.name)

    def available(self) -> bool:
        return available()

    def missing_reason(self) -> str | None:
        return missing_reason()


KERNELS: dict[str, Kernel] = {
    k.name: k
    for k in (
        Kernel(
            "layer_norm",
            "nn.LayerNorm / F.layer_norm over the last dimension (weight and bias optional)",
            "layer_norm",
            "layer_norm",
            "LayerNormFunction",
            "TritonLayerNorm",
            "forward: y plus fp32 mean and rstd per row; backward: dx plus a [programs, H] fp32 partial "
            "for dweight/dbias (about 2 rows per SM), no [M, H] temporaries",
        ),
        Kernel(
            "rms_norm",
            "nn.RMSNorm / F.rms_norm over the last dimension (weight optional)",
            "rms_norm",
            "rms_norm",
            "RMSNormFunction",
            "TritonRMSNorm",
            "forward: y plus fp32 rstd per row; backward: dx plus a [programs, H] fp32 partial for dweight",
        ),
        Kernel(
            "bias_gelu",
            "the bias add and GELU after a Linear: F.gelu(x + b, approximate='none'|'tanh')",
            "bias_gelu",
            "bias_gelu",
            "BiasGELUFunction",
            "TritonBiasGELU",
            "forward: y only (eager also materialises and keeps x + b); backward: dx, db = sum of dx",
        ),
        Kernel(
            "swiglu",
            "the SiLU-gated product of a SwiGLU MLP: F.silu(a) * b",
            "swiglu",
            "swiglu",
            "SwiGLUFunction",
            "TritonSwiGLUMLP",
            "forward: y only (eager also keeps silu(a)); backward: da and db in one pass",
        ),
        Kernel(
            "softmax",
            "torch.softmax / F.softmax / nn.Softmax (last dimension; another dim is moved last)",
            "softmax",
            "softmax",
            "SoftmaxFunction",
            "TritonSoftmax",
            "forward: y (kept for the backward, as eager does); backward: dx, one pass per row block",
        ),
        Kernel(
            "cross_entropy",
            "F.cross_entropy(logits [.., V], targets [..]) with mean/sum/none and ignore_index",
            "cross_entropy",
            "cross_entropy",
            "CrossEntropyFunction",
            None,
            "forward: fp32 loss and logsumexp per row, no [N, V] softmax/log-softmax; backward: the one "
            "[N, V] gradient autograd needs (or none, in place, with inplace_backward=True); eager holds "
            "up to three [N, V] tensors besides the logits",
        ),
        Kernel(
            "linear_cross_entropy",
            "F.cross_entropy(F.linear(hidden, W, b), targets): an LM head and its loss",
            "cross_entropy",
            "linear_cross_entropy",
            "LinearCrossEntropyFunction",
            "TritonLinearCrossEntropy",
            "one [chunk_rows, V] logits block at a time, never [N, V]; d hidden [N, D] and fp32 d W [V, D] "
            "computed in the forward and scaled in the backward",
        ),
    )
}


def names() -> list[str]:
    return list(KERNELS)


def get(name: str) -> Kernel:
    try:
        return KERNELS[name]
    except KeyError:
        raise RegistryError(f"no kernel {name!r}; the kernels are {', '.join(KERNELS)}") from None


def triton_installed() -> bool:
    return "triton" in sys.modules or importlib.util.find_spec("triton") is not None


def interpreted() -> bool:
    """Whether triton runs (or will run, once imported) under its CPU interpreter."""
    return os.environ.get("TRITON_INTERPRET") == "1"


def _cuda() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def missing_reason() -> str | None:
    """None where the kernels run on a GPU here (correct and worth timing), else why not, plainly:
    ``NOT_INSTALLED``, ``CPU_ONLY`` (under the interpreter) or ``NO_DEVICE_NO_INTERPRETER``."""
    if not triton_installed():
        return NOT_INSTALLED
    if _cuda() and not interpreted():
        return None
    if interpreted():
        return CPU_ONLY
    return NO_DEVICE_NO_INTERPRETER


def available() -> bool:
    """True where the kernels run on a CUDA device here (correctness and timing)."""
    return missing_reason() is None
