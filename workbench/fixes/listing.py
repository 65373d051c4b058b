"""``FixList``: the fixes that apply to one run (``run.fixes``), ranked by the time the hypotheses
they test put at stake, each with where it applies and why; those whose pattern is here but which
cannot run here (no CUDA device, a missing package) are listed after them with the reason.
``variants()`` feeds ``wb.compare``."""

from __future__ import annotations

import time
from typing import Any, Callable, Iterator, Sequence

from workbench.errors import InvalidArgumentError
from workbench.fixes.context import FixContext
from workbench.fixes.fix import Applicability


class FixList(Sequence[Applicability]):
    def __init__(self, rows: Sequence[Applicability], context: FixContext, *, elapsed_s: float = 0.0):
        self.rows = list(rows)
        self.context = context
        self.elapsed_s = elapsed_s  # how long recognising took

    # -- a sequence of rows -------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, i):  # type: ignore[override]
        return self.rows[i]

    def __iter__(self) -> Iterator[Applicability]:
        return iter(self.rows)

    def __contains__(self, name: object) -> bool:
        return any(r.fix == name or r is name for r in self.rows)

    @property
    def names(self) -> list[str]:
        """The fixes that apply here (runnable), best first."""
        return [r.fix for r in self.rows if r.applies]

    @property
    def not_applicable(self) -> list[Applicability]:
        return [r for r in self.rows if not r.applies]

    def row(self, name: str) -> Applicability:
        for r in self.rows:
            if r.fix == name:
                return r
        raise InvalidArgumentError(
            f"fix {name!r} is not listed for this run (listed: {[r.fix for r in self.rows]}); "
            "wb.fixes.names() has the whole catalog"
        )

    # -- to wb.compare ------------------------------------------------------------------------------
    def variants(
        self, names: Sequence[str] | None = None, *, baseline: str = "eager", fn: Callable[..., Any] | None = None
    ) -> dict[str, Any]:
        """``{baseline: fn, fix: Variant, ...}`` for the fixes that apply (or ``names`` of them), in rank
        order; each variant records which fix it is and where it was applied."""
        from workbench.fixes.registry import get

        fn = fn if fn is not None else self.context.fn
        if fn is None:
            raise InvalidArgumentError(
                "these fixes were recognised without live code (a run loaded from a file): "
                "pass fn=the callable to build them, e.g. run.fixes.variants(fn=step)"
            )
        chosen = self.names if names is None else list(names)
        listed = {r.fix: r for r in self.rows}
        out: dict[str, Any] = {baseline: fn}
        for name in chosen:
            row = listed.get(name)
            if row is not None and not row.applies:
                raise InvalidArgumentError(f"fix {name!r} cannot run here: {row.reason}")
            v = get(name).variant(fn, name=name, context=self.context)
            if row is not None:
                v.options.setdefault("fix_where", row.where)
                v.options.setdefault("fix_reason", row.reason)
            out[name] = v
        return out

    def built(self, name: str, fn: Callable[..., Any] | None = None) -> Any:
        """The fix ``name`` applied to ``fn`` (default: the run's code) with what was found here (where,
        why); a fix that does not apply here, or cannot be built from this code, is a variant that is
        never called, its reason in its row (the rest of a comparison runs)."""
        from workbench.fixes.registry import get

        fix = get(name)
        fn = fn if fn is not None else self.context.fn
        row = next((r for r in self.rows if r.fix == name), None)
        if row is not None and not row.applies:
            return not_applicable_variant(fix, fn, row.reason, row.where)
        try:
            made = self.variants([name], fn=fn)[name]
        except Exception as exc:  # noqa: BLE001 - its row says why; the other fixes still run
            return not_applicable_variant(
                fix, fn, f"it could not be built from this code: {type(exc).__name__}: {exc}", ""
            )
        if row is None:
            made.options.setdefault("fix_reason", "named by hand (its pattern was not recognised in this code)")
        return made

    # -- views: the text here; HTML and Markdown are workbench.render.fixes (a notebook shows them
    # through IPython's display formatter, workbench.render.ipython) ------------------------------
    def to_text(self) -> str:
        if not self.rows:
            return "no fix applies to this run (none of the catalog's patterns was found)"
        lines = []
        for r in self.rows:
            stake = f"{r.stake_ms:.3g} ms at stake" if r.stake_ms else "found by pattern"
            where = f" at {r.where}" if r.where else ""
            lines.append(f"{r.fix}{where}: {r.reason} [{stake}]" if r.applies else f"{r.fix}: {r.reason}")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return f"FixList({self.names!r}, not applicable: {[r.fix for r in self.not_applicable]!r})"

    def to_dict(self) -> dict[str, Any]:
        return {"fixes": [r.to_dict() for r in self.rows], "elapsed_s": self.elapsed_s}


def not_applicable_variant(fix: Any, fn: Callable[..., Any] | None, reason: str, where: str) -> Any:
    """A row for a fix that cannot run here: never called, its reason in the comparison's table."""
    from workbench.variants.spec import Variant

    why = reason[len("not applicable: ") :] if reason.startswith("not applicable: ") else reason
    return Variant(
        name=fix.name,
        fn=fn if fn is not None else (lambda *a, **k: None),
        kind=fix.kind,
        numerical_class=fix.numerical_class,
        description=fix.changes,
        options={"fix": fix.name, "fix_changes": fix.changes, "fix_where": where, "fix_reason": reason},
        not_applicable_reason=why,
    )


def applicable(context: FixContext, *, include_absent: bool = False) -> FixList:
    """Every catalog fix's recogniser run on ``context``; the rows that apply first (largest stake
    first, then catalog order), then the not-applicable ones; absent ones only with ``include_absent``."""
    from workbench.fixes.registry import catalog

    t0 = time.perf_counter()
    rows: list[tuple[int, Applicability]] = []
    for i, fix in enumerate(catalog()):
        if fix.kind == "baseline":
            continue
        found = fix.applicability(context)
        if found.status == "absent" and not include_absent:
            continue
        rows.append((i, found))
    order = {"applies": 0, "not_applicable": 1, "absent": 2}
    rows.sort(key=lambda t: (order[t[1].status], -t[1].stake_ms, t[0]))
    return FixList([r for _, r in rows], context, elapsed_s=time.perf_counter() - t0)
