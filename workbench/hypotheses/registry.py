"""The rule registry: every rule is a small pure function with named thresholds.

A rule takes the facts of one run or trace (``TraceFacts`` / ``RunFacts``) and its thresholds,
and returns hypotheses (zero or more). When the facts it needs are absent it raises
``NotJudged`` with a plain reason; the diagnosis reports that reason instead of guessing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Callable, Iterable, Mapping

from workbench.errors import InvalidArgumentError, NotJudged, RegistryError  # NotJudged: rules import it here
from workbench.hypotheses.hypothesis import CATEGORIES, Hypothesis

SCOPES = ("trace", "run")


RuleFn = Callable[[Any, Mapping[str, float]], "Iterable[Hypothesis] | Hypothesis | None"]


@dataclass(frozen=True)
class Rule:
    name: str
    category: str
    scope: str  # "trace": reads a Trace's tables; "run": reads a ProfileRun
    thresholds: Mapping[str, float]
    fn: RuleFn = field(repr=False)
    doc: str = ""

    def __call__(self, facts: Any, **overrides: float) -> list[Hypothesis]:
        unknown = set(overrides) - set(self.thresholds)
        if unknown:
            raise InvalidArgumentError(
                f"rule {self.name!r} has no threshold(s) {sorted(unknown)}; "
                f"its thresholds are {sorted(self.thresholds)}"
            )
        limits = {**self.thresholds, **overrides}
        out = self.fn(facts, limits)
        if out is None:
            return []
        found = [out] if isinstance(out, Hypothesis) else list(out)
        return [h if h.rule else _named(h, self.name) for h in found]


def _named(h: Hypothesis, rule_name: str) -> Hypothesis:
    from dataclasses import replace

    return replace(h, rule=rule_name)


_RULES: dict[str, Rule] = {}


def rule(name: str, *, category: str, scope: str, **thresholds: float) -> Callable[[RuleFn], RuleFn]:
    """Register ``fn`` as rule ``name`` with its named thresholds (keyword arguments)."""
    if category not in CATEGORIES:
        raise InvalidArgumentError(f"rule {name!r}: category {category!r} is not one of {CATEGORIES}")
    if scope not in SCOPES:
        raise InvalidArgumentError(f"rule {name!r}: scope must be one of {SCOPES}; got {scope!r}")

    def register(fn: RuleFn) -> RuleFn:
        if name in _RULES and _RULES[name].fn is not fn:
            raise InvalidArgumentError(f"rule {name!r} is registered twice")
        doc = (fn.__doc__ or "").strip().splitlines()[0] if fn.__doc__ else ""
        _RULES[name] = Rule(name, category, scope, MappingProxyType(dict(thresholds)), fn, doc)
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
