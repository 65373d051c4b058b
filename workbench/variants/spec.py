"""What a variant is: a named callable plus what it needs to run.

A variant whose requirement is missing on this machine is reported as "not applicable" with
the reason, never silently skipped.  ``requires`` names capabilities from ``REQUIREMENTS``.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass, field
from typing import Any, Callable, Union

from workbench.errors import InvalidArgumentError

NUMERICAL_CLASSES = ("exact", "reordered", "reduced precision", "approximate")
OLD_CLASS_NAMES = {"lower precision": "reduced precision"}  # read from saved records and older callers


def _cuda_missing() -> str | None:
    import torch

    if not torch.cuda.is_available():
        return "needs a CUDA/ROCm GPU; torch.cuda.is_available() is False on this machine"
    return None


def _triton_missing() -> str | None:
    if importlib.util.find_spec("triton") is None:
        return "needs the triton package, which is not installed (pip install triton)"
    return None


def _compile_missing() -> str | None:
    import torch

    if not hasattr(torch, "compile"):
        return f"torch {torch.__version__} has no torch.compile"
    return None


# capability name -> probe returning None when present, else the reason it is missing
REQUIREMENTS: dict[str, Callable[[], str | None]] = {
    "cuda": _cuda_missing,
    "triton": _triton_missing,
    "torch.compile": _compile_missing,
}


def missing_requirement(requires: tuple[str, ...]) -> str | None:
    """The first unmet requirement's reason, or None when all are met."""
    for name in requires:
        probe = REQUIREMENTS.get(name)
        if probe is None:
            raise InvalidArgumentError(f"unknown requirement {name!r}; known requirements: {sorted(REQUIREMENTS)}")
        reason = probe()
        if reason is not None:
            return f"{name}: {reason}"
    return None


@dataclass
class Variant:
    """A callable to compare, with what it needs and how its numerics relate to the original.

    ``setup_s`` is filled after the first call for variants with a one-off cost (compile,
    capture); ``poison`` (optional) fills a variant's own persistent output buffers with NaN
    so that elements a run forgets to write show up in the correctness check.
    ``timing_meaningful`` is False where the numbers say nothing about speed (Triton's
    interpreter on CPU).
    """

    name: str
    fn: Callable[..., Any]
    requires: tuple[str, ...] = ()
    kind: str = "user"
    numerical_class: str = "exact"
    description: str = ""
    options: dict[str, Any] = field(default_factory=dict)
    poison: Callable[[], None] | None = None
    timing_meaningful: bool = True
    not_applicable_reason: str | None = None  # set by builders that know up front
    # the same change made to the user's own model and optimizer, in place (``wb.fixes.apply``): returns what
    # it changed; None where the change cannot be made in place (it rebinds code, or replaces the model)
    in_place: Callable[[], list[str]] | None = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.numerical_class = OLD_CLASS_NAMES.get(self.numerical_class, self.numerical_class)
        if not callable(self.fn):
            raise InvalidArgumentError(f"variant {self.name!r}: expected a callable, got {type(self.fn).__name__}")
        if self.numerical_class not in NUMERICAL_CLASSES:
            raise InvalidArgumentError(
                f"variant {self.name!r}: numerical_class must be one of {NUMERICAL_CLASSES}, "
                f"got {self.numerical_class!r}"
            )
        self.requires = tuple(self.requires)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.fn(*args, **kwargs)

    def applicability(self) -> str | None:
        """None when the variant can run here, else the reason it cannot."""
        return self.not_applicable_reason or missing_requirement(self.requires)


# What ``compare`` and ``Study.run_round`` take per name: a callable, a ``Variant`` or a registry name.
VariantLike = Union[Callable[..., Any], Variant, str]


def as_variant(name: str, obj: object) -> Variant:
    """Wrap a plain callable as a user variant; a Variant keeps its own settings (renamed)."""
    if isinstance(obj, Variant):
        if obj.name != name:
            obj.name = name
        return obj
    if not callable(obj):
        raise InvalidArgumentError(
            f"variant {name!r}: expected a callable or a Variant, got {type(obj).__name__}; "
            f"pass e.g. {{'{name}': my_function}}"
        )
    return Variant(name=name, fn=obj, kind="user", description=getattr(obj, "__name__", ""))
