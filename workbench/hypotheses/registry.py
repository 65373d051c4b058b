"""The rule registry: every rule is a small pure function with named thresholds.

A rule takes the facts of one run or trace (``TraceFacts`` / ``RunFacts``) and its thresholds,
and returns hypotheses (zero or more). When the facts it needs are absent it raises
``NotJudged`` with a plain reason; the diagnosis reports that reason instead of guessing.

A rule's thresholds are a frozen value of its own class (``Limits``: one typed field per
threshold with its default, declared beside the rule), read as attributes (``limits.min_share_pct``),
so that a misspelt threshold is a type error and an override of one it does not have is refused.

A rule's judgement and its words are apart (``workbench.hypotheses.words``): the function returns a
``Finding`` of the rule's own class (its numbers, evidence, stake and the branch that fired) and the
rule declares one ``Words`` block per branch; the registry checks at registration that the words read
only the finding's fields, and tells each finding in its branch's words.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Callable, Iterable, Mapping

from workbench.errors import InvalidArgumentError, NotJudged, RegistryError  # NotJudged: rules import it here
from workbench.hypotheses.hypothesis import CATEGORIES, Hypothesis
from workbench.hypotheses.words import DEFAULT_BRANCH, Finding, Words, check_words

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


RuleFn = Callable[[Any, Any], "Iterable[Finding] | Finding | None"]


@dataclass(frozen=True)
class Rule:
    name: str
    category: str
    scope: str  # "trace": reads a Trace's tables; "run": reads a ProfileRun
    limits: Limits  # the thresholds at their defaults
    fn: RuleFn = field(repr=False)
    doc: str = ""
    words: Mapping[str, Words] = field(default_factory=dict, repr=False)  # by branch
    finding: type[Finding] = Finding

    @property
    def thresholds(self) -> Mapping[str, float]:
        """The thresholds by name, at their defaults (for listings and reports; rules read ``limits``)."""
        return MappingProxyType(self.limits.as_dict())

    def __call__(self, facts: Any, **overrides: float) -> list[Hypothesis]:
        limits = self.limits.overridden(self.name, **overrides)
        out = self.fn(facts, limits)
        if out is None:
            return []
        found = [out] if isinstance(out, (Hypothesis, Finding)) else list(out)
        return [self.told(x) for x in found]

    def told(self, finding: Finding) -> Hypothesis:
        """A finding in the words of its branch."""
        if isinstance(finding, Hypothesis):
            raise InvalidArgumentError(
                f"rule {self.name!r} returned a Hypothesis: a rule returns its Finding and declares its words"
            )
        if not isinstance(finding, self.finding):
            raise InvalidArgumentError(
                f"rule {self.name!r} returned a {type(finding).__name__}; it declares {self.finding.__name__}"
            )
        try:
            words = self.words[finding.branch]
        except KeyError:
            raise InvalidArgumentError(
                f"rule {self.name!r}: no words for branch {finding.branch!r}; it declares {sorted(self.words)}"
            ) from None
        return words.hypothesis(finding, category=self.category, rule=self.name)


_RULES: dict[str, Rule] = {}


def rule(
    name: str,
    *,
    category: str,
    scope: str,
    limits: type[Limits] = Limits,
    finding: type[Finding] | None = None,
    words: "Words | Mapping[str, Words] | None" = None,
) -> Callable[[RuleFn], RuleFn]:
    """Register ``fn`` as rule ``name`` with its thresholds (``limits``: its ``Limits`` class, every field
    with a default), the class of what it finds (``finding``) and the words of each branch (``words``: one
    block, or a mapping from branch name to block)."""
    if not (isinstance(limits, type) and issubclass(limits, Limits) and dataclasses.is_dataclass(limits)):
        raise InvalidArgumentError(f"rule {name!r}: limits must be a frozen Limits dataclass; got {limits!r}")
    if category not in CATEGORIES:
        raise InvalidArgumentError(f"rule {name!r}: category {category!r} is not one of {CATEGORIES}")
    if scope not in SCOPES:
        raise InvalidArgumentError(f"rule {name!r}: scope must be one of {SCOPES}; got {scope!r}")

    blocks: dict[str, Words] = {}
    if words is not None:
        blocks = {DEFAULT_BRANCH: words} if isinstance(words, Words) else dict(words)
    if finding is not None or blocks:
        check_words(name, blocks, finding if finding is not None else Finding)

    def register(fn: RuleFn) -> RuleFn:
        if name in _RULES and _RULES[name].fn is not fn:
            raise InvalidArgumentError(f"rule {name!r} is registered twice")
        doc = (fn.__doc__ or "").strip().splitlines()[0] if fn.__doc__ else ""
        _RULES[name] = Rule(name, category, scope, limits(), fn, doc, MappingProxyType(blocks), finding or Finding)
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
