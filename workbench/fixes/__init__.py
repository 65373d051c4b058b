"""The catalog of fixes (``wb.fixes``): named, checked changes to the user's code, each with where it
applies in a run.

    run = wb.profile(step)
    run.fixes                                   # what applies here, ranked, with where and why
    cmp = wb.compare(run.fixes.variants())      # each checked (gradients too) and timed
    wb.fixes.names()                            # the whole catalog
    wb.fixes.register(wb.fixes.Fix(...))        # your own
    wb.fixes.apply("sdpa_attention", step)      # a kept fix made to your own model, in place

A fix (``Fix``) has a name, what it changes, the hypothesis categories and rules it tests, a
recogniser (``recognise(context) -> Applicability``), a transform (``transform(fn, context, name) ->
Variant``, on a deep copy of the model for a module swap), a numerical class and what it needs.  The
catalog is also the variant registry: every string ``wb.compare`` takes names a fix.
"""

from __future__ import annotations

from workbench.fixes.context import FixContext
from workbench.fixes.fix import KINDS, STATUSES, Applicability, Fix, Site, absent, applies, not_applicable
from workbench.fixes.in_place import AppliedFix, apply
from workbench.fixes.listing import FixList, applicable
from workbench.fixes.registry import build, catalog, describe, get, names, register, unregister


def for_run(run, fn=None, **kw) -> FixList:
    """The fixes that apply to ``run`` (a ``ProfileRun``); ``fn``: the live callable when the run
    does not hold it (a run loaded from a file)."""
    return applicable(FixContext.from_run(run, fn, **kw))


def for_callable(fn, **kw) -> FixList:
    """The fixes whose pattern is in ``fn``'s code alone (no run, no hypotheses: module swaps,
    optimizer and data-movement patterns)."""
    return applicable(FixContext.from_callable(fn, **kw))


__all__ = [
    "AppliedFix",
    "apply",
    "Fix",
    "Site",
    "Applicability",
    "FixContext",
    "FixList",
    "KINDS",
    "STATUSES",
    "applies",
    "not_applicable",
    "absent",
    "applicable",
    "for_run",
    "for_callable",
    "build",
    "catalog",
    "describe",
    "get",
    "names",
    "register",
    "unregister",
]
