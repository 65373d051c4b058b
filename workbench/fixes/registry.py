"""The catalog of fixes, which is also the variant registry: every name ``wb.compare`` (or a study
round, or ``%%gpuvariant --fix``) accepts as a string is a ``Fix`` here, and every fix a hypothesis
suggests is one.

The built-in fixes live one per module (or one small family per module) in ``workbench/fixes/``,
listed in ``BUILTIN_MODULES`` and imported on first use; each module defines ``FIXES``, a tuple of
``Fix``.  ``register(fix)`` adds a user's own; ``register(name, builder, doc)`` (the older form of
``wb.variants.register``) wraps a builder ``builder(fn, name=...) -> Variant`` as a fix applied only
when named.  An unknown name raises ``RegistryError`` listing the known ones.
"""

from __future__ import annotations

import importlib
import threading
from typing import Any, Callable

from workbench.errors import InvalidArgumentError, RegistryError
from workbench.fixes.fix import Fix

# the modules of the built-in fixes, in catalog order: each defines FIXES, a tuple of Fix ("module:NAME"
# reads the tuple NAME instead)
BUILTIN_MODULES: tuple[str, ...] = (
    "workbench.fixes.baseline",  # eager
    "workbench.fixes.compile",  # compiled, compiled_dynamic, compiled_reduce_overhead, compiled_max_autotune
    "workbench.fixes.cuda_graph",
    # -- settings and data movement (one module each) --
    "workbench.fixes.tf32",
    "workbench.fixes.autocast_bf16",
    "workbench.fixes.autocast_fp16",
    "workbench.fixes.channels_last",
    "workbench.fixes.cudnn_benchmark",
    "workbench.fixes.inference_mode",
    "workbench.fixes.intra_op_threads",
    "workbench.fixes.pin_memory",
    "workbench.fixes.set_to_none",
    # -- module swaps and fused kernels (one module each) --
    "workbench.fixes.sdpa_attention",
    "workbench.fixes.fused_optimizer",
    "workbench.fixes.pad_to_multiple_of_8",
    "workbench.fixes.fused_kernels",  # fused_layer_norm, fused_rms_norm, fused_bias_gelu, fused_softmax, *cross_entropy
    "workbench.fixes.baseline:OWN_KERNEL",  # triton: your own kernel, named by hand
)

_FIXES: dict[str, Fix] = {}
_LOADED = False
_LOCK = threading.RLock()


def _load() -> None:
    global _LOADED
    if _LOADED:
        return
    with _LOCK:
        if _LOADED:
            return
        user = dict(_FIXES)  # registered before the first lookup: kept after the built-ins
        _FIXES.clear()
        for entry in BUILTIN_MODULES:
            module_name, _, attr = entry.partition(":")
            module = importlib.import_module(module_name)
            for fix in getattr(module, attr or "FIXES"):
                object.__setattr__(fix, "builtin", True)
                _FIXES[fix.name] = fix
        for name, fix in user.items():
            _FIXES[name] = fix
        _LOADED = True


def names() -> list[str]:
    _load()
    return list(_FIXES)


def catalog() -> list[Fix]:
    """Every fix, built-ins first in ``BUILTIN_MODULES`` order, then the user's."""
    _load()
    return list(_FIXES.values())


def describe() -> dict[str, str]:
    """name -> what it changes, in words."""
    return {fix.name: fix.changes for fix in catalog()}


def get(name: str) -> Fix:
    _load()
    try:
        return _FIXES[name]
    except KeyError:
        raise RegistryError(
            f"unknown variant {name!r} (no such fix in the catalog); known: {names()} "
            "(add your own with wb.fixes.register(Fix(...)) or wb.variants.register(name, builder))"
        ) from None


def get_builder(name: str) -> Callable[..., Any]:
    """The older registry's view of an entry: ``builder(fn, name=...) -> Variant``."""
    fix = get(name)
    return lambda fn, name=None, **kw: build(fix.name, fn, name=name, **kw)


def build(variant: str, fn: Callable[..., Any], *, name: str | None = None, context: Any = None, **kw: Any):
    """The fix ``variant`` applied to ``fn`` (a ``Variant`` labelled ``name``, default the fix's name)."""
    fix = get(variant)
    legacy = getattr(fix.transform, "__workbench_builder__", None)
    if kw:
        if legacy is None:
            raise InvalidArgumentError(
                f"fix {variant!r} takes no options ({sorted(kw)}); build it with wb.fixes.get({variant!r}).variant(fn)"
            )
        return legacy(fn, name=name or variant, **kw)
    return fix.variant(fn, name=name or variant, context=context)


def register(
    fix: Fix | str,
    builder: Callable[..., Any] | None = None,
    doc: str = "",
    *,
    replace: bool = False,
    numerical_class: str = "exact",
) -> Fix:
    """Add a fix to the catalog (``register(Fix(...))``), or a builder under a name (the older
    ``register(name, builder, doc)``); an existing name needs ``replace=True``."""
    if isinstance(fix, str):
        name = fix
        if builder is None or not callable(builder):
            raise InvalidArgumentError(f"register({name!r}, ...): the builder must be callable")

        def transform(fn, context, label, _builder=builder):
            return _builder(fn, name=label)

        transform.__workbench_builder__ = builder  # type: ignore[attr-defined]
        fix = Fix(
            name=name,
            changes=doc or (getattr(builder, "__doc__", "") or "").strip() or f"the user's builder {name!r}",
            kind="user",
            numerical_class=numerical_class,
            transform=transform,
        )
    elif not isinstance(fix, Fix):
        raise InvalidArgumentError(f"register() takes a wb.fixes.Fix or (name, builder); got {type(fix).__name__}")
    _load()
    with _LOCK:
        if fix.name in _FIXES and not replace:
            raise InvalidArgumentError(
                f"fix {fix.name!r} is already registered in the catalog; pass replace=True to replace it"
            )
        _FIXES[fix.name] = fix
    return fix


def unregister(name: str) -> None:
    get(name)
    with _LOCK:
        del _FIXES[name]
