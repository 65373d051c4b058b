"""``pad_to_multiple_of_8``: ``nn.Linear`` layers whose ``in_features`` or ``out_features`` is not a multiple
of 8 run their GEMM padded with zeros to the next multiple of 8 (the input's last dimension and the weight's
two dimensions; the bias with zeros; the output sliced back), so that a GPU's tensor cores get 16-byte
aligned operands (an ``_align8`` kernel instead of ``_align2``/``_align4`` or a non-tensor-core path).

Applies only where it can matter: where the run's ``half_matmul_unaligned`` hypothesis flagged unaligned
matrix kernels (the rule it tests), or on a CUDA device where a layer's weight is fp16/bf16 (or fp32 with
TF32 matmuls allowed): there the GEMM would use tensor cores. On a CPU run, or in float32 without TF32, no
alignment is at stake and the fix is not listed (it can still be named in ``wb.compare``).

The transform works on a deep copy of the model (``workbench.fixes.rebind``): each such layer's class
becomes ``PaddedLinear`` (an ``nn.Linear``: the same parameters, names and shapes, so gradients, updates
and optimizer state compare one to one), which pads at every call (the padding copies the weight each
call: the price of keeping the parameters unpadded). The padded rows and columns are zeros, so every
product they add is an exact zero; the GEMM itself may still sum in another order (another kernel, another
split of K), so its numerical class is "reordered", not "exact".
"""

from __future__ import annotations

from typing import Any

from workbench.fixes.fix import Fix, Site, absent, applies

NAME = "pad_to_multiple_of_8"
RULE = "half_matmul_unaligned"
MULTIPLE = 8


def _up(n: int) -> int:
    return -(-n // MULTIPLE) * MULTIPLE


def unaligned(module: Any) -> bool:
    import torch

    return type(module) is torch.nn.Linear and (
        module.in_features % MULTIPLE != 0 or module.out_features % MULTIPLE != 0
    )


def _tensor_cores(module: Any) -> str | None:
    """Why a GPU would run this layer's GEMM on tensor cores, or None."""
    import torch

    w = module.weight
    if not w.is_cuda:
        return None
    if w.dtype in (torch.float16, torch.bfloat16):
        return f"{str(w.dtype).replace('torch.', '')} on {w.device}"
    if w.dtype == torch.float32 and torch.backends.cuda.matmul.allow_tf32:
        return f"float32 with TF32 matmuls allowed on {w.device}"
    return None


def _site(path: str, m: Any, why: str) -> Site:
    return Site(
        path or "(model)",
        "module",
        f"Linear({m.in_features}, {m.out_features}) -> GEMM padded to ({_up(m.in_features)}, "
        f"{_up(m.out_features)}); {why}",
    )


def _recognise(context: Any):
    if not context.live:
        return absent(NAME, "needs the live code: the layers are found in the modules it reaches")
    from workbench.fixes.registry import get

    layers = [(p, m) for p, m in context.modules() if unaligned(m)]
    if not layers:
        return absent(NAME, "no nn.Linear with a dimension that is not a multiple of 8")
    hyps = context.hypotheses_for(get(NAME))
    if hyps:
        sites = [_site(p, m, f"the run's {RULE} hypothesis flagged unaligned matrix kernels") for p, m in layers]
    else:
        sites = [_site(p, m, f"tensor cores: {why}") for p, m in layers if (why := _tensor_cores(m))]
    if not sites:
        return absent(
            NAME,
            f"{len(layers)} Linear layer(s) with unaligned dimensions, but no tensor cores at stake here "
            f"(not on a GPU in fp16/bf16/TF32, and no {RULE} hypothesis)",
        )
    from workbench.fixes.rebind import copy_reason, with_hypotheses

    reason = copy_reason(context)
    if reason:
        from workbench.fixes.fix import not_applicable

        return not_applicable(NAME, reason, sites)
    n = len(sites)
    found = applies(NAME, f"{n} Linear layer{'s' if n != 1 else ''} with dimensions not multiples of 8", sites)
    return with_hypotheses(found, context, NAME)


def _padded_class():
    import torch
    import torch.nn.functional as F

    class PaddedLinear(torch.nn.Linear):
        """An ``nn.Linear`` whose GEMM runs on zero-padded operands (multiples of 8), output sliced back."""

        def forward(self, x):
            pad_in = _up(self.in_features) - self.in_features
            pad_out = _up(self.out_features) - self.out_features
            w = F.pad(self.weight, (0, pad_in, 0, pad_out)) if (pad_in or pad_out) else self.weight
            b = None if self.bias is None else (F.pad(self.bias, (0, pad_out)) if pad_out else self.bias)
            y = F.linear(F.pad(x, (0, pad_in)) if pad_in else x, w, b)
            return y[..., : self.out_features] if pad_out else y

    return PaddedLinear


_PADDED: list[Any] = []


def padded_linear_class():
    if not _PADDED:
        _PADDED.append(_padded_class())
    return _PADDED[0]


def _transform(fn: Any, context: Any, name: str):
    from workbench.fixes.rebind import swap_variant

    cls = padded_linear_class()

    def change(copy: Any) -> list[Site]:
        sites = []
        for path, m in copy.named_modules():
            if unaligned(m):
                sites.append(_site(path, m, "padded in the copy"))
                m.__class__ = cls
        return sites

    return swap_variant(
        fn,
        context,
        name,
        change,
        description="Linear layers' GEMMs padded with zeros to multiples of 8 (in a copy of the model)",
        numerical_class="reordered",
    )


FIXES = (
    Fix(
        NAME,
        "nn.Linear layers whose dimensions are not multiples of 8 run their GEMM zero-padded to multiples of 8 "
        "(output sliced back): aligned operands for tensor-core kernels",
        "module_swap",
        "reordered",
        _transform,
        recognise=_recognise,
        mechanisms=(RULE,),
    ),
)
