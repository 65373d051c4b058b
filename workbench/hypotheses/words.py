"""A rule's words, declared apart from its judgement.

A rule computes a ``Finding``: a frozen value of its own class holding the numbers it measured (the
fields its words read), its evidence, the time at stake and which branch fired. What a reader is told
(title, observed, mechanism, predicted effect, falsifier, confounders) is a ``Words`` block declared
beside the rule, one per branch, whose texts are ``str.format`` templates over the finding's fields
(``"{share_pct:.0f}% of {what}"``). The registry checks when the rule is registered that every field a
template names is a field of the rule's finding class, and renders a finding into a ``Hypothesis``.

A clause that holds only sometimes (" (12 per step)" in a title, "; the largest score matrix ..." in an
observation) is a *part*: a template in ``Words.parts`` under a name, which any text reads as a field
(``"{n} host syncs{per_step}"``); it reads as its template where the finding lists the name in ``parts``,
else as nothing. A confounder that holds only sometimes is a *note*: a template in ``Words.notes`` under a
key, shown when the finding lists the key in ``notes``. ``Words.scope``, where given, is the template of the
hypothesis's scope (``"rank {rank}"``); else the finding's ``scope`` text is used. A confounder whose text is data (names read from the trace, one line
per rank) is a template over a field too; a variable number of them goes in the finding's
``more_confounders`` (already formatted), after the declared ones.
"""

from __future__ import annotations

import dataclasses
import string
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Mapping

from workbench.errors import InvalidArgumentError
from workbench.hypotheses.hypothesis import CONFIDENCES, Evidence, Hypothesis

DEFAULT_BRANCH = ""
_TEXTS = ("title", "observed", "mechanism", "predicted_effect", "falsifier")


@dataclass(frozen=True, kw_only=True)
class Finding:
    """What a rule found: subclassed once per rule with the numbers its words read.

    ``branch`` names the rule's ``Words`` block that describes it (``""``: the rule's only one);
    ``notes`` are the keys of the block's conditional confounders that hold, ``parts`` the names of its
    optional clauses that hold; ``suggested_variants``
    replaces the block's declared fixes where the finding decides them (``None``: the declared ones).
    """

    evidence: tuple[Evidence, ...]
    time_at_stake_ms: float
    branch: str = DEFAULT_BRANCH
    confidence: str = "medium"
    scope: str = ""
    notes: tuple[str, ...] = ()
    parts: tuple[str, ...] = ()
    more_confounders: tuple[str, ...] = ()
    suggested_variants: tuple[str, ...] | None = None

    def values(self) -> dict[str, Any]:
        """The fields the words may read, by name."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}


def template_fields(text: str) -> frozenset[str]:
    """The field names a ``str.format`` template reads (the root of ``{a.b}`` / ``{a[0]}``)."""
    names = set()
    for _, name, spec, _ in string.Formatter().parse(text):
        if name is None:
            continue
        if name == "" or name.isdigit():
            raise InvalidArgumentError(f"template {text!r}: positional fields are not allowed; name the field")
        names.add(name.split(".", 1)[0].split("[", 1)[0])
        if spec:
            names |= template_fields(spec)
    return frozenset(names)


@dataclass(frozen=True)
class Words:
    """What one branch of a rule says: templates over the fields of the rule's finding."""

    title: str
    observed: str
    mechanism: str
    predicted_effect: str
    falsifier: str
    confounders: tuple[str, ...] = ()
    notes: Mapping[str, str] = field(default_factory=dict)
    suggested_variants: tuple[str, ...] = ()
    parts: Mapping[str, str] = field(default_factory=dict)
    scope: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "confounders", tuple(self.confounders))
        object.__setattr__(self, "notes", MappingProxyType(dict(self.notes)))
        object.__setattr__(self, "suggested_variants", tuple(self.suggested_variants))
        object.__setattr__(self, "parts", MappingProxyType(dict(self.parts)))
        for name, text in self.parts.items():
            if template_fields(text) & set(self.parts):
                raise InvalidArgumentError(f"part {name!r} reads another part: parts read the finding's fields only")

    def fields(self) -> frozenset[str]:
        """Every finding field these words read (a part's name is not one: it is the part's own fields)."""
        texts = [getattr(self, t) for t in _TEXTS] + list(self.confounders) + list(self.notes.values())
        texts += list(self.parts.values()) + ([self.scope] if self.scope is not None else [])
        return frozenset().union(*(template_fields(t) for t in texts)) - set(self.parts)

    def hypothesis(self, finding: Finding, *, category: str, rule: str) -> Hypothesis:
        """The finding told in these words."""
        values = finding.values()
        for kind, named, declared in (("notes", finding.notes, self.notes), ("parts", finding.parts, self.parts)):
            unknown = [n for n in named if n not in declared]
            if unknown:
                raise InvalidArgumentError(
                    f"rule {rule!r}: the finding names {kind} {unknown} its words do not declare ({sorted(declared)})"
                )
        for name, text in self.parts.items():
            values[name] = text.format_map(values) if name in finding.parts else ""
        if finding.confidence not in CONFIDENCES:
            raise InvalidArgumentError(f"rule {rule!r}: confidence {finding.confidence!r} is not one of {CONFIDENCES}")

        def say(text: str) -> str:
            return text.format_map(values)

        confounders = [say(c) for c in self.confounders]
        confounders += [say(self.notes[n]) for n in finding.notes]
        confounders += list(finding.more_confounders)
        suggested = self.suggested_variants if finding.suggested_variants is None else finding.suggested_variants
        return Hypothesis(
            category=category,
            title=say(self.title),
            observed=say(self.observed),
            mechanism=say(self.mechanism),
            evidence=tuple(finding.evidence),
            time_at_stake_ms=finding.time_at_stake_ms,
            predicted_effect=say(self.predicted_effect),
            falsifier=say(self.falsifier),
            confounders=tuple(confounders),
            confidence=finding.confidence,
            suggested_variants=tuple(suggested),
            rule=rule,
            scope=say(self.scope) if self.scope is not None else finding.scope,
        )


def check_words(rule: str, words: Mapping[str, Words], finding: type[Finding]) -> None:
    """Refuse words that read a field the finding class lacks (at registration, not when a rule fires)."""
    if not (isinstance(finding, type) and issubclass(finding, Finding) and dataclasses.is_dataclass(finding)):
        raise InvalidArgumentError(f"rule {rule!r}: finding must be a frozen Finding dataclass; got {finding!r}")
    if not words:
        raise InvalidArgumentError(f"rule {rule!r}: a rule that returns findings declares their words")
    known = {f.name for f in dataclasses.fields(finding)}
    for branch, block in words.items():
        if not isinstance(block, Words):
            raise InvalidArgumentError(f"rule {rule!r}: branch {branch!r} is not a Words block; got {block!r}")
        clash = sorted(set(block.parts) & known)
        if clash:
            raise InvalidArgumentError(f"rule {rule!r}: parts {clash} have the names of fields of {finding.__name__}")
        missing = sorted(block.fields() - known)
        if missing:
            where = f"branch {branch!r}" if branch else "its words"
            raise InvalidArgumentError(f"rule {rule!r}: {where} read {missing}, which {finding.__name__} does not have")
