"""What a fix is: a named, checked change to the user's code, and where it applies in a run.

A ``Fix`` says what it changes (in words), which hypothesis categories and rules (mechanisms) it
tests, how it recognises where it applies (``recognise(context) -> Applicability``: the module path,
source line or op it would change, or why not), how it builds a ``Variant`` from the user's callable
(``transform(fn, context, name) -> Variant``; a module swap works on a deep copy of the model, the
original is never touched), its numerical class (exact / reordered / reduced precision, which sets the
tolerance the correctness check uses) and what it needs (``requires``: capability names of
``workbench.variants.spec.REQUIREMENTS``).  Stdlib only at import: the transforms import torch.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Callable

from workbench.errors import InvalidArgumentError

if TYPE_CHECKING:
    from workbench.fixes.context import FixContext
    from workbench.variants.spec import Variant

KINDS = ("baseline", "compile", "capture", "setting", "data_movement", "module_swap", "kernel", "user")
NUMERICAL_CLASSES = ("exact", "reordered", "reduced precision", "approximate")
# what a recogniser says of a run: the fix applies here; its pattern is here but it cannot run here
# (a missing GPU, package or torch version: the row says why); its pattern is absent (not listed)
STATUSES = ("applies", "not_applicable", "absent")


@dataclass(frozen=True)
class Site:
    """One place a fix would change: ``where`` is a module path (``blocks.0.attn``), a source line
    (``train.py:42``), an op (``aten::mm``), an optimizer (``optimizer[0] AdamW``) or a setting."""

    where: str
    kind: str  # "module" | "line" | "op" | "optimizer" | "callable" | "setting"
    detail: str = ""

    def __str__(self) -> str:
        return f"{self.where} ({self.detail})" if self.detail else self.where

    def to_dict(self) -> dict[str, str]:
        return {"where": self.where, "kind": self.kind, "detail": self.detail}


@dataclass(frozen=True)
class Applicability:
    """What one fix's recogniser found in one run: ``status`` (``STATUSES``), ``reason`` in words
    (why it applies, or "not applicable: <why>"), the sites it would change, the hypotheses it tests
    there (their titles) and the time those hypotheses put at stake (ms per call; 0 when the fix was
    found by its pattern alone)."""

    fix: str
    status: str
    reason: str
    sites: tuple[Site, ...] = ()
    hypotheses: tuple[str, ...] = ()
    stake_ms: float = 0.0

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise InvalidArgumentError(f"Applicability.status must be one of {STATUSES}, got {self.status!r}")
        object.__setattr__(self, "sites", tuple(self.sites))
        object.__setattr__(self, "hypotheses", tuple(self.hypotheses))

    @property
    def applies(self) -> bool:
        return self.status == "applies"

    @property
    def where(self) -> str:
        """The sites in one line (``""`` when the fix changes the whole call)."""
        return ", ".join(str(s) for s in self.sites[:6]) + (
            f" and {len(self.sites) - 6} more" if len(self.sites) > 6 else ""
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "fix": self.fix,
            "status": self.status,
            "reason": self.reason,
            "sites": [s.to_dict() for s in self.sites],
            "hypotheses": list(self.hypotheses),
            "stake_ms": self.stake_ms,
        }


def applies(fix: str, reason: str, sites=(), **kw: Any) -> Applicability:
    return Applicability(fix, "applies", reason, tuple(sites), **kw)


def not_applicable(fix: str, why: str, sites=(), **kw: Any) -> Applicability:
    why = why if why.startswith("not applicable") else f"not applicable: {why}"
    return Applicability(fix, "not_applicable", why, tuple(sites), **kw)


def absent(fix: str, why: str) -> Applicability:
    return Applicability(fix, "absent", why)


Recogniser = Callable[["FixContext"], Applicability]
Transform = Callable[..., "Variant"]  # transform(fn, context, name) -> Variant


@dataclass(frozen=True)
class Fix:
    """One entry of the catalog; see the module docstring.  ``needs_live_code``: False where the fix
    can be recognised from a trace alone (a loaded run); every transform needs the callable.
    ``tolerance``: (rtol, atol) overriding the numerical class's default for float32 outputs, or None."""

    name: str
    changes: str
    kind: str
    numerical_class: str
    transform: Transform
    recognise: Recogniser | None = None
    categories: tuple[str, ...] = ()
    mechanisms: tuple[str, ...] = ()  # the hypothesis rules (``Hypothesis.rule``) it tests
    requires: tuple[str, ...] = ()
    needs_live_code: bool = True
    tolerance: tuple[float, float] | None = None
    builtin: bool = field(default=False, compare=False)

    def __post_init__(self) -> None:
        if not self.name or not isinstance(self.name, str):
            raise InvalidArgumentError(f"a fix needs a name, got {self.name!r}")
        if self.kind not in KINDS:
            raise InvalidArgumentError(f"fix {self.name!r}: kind must be one of {KINDS}, got {self.kind!r}")
        if self.numerical_class not in NUMERICAL_CLASSES:
            raise InvalidArgumentError(
                f"fix {self.name!r}: numerical_class must be one of {NUMERICAL_CLASSES}, got {self.numerical_class!r}"
            )
        if not callable(self.transform):
            raise InvalidArgumentError(f"fix {self.name!r}: transform must be callable (fn, context, name) -> Variant")
        if self.recognise is not None and not callable(self.recognise):
            raise InvalidArgumentError(f"fix {self.name!r}: recognise must be callable (context) -> Applicability")
        for attr in ("categories", "mechanisms", "requires"):
            object.__setattr__(self, attr, tuple(getattr(self, attr)))

    def missing(self) -> str | None:
        """Why this fix cannot run on this machine (its first unmet requirement), or None."""
        from workbench.variants.spec import missing_requirement

        return missing_requirement(self.requires)

    def variant(self, fn: Callable[..., Any], *, name: str | None = None, context: FixContext | None = None) -> Variant:
        """The fix applied to ``fn``: a ``Variant`` named ``name`` (default: the fix's name) that says
        which fix it is, where it was applied and its numerical class (``variant.options["fix"]``)."""
        from workbench.fixes.context import FixContext
        from workbench.fixes.guard import guarded_transform
        from workbench.variants.spec import Variant

        context = context if context is not None else FixContext.from_callable(fn)
        label = name or self.name
        built = guarded_transform(self, fn, context, label)  # a transform that changes the model in place is undone
        if not isinstance(built, Variant):
            raise InvalidArgumentError(
                f"fix {self.name!r}: its transform returned {type(built).__name__}, not a wb.variants.Variant"
            )
        built.name = label
        if NUMERICAL_CLASSES.index(self.numerical_class) > NUMERICAL_CLASSES.index(built.numerical_class):
            built.numerical_class = self.numerical_class  # the weaker of the two classes holds
        if self.requires:
            built.requires = tuple(dict.fromkeys((*built.requires, *self.requires)))
        built.options.setdefault("fix", self.name)
        built.options.setdefault("fix_changes", self.changes)
        if self.tolerance is not None:
            built.options.setdefault("tolerance", self.tolerance)
        return built

    def applicability(self, context: FixContext) -> Applicability:
        """What this fix's recogniser says of ``context``; a recogniser that raises is reported as
        "not applicable: the recogniser failed: <error>" (the rest of the catalog is unaffected)."""
        if self.recognise is None:
            return absent(self.name, "no recogniser: applied only when named")
        try:
            found = self.recognise(context)
        except Exception as exc:  # a user's recogniser may fail on code it did not expect
            return not_applicable(self.name, f"its recogniser failed: {type(exc).__name__}: {exc}")
        if not isinstance(found, Applicability):
            return not_applicable(self.name, f"its recogniser returned {type(found).__name__}, not an Applicability")
        if found.fix != self.name:
            found = replace(found, fix=self.name)
        if found.status == "applies":
            why = self.missing()
            if why is not None:
                found = replace(found, status="not_applicable", reason=f"not applicable: {why}")
        return found
