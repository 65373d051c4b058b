"""Builders for the simple variants: eager (the function as written) and torch.compile."""

from __future__ import annotations

from typing import Any, Callable

from workbench.errors import InvalidArgumentError
from workbench.variants.spec import Variant

COMPILE_MODES = (None, "default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")


def eager(fn: Callable[..., Any], *, name: str = "eager") -> Variant:
    """The function as written: the usual baseline and the float64 reference."""
    return Variant(
        name=name,
        fn=fn,
        kind="eager",
        numerical_class="exact",
        description=f"{getattr(fn, '__name__', 'fn')} as written (eager PyTorch)",
    )


def compiled(
    fn: Callable[..., Any],
    *,
    mode: str | None = None,
    dynamic: bool | None = None,
    fullgraph: bool = False,
    backend: str = "inductor",
    name: str | None = None,
) -> Variant:
    """``torch.compile(fn, mode=..., dynamic=...)``; compiles lazily on the first call.

    The first call's time (compile, autotune) is reported apart as the variant's setup time.
    Numerics are "reordered": fused kernels may sum in a different order.
    """
    if mode not in COMPILE_MODES:
        raise InvalidArgumentError(f"compile mode must be one of {COMPILE_MODES}, got {mode!r}")
    import torch

    compiled_fn = torch.compile(fn, mode=mode, dynamic=dynamic, fullgraph=fullgraph, backend=backend)
    label = "compiled" if mode in (None, "default") else f"compiled[{mode}]"
    return Variant(
        name=name or label,
        fn=compiled_fn,
        requires=("torch.compile",),
        kind="compiled",
        numerical_class="reordered",
        options={"mode": mode, "dynamic": dynamic, "fullgraph": fullgraph, "backend": backend},
        description=f"torch.compile(mode={mode!r}, dynamic={dynamic!r}, backend={backend!r})",
    )


def user(
    fn: Callable[..., Any],
    *,
    name: str | None = None,
    requires: tuple[str, ...] = (),
    numerical_class: str = "exact",
    description: str = "",
) -> Variant:
    """Any callable of the user's (a rewrite), with what it needs and its numerical class."""
    return Variant(
        name=str(name or getattr(fn, "__name__", "user")),
        fn=fn,
        requires=requires,
        kind="user",
        numerical_class=numerical_class,
        description=description or f"user rewrite {getattr(fn, '__name__', '')}",
    )
