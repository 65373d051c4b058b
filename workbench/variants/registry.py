"""The variant registry is the catalog of fixes (``workbench.fixes.registry``): this module keeps the
older names (``wb.variants.build / get / names / describe / register / unregister``) working on it.

``build(name, fn)`` makes the variant; an unknown name raises RegistryError listing the known ones.
``register(name, builder)`` adds a user's own (a builder takes ``fn`` and ``name=``).
"""

from __future__ import annotations

from typing import Any, Callable

import workbench.fixes.registry as catalog
from workbench.variants.spec import Variant

Builder = Callable[..., Variant]


def names() -> list[str]:
    return catalog.names()


def describe() -> dict[str, str]:
    return catalog.describe()


def get(name: str) -> Builder:
    return catalog.get_builder(name)


def build(variant: str, fn: Callable[..., Any], *, name: str | None = None, **kw: Any) -> Variant:
    """The registry's variant ``variant`` of ``fn``; ``name`` labels its row (default: ``variant``)."""
    return catalog.build(variant, fn, name=name, **kw)


def register(name: str, builder: Builder, doc: str = "", *, replace: bool = False) -> None:
    catalog.register(name, builder, doc, replace=replace)


def unregister(name: str) -> None:
    catalog.unregister(name)
