"""The eager torch versions each kernel replaces (torch only, no triton): what ``workbench.kernels``'
registry names as each kernel's reference and what the checks compare against (in float64)."""

from __future__ import annotations

import torch
import torch.nn.functional as F


def layer_norm(x, weight=None, bias=None, eps=1e-5):
    return F.layer_norm(x, (x.shape[-1],), weight, bias, eps)


def rms_norm(x, weight=None, eps=None):
    return F.rms_norm(x, (x.shape[-1],), weight, eps)


def bias_gelu(x, bias=None, approximate="none"):
    return F.gelu(x + bias if bias is not None else x, approximate=approximate)


def swiglu(a, b):
    return F.silu(a) * b


def softmax(x, dim=-1):
    return torch.softmax(x, dim)


def cross_entropy(logits, targets, reduction="mean", ignore_index=-100):
    out = F.cross_entropy(
        logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), reduction=reduction, ignore_index=ignore_index
    )
    return out.view(targets.shape) if reduction == "none" else out


def linear_cross_entropy(hidden, weight, targets, bias=None, reduction="mean", ignore_index=-100):
    return cross_entropy(F.linear(hidden, weight, bias), targets, reduction, ignore_index)
