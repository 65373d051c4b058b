"""``fused_optimizer``: a per-tensor optimizer (``foreach=False``, or ``foreach=None`` off CUDA, where torch
then steps one tensor at a time) rebuilt as ``fused=True`` (one fused kernel per step over all the
parameters: this torch has fused Adam, AdamW, SGD and Adagrad on CPU as well as on CUDA) or, where its class
or device has no fused kernel, ``foreach=True`` (the multi-tensor ``_foreach_*`` ops).

Why fused first, on CPU too: measured on this project's CPU machine (torch 2.13, a 29-tensor, 0.9 M-parameter
GPT), an AdamW step took 5.0 ms per-tensor, 5.3 ms with foreach=True (CPU foreach ops loop over the tensors
underneath) and 1.1 ms with fused=True. Each site says which one it picks and why.

Recognised from the optimizers the code reaches (``optimizer[0] AdamW``, its tensor count, its foreach and
fused flags); it tests the ``single_tensor_optimizer`` rule, whose hypothesis (where the run has one) puts
its time at stake. The transform builds a new optimizer of the same class over the same parameters (no model
copy: only the optimizer object is rebound in the user's code, ``workbench.fixes.rebind``), the same
hyper-parameters per group and a copy of its state; the user's optimizer is not changed. Numerical class
"reordered" (the fused kernel computes the same update in another order).
"""

from __future__ import annotations

import inspect
from typing import Any

from workbench.fixes.fix import Fix, Site, absent, applies, not_applicable

NAME = "fused_optimizer"


def _takes(cls: type, name: str) -> bool:
    try:
        return name in inspect.signature(cls.__init__).parameters
    except (TypeError, ValueError):
        return False


def _params(opt: Any) -> list[Any]:
    return [p for g in opt.param_groups for p in g["params"]]


def per_tensor(opt: Any) -> str | None:
    """How ``opt`` steps one tensor at a time (``"foreach=False"``, ``"foreach=None on cpu"``), or None where
    it already batches (fused, foreach, or foreach=None over CUDA tensors)."""
    params = _params(opt)
    if not params:
        return None
    all_cuda = all(getattr(p, "is_cuda", False) for p in params)
    flags = []
    for g in opt.param_groups:
        if g.get("fused"):
            return None
        foreach = g.get("foreach", None)
        if foreach:
            return None
        if foreach is None and all_cuda and not g.get("differentiable", False):
            return None  # torch picks foreach itself on CUDA
        flags.append("foreach=False" if foreach is False else f"foreach=None on {params[0].device.type}")
    return flags[0] if flags else None


def choice(opt: Any) -> tuple[dict[str, Any] | None, str]:
    """``(overrides, why)``: ``{"fused": True, "foreach": None}`` where the class and device have a fused
    kernel, else ``{"foreach": True}``; ``(None, why not)`` where neither can be used."""
    import torch

    cls = type(opt)
    params = _params(opt)
    if not (cls.__module__ or "").startswith("torch.optim"):
        return None, f"{cls.__name__} is not a torch.optim optimizer (its own step may not honour foreach/fused)"
    if any(g.get("differentiable", False) for g in opt.param_groups):
        return None, "differentiable=True: torch has no foreach or fused step for it"
    devices = {p.device.type for p in params}
    floating = all(p.is_floating_point() and not p.is_complex() for p in params)
    try:
        from torch.utils._foreach_utils import _get_fused_kernels_supported_devices

        fused_devices = set(_get_fused_kernels_supported_devices())
    except Exception:  # noqa: BLE001 - an older torch: fused on CUDA only
        fused_devices = {"cuda"}
    if _takes(cls, "fused") and floating and len(devices) == 1 and devices <= fused_devices:
        dev = next(iter(devices))
        return {"fused": True, "foreach": None}, (
            f"fused=True: torch {torch.__version__} has a fused {cls.__name__} kernel on {dev}"
        )
    if _takes(cls, "foreach"):
        why = "no fused kernel for its class here" if not _takes(cls, "fused") else "its parameters rule fused out"
        return {"foreach": True}, f"foreach=True ({why}; the _foreach_ ops batch the tensors)"
    return None, f"{cls.__name__} takes neither foreach= nor fused="


