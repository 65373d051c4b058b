"""``wb.fixes.apply(name, fn)``: a checked fix made to the user's own model and optimizer, in place.

A comparison checks and times a fix on copies (``Fix.variant``: the user's model is never touched). Once a
fix is kept, a user wants it in their model, not in a copy their training loop does not use. Fixes whose
change is structural and parameter-preserving say how to make it in place (``Variant.in_place``): the module
swaps (hand-written attention -> SDPA, the fused norm / softmax / bias-GELU kernels: each replaced submodule
keeps its parameter objects, so an optimizer built over them keeps stepping them and keeps its state) and the
fused optimizer (its param groups switched to ``fused`` / ``foreach``). Fixes that rebind the code itself
(compile, CUDA graphs, settings wrappers, set_to_none, the cross-entropy call sites) have no in-place form:
``apply`` says so and names the variant to use instead. A swap that would replace a model as a whole or give
it other parameters is refused with the model put back as it was.

    wb.fixes.apply("sdpa_attention", step)        # step's model now runs F.scaled_dot_product_attention
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from workbench.errors import InvalidArgumentError


@dataclass(frozen=True)
class AppliedFix:
    """What ``apply`` changed in the user's objects: the fix and each site (``blocks.0.attn (…)``)."""

    fix: str
    changed: tuple[str, ...]

    def __str__(self) -> str:
        return f"{self.fix} applied in place: " + "; ".join(self.changed)


def apply(name: str, fn: Callable[..., Any], *, model: Any = None, optimizer: Any = None) -> AppliedFix:
    """Make the fix ``name`` to the model and optimizer ``fn`` uses, in place.

    Args:
        name: a catalog fix (``wb.fixes.names()``) with an in-place form.
        fn: the code the fix was found in (the training step, a notebook cell's callable).
        model: an ``nn.Module`` the code uses but does not reach by itself.
        optimizer: an optimizer likewise.

    Returns:
        AppliedFix: the sites changed. Raises ``InvalidArgumentError`` (nothing changed) where the fix does
        not apply to this code, cannot run here, or has no in-place form.
    """
    from workbench.fixes.context import FixContext
    from workbench.fixes.registry import get

    fix = get(name)
    context = FixContext.from_callable(fn, model=model, optimizer=optimizer)
    variant = fix.variant(fn, context=context)  # built (and so checked buildable) on a copy first
    why = variant.applicability()
    if why:
        raise InvalidArgumentError(f"fix {name!r} cannot be applied to this code: {why}")
    if variant.in_place is None:
        raise InvalidArgumentError(
            f"fix {name!r} ({fix.kind}) has no in-place form: it changes the code that runs, not your model; "
            f"use its variant instead: fast = wb.variants.build({name!r}, fn)"
        )
    changed = tuple(variant.in_place())
    if not changed:
        raise InvalidArgumentError(f"fix {name!r} cannot be applied to this code: nothing in it to change")
    return AppliedFix(fix.name, changed)
