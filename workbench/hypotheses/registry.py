"""The rule registry: every rule is a small pure function with named thresholds.

A rule takes the facts of one run or trace (``TraceFacts`` / ``RunFacts``) and its thresholds,
and returns hypotheses (zero or more). When the facts it needs are absent it raises
``NotJudged`` with a plain reason; the diagnosis reports that reason instead of guessing.

A rule's thresholds are a frozen value of its own class (``Limits``: one typed field per
threshold with its default, declared beside the rule), read as attributes (``limits.min_share_pct``),
so that a misspelt threshold is a type error and an override of one it does not have is refused.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Callable, Iterable, Mapping

from workbench.errors import InvalidArgumentError, NotJudged, RegistryError  # NotJudged: rules import it here
from workbench.hypotheses.hypothesis import CATEGORIES, Hypothesis

SCOPES = ("trace", "run")


@dataclass(frozen=True)
class Limits:
    """A rule's thresholds: subclassed once per rule, one field per threshold with its default."""

    def as_dict(self) -> dict[str, float]:
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}

    def overridden(self, rule_name: str, **overrides: float) -> Limits:
        """These thresholds with some replaced; a name the rule has no threshold of is refused."""
        known = [f.name for f in dataclasses.fields(self)]
        unknown = set(overrides) - set(known)
        if unknown:
            raise InvalidArgumentError(
                f"rule {rule_name!r} has no threshold(s) {sorted(unknown)}; its thresholds are {sorted(known)}"
            )
        return dataclasses.replace(self, **overrides) if overrides else self


RuleFn = Callable[[Any, Any], "Iterable[Hypothesis] | Hypothesis | None"]


@dataclass(frozen=True)
class Rule:
    name: str
    category: str
    scope: str  # "trace": reads a Trace's tables; "run": reads a ProfileRun
    limits: Limits  # the thresholds at their defaults
    fn: RuleFn = field(repr=False)
    doc: str = ""

    @property
    def thresholds(self) -> Mapping[str, float]:
        """The thresholds by name, at their defaults (for listings and reports; rules read ``limits``)."""
        return MappingProxyType(self.limits.as_dict())

    def __call__(self, facts: Any, **overrides: float) -> list[Hypothesis]:
        limits = self.limits.overridden(self.name, **overrides)
        out = self.fn(facts, limits)
        if out is None:
            return []
        found = [out] if isinstance(out, Hypothesis) else list(out)
        return [h if h.rule else _named(h, self.name) for h in found]


def _named(h: Hypothesis, rule_name: str) -> Hypothesis:
    from dataclasses import replace

    return replace(h, rule=rule_name)


_RULES: dict[str, Rule] = {}


def rule(name: str, *, category: str, scope: str, limits: type[Limits] = Limits) -> Callable[[RuleFn], RuleFn]:
    """Register ``fn`` as rule ``name`` with its thresholds (``limits``: its ``Limits`` class, every field
    with a default)."""
    if not (isinstance(limits, type) and issubclass(limits, Limits) and dataclasses.is_dataclass(limits)):
        raise InvalidArgumentError(f"rule {name!r}: limits must be a frozen Limits dataclass; got {limits!r}")
    if category not in CATEGORIES:
        raise InvalidArgumentError(f"rule {name!r}: category {category!r} is not one of {CATEGORIES}")
    if scope not in SCOPES:
        raise InvalidArgumentError(f"rule {name!r}: scope must be one of {SCOPES}; got {scope!r}")

    def register(fn: RuleFn) -> RuleFn:
        if name in _RULES and _RULES[name].fn is not fn:
            raise InvalidArgumentError(f"rule {name!r} is registered twice")
        doc = (fn.__doc__ or "").strip().splitlines()[0] if fn.__doc__ else ""
        _RULES[name] = Rule(name, category, scope, limits(), fn, doc)
        return fn

    return register


def registered_rule(name: str) -> Rule:
    """A rule registered so far (``workbench.hypotheses.catalog.get_rule`` loads the catalog first)."""
    try:
        return _RULES[name]
    except KeyError:
        known = ", ".join(sorted(_RULES))
        raise RegistryError(f"no rule named {name!r}; known rules: {known}") from None


def registered_rules(scope: str | None = None) -> list[Rule]:
    """The rules registered so far (``workbench.hypotheses.catalog.list_rules`` loads the catalog first)."""
    if scope is not None and scope not in SCOPES:
        raise InvalidArgumentError(f"scope must be one of {SCOPES} or None; got {scope!r}")
    return [r for r in _RULES.values() if scope is None or r.scope == scope]