def _recognise(context: Any):
    if not context.live:
        return absent(NAME, "needs the live code: the optimizers are found by what it reaches")
    from workbench.fixes.rebind import with_hypotheses

    sites, blocked = [], []
    for i, opt in enumerate(context.optimizers):
        how = per_tensor(opt)
        if how is None:
            continue
        overrides, why = choice(opt)
        where = f"optimizer[{i}] {type(opt).__name__}"
        n = len(_params(opt))
        if overrides is None:
            blocked.append(Site(where, "optimizer", f"{n} tensors, {how}: {why}"))
        else:
            sites.append(Site(where, "optimizer", f"{n} tensors, {how} -> {why}"))
    if sites:
        n = len(sites)
        return with_hypotheses(
            applies(NAME, f"{n} optimizer{'s' if n != 1 else ''} stepping one tensor at a time", sites),
            context,
            NAME,
        )
    if blocked:
        return not_applicable(NAME, "; ".join(f"{s.where}: {s.detail}" for s in blocked), blocked)
    return absent(NAME, "no per-tensor optimizer reached (none, or already foreach/fused)")


def _transform(fn: Any, context: Any, name: str):
    from workbench.errors import InvalidArgumentError
    from workbench.fixes.context import FixContext
    from workbench.fixes.rebind import rebind, rebuild_optimizer
    from workbench.variants.spec import Variant

    if context is None or context.fn is not fn:
        context = FixContext.from_callable(fn)
    mapping: dict[int, object] = {}
    changed: list[str] = []
    reason = None
    for i, opt in enumerate(context.optimizers):
        if per_tensor(opt) is None:
            continue
        overrides, why = choice(opt)
        if overrides is None:
            continue
        try:
            mapping[id(opt)] = rebuild_optimizer(opt, where=f"optimizer[{i}]", overrides=overrides)
        except InvalidArgumentError as exc:
            reason = str(exc)
            continue
        changed.append(f"optimizer[{i}] {type(opt).__name__} -> {why}")
    notes: list[str] = []
    if mapping:
        import copy

        for h in context.reach.helpers:  # an LR scheduler of a rebuilt optimizer follows it
            inner = getattr(h, "optimizer", None)
            if inner is not None and id(inner) in mapping:
                try:
                    mapping[id(h)] = copy.deepcopy(h, {id(inner): mapping[id(inner)]})
                except Exception as exc:  # noqa: BLE001
                    notes.append(f"{type(h).__name__} could not be copied onto the new optimizer ({exc})")
    desc = "per-tensor optimizer rebuilt with fused=True / foreach=True (same parameters, a copy of its state)"
    if not mapping:
        return Variant(
            name=name,
            fn=fn,
            kind="setting",
            numerical_class="reordered",
            description=desc,
            not_applicable_reason=reason or "no per-tensor optimizer reached (none, or already foreach/fused)",
        )
    return Variant(
        name=name,
        fn=rebind(fn, mapping, notes=notes),
        kind="setting",
        numerical_class="reordered",
        description=desc + ": " + "; ".join(changed),
        options={"changed": changed, "state_notes": notes},
        in_place=lambda: _in_place(context),
    )


def _in_place(context: Any) -> list[str]:
    """``wb.fixes.apply``: each per-tensor optimizer the code reaches switched to the same ``fused`` /
    ``foreach`` setting the variant was checked with, in its param groups and defaults (its state, keyed by
    the same parameters, is kept)."""
    changed = []
    for i, opt in enumerate(context.optimizers):
        if per_tensor(opt) is None:
            continue
        overrides, why = choice(opt)
        if overrides is None:
            continue
        for group in opt.param_groups:
            group.update(overrides)
        opt.defaults.update(overrides)
        if overrides.get("fused"):
            opt._step_supports_amp_scaling = True  # as the constructor sets it for fused=True (GradScaler reads it)
        changed.append(f"optimizer[{i}] {type(opt).__name__} -> {why}")
    return changed


FIXES = (
    Fix(
        NAME,
        "a per-tensor optimizer (foreach off) rebuilt with fused=True (or foreach=True where no fused kernel "
        "exists): one batched step over all the parameters instead of a few small ops per tensor",
        "setting",
        "reordered",
        _transform,
        recognise=_recognise,
        mechanisms=("single_tensor_optimizer",),
    ),
)
