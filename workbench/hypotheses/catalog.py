"""The rule catalog: every rule of ``workbench/hypotheses/rules`` registered, then looked up.

``registry`` only keeps what the ``@rule`` decorator registers; importing the rule modules is this
module's job, so the registry and the rules do not import each other.
"""

from __future__ import annotations

import workbench.hypotheses.rules  # noqa: F401  (each rule module registers its rules on import)
from workbench.hypotheses.registry import Rule, registered_rule, registered_rules


def get_rule(name: str) -> Rule:
    """The registered rule called ``name``; ``RegistryError`` naming the known rules otherwise."""
    return registered_rule(name)


def list_rules(scope: str | None = None) -> list[Rule]:
    """Every registered rule, or those of one scope ("trace" or "run")."""
    return registered_rules(scope)
