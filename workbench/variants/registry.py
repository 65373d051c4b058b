"""The variant registry: names a hypothesis can suggest, each a builder from the original function.

``build(name, fn)`` makes the variant; an unknown name raises RegistryError listing the known
ones.  ``register(name, builder)`` adds a user's own (a builder takes ``fn`` and ``name=``).
"""

from __future__ import annotations

from typing import Any, Callable

import workbench.variants.builders as builders
from workbench.errors import InvalidArgumentError, RegistryError
from workbench.variants.cuda_graph import cuda_graph
from workbench.variants.spec import Variant

Builder = Callable[..., Variant]


def _triton_needs_launcher(fn: Callable[..., Any], name: str = "triton") -> Variant:
    raise InvalidArgumentError(
        "a Triton variant cannot be built from the original function alone: write the @triton.jit "
        "kernel and a launcher with the same signature, then pass wb.variants.triton(launcher)"
    )


_REGISTRY: dict[str, tuple[Builder, str]] = {
    "eager": (builders.eager, "the function as written"),
    "compiled": (lambda fn, name="compiled": builders.compiled(fn, name=name), "torch.compile, default mode"),
    "compiled_dynamic": (
        lambda fn, name="compiled_dynamic": builders.compiled(fn, dynamic=True, name=name),
        "torch.compile with dynamic shapes (one graph for many sizes)",
    ),
    "compiled_reduce_overhead": (
        lambda fn, name="compiled_reduce_overhead": builders.compiled(fn, mode="reduce-overhead", name=name),
        "torch.compile mode='reduce-overhead' (CUDA graphs inside)",
    ),
    "compiled_max_autotune": (
        lambda fn, name="compiled_max_autotune": builders.compiled(fn, mode="max-autotune", name=name),
        "torch.compile mode='max-autotune'",
    ),
    "cuda_graph": (lambda fn, name="cuda_graph": cuda_graph(fn, name=name), "CUDA graph capture and replay"),
    "triton": (_triton_needs_launcher, "your @triton.jit kernel via its launcher"),
}


def names() -> list[str]:
    return list(_REGISTRY)


def describe() -> dict[str, str]:
    return {name: doc for name, (_, doc) in _REGISTRY.items()}


def get(name: str) -> Builder:
    try:
        return _REGISTRY[name][0]
    except KeyError:
        raise RegistryError(
            f"unknown variant {name!r}; the registry has {names()} "
            f"(add your own with wb.variants.register(name, builder))"
        ) from None


def build(variant: str, fn: Callable[..., Any], *, name: str | None = None, **kw: Any) -> Variant:
    """The registry's variant ``variant`` of ``fn``; ``name`` labels its row (default: ``variant``)."""
    return get(variant)(fn, name=name or variant, **kw)


def register(name: str, builder: Builder, doc: str = "", *, replace: bool = False) -> None:
    if not callable(builder):
        raise InvalidArgumentError(f"register({name!r}, ...): the builder must be callable")
    if name in _REGISTRY and not replace:
        raise InvalidArgumentError(f"variant {name!r} is already registered; pass replace=True to replace it")
    _REGISTRY[name] = (builder, doc or getattr(builder, "__doc__", "") or "")


def unregister(name: str) -> None:
    get(name)
    del _REGISTRY[name]
