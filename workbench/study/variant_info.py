"""What a study records of a callable it cannot store: a baseline's or a round's variant described
(kind, options, description; a catalog fix by its name, which rebuilds it) and the code a round
tested identified afterwards (source hash, qualified name)."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, Mapping, TypeGuard

import workbench.study.identity as identity

if TYPE_CHECKING:
    from workbench.variants.spec import Variant, VariantLike


def is_variant(obj: object) -> TypeGuard[Variant]:
    return type(obj).__name__ == "Variant" and dataclasses.is_dataclass(obj) and hasattr(obj, "fn")


def plain_options(options: Mapping[str, Any]) -> dict[str, Any]:
    return {str(k): (v if isinstance(v, (int, float, str, bool)) or v is None else repr(v)) for k, v in options.items()}


def variant_info(obj: VariantLike | None) -> dict[str, Any]:
    if isinstance(obj, str):
        return {"kind": obj, "registry": obj, "options": {}, "description": f"registry variant {obj!r}"}
    if is_variant(obj):
        info = {
            "kind": obj.kind,
            "options": plain_options(obj.options),
            "description": obj.description,
            "numerical_class": obj.numerical_class,
            "requires": list(obj.requires),
        }
        fix = (obj.options or {}).get("fix")
        if fix and fix != "eager":  # built from a catalog fix: its name rebuilds it (as a registry name does)
            info.update(fix=str(fix), registry=str(fix), where=str(obj.options.get("fix_where", "") or ""))
            if obj.not_applicable_reason:
                info["not_applicable"] = obj.not_applicable_reason
        return info
    return {"kind": "function", "options": {}, "description": getattr(obj, "__qualname__", "") or type(obj).__name__}


def tested_code(obj: VariantLike) -> dict[str, Any]:
    """What identifies a round's variant code afterwards: its source hash and qualified name
    (nothing for a registry name, which the round rebuilds)."""
    if isinstance(obj, str):
        return {}
    return {"source_hash": identity.source_hash(obj), "qualname": identity.callable_ref(obj).get("qualname")}
