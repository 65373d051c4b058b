"""``%%gpuvariant NAME``: this cell is a variant of the last ``%%gpuprofile`` cell.

Plumbing only: take the last profiled cell's source (kept by ``%%gpuprofile``), compile both
cells as the shell would, and call ``wb.compare`` (correctness, then interleaved timing; the
profiled run's median is the end-to-end time for ``micro_only``).  What a cell computes is every
name it binds at top level and its last value: the two cells are compared on the names both bind
(``loss = step()`` compares ``loss``) plus their last values when both end in an expression; a
name only one of them binds is named in the record's notes, and two cells with nothing in common
are refused.  A training step (``--training``, or decided by the engine: a result that requires
grad, a call that steps an optimizer) is checked on its outputs, every parameter gradient and the
optimizer's updated state; the cell callable hands the comparison the objects its code refers to
(``__workbench_reach__``), where the model and optimizer are found.

The comparison is bound to ``_gpuvariant`` (and to ``-o VAR``) and displayed once, its decision
record inside.  When NAME is a variant that a hypothesis of the profiled run suggests
(``compiled``, ``cuda_graph``, ...), that hypothesis is judged against the result (supported /
weakened / rejected); a rewrite of your own is judged against the run's top-ranked finding that is
not a caveat about the measurement.  Both cells run many times in your namespace (checks, warm-up,
timed rounds); the names they bind are given back the values they had before the comparison.

``%%gpuvariant --fix NAME[,NAME]`` runs catalog fixes (``wb.fixes``) as ``wb.compare`` runs
``run.fixes.variants()``: each fix is applied to the profiled cell's code (a cell of its own per
fix, compared on what the profiled cell binds), with where it applies and why from the profiled
run's ``run.fixes``; beside a rewrite of yours (``%%gpuvariant mine --fix compiled``) all of them are
in one comparison.  With no NAME and code in the cell, the fixes run on that code instead (its
baseline row is ``eager``, the cell as written; the profiled run's diagnosis counts only when the
cell is the profiled one).  An unknown name is refused with the fixes that apply and the catalog; a
fix that does not apply here (or cannot be built from the code) has its reason in its row, the
others run.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_cell_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments, parse_argstring

from workbench.magics.cell import magic_shell

if TYPE_CHECKING:
    from IPython.core.interactiveshell import InteractiveShell

    from workbench.fixes import Fix, FixList
    from workbench.hypotheses.hypothesis import Hypothesis
    from workbench.magics.cell import CompiledCell
    from workbench.variants.results import Comparison
    from workbench.variants.spec import Variant

LAST_VARIANT_NAME = "_gpuvariant"


def last_profiled_source() -> str | None:
    """The code the last successful ``%%gpuprofile`` (cell or line form) profiled, as the
    profiling magic kept it; None before the first."""
    from workbench.magics.gpuprofile import last_cell_source

    return last_cell_source()


def profiled_median_ms() -> float | None:
    """The last profiled run's end-to-end median (ms): the whole against which a saving is
    judged (a saving under 2% of it makes the variant ``micro_only``)."""
    from workbench.magics.gpuprofile import last_run

    run = last_run()
    median = run.timing.median_ms if run is not None else None
    return float(median) if median else None


def suggesting_hypothesis(name: str) -> Hypothesis | None:
    """The hypothesis of the last profiled run this variant is judged against: the highest-ranked
    one that suggests ``name`` (``compiled``, ``cuda_graph``, ...); for a rewrite of your own, the
    top-ranked finding that is not about the measurement itself (None without one)."""
    import workbench.variants.registry as registry
    from workbench.magics.gpuprofile import last_run
    from workbench.widgets.variant_panel import pick_hypothesis

    run = last_run()
    try:
        hyps = list((run.hypotheses if run is not None else None) or ())
    except Exception:  # noqa: BLE001 - no diagnosis: compare without one
        return None
    return pick_hypothesis(hyps, name, registry_variant=name in registry.names())


def _compiled(shell: InteractiveShell, source: str, role: str) -> CompiledCell:
    from workbench.magics.cell import CELL_MAGIC_FIRST_LINE, compile_cell
    from workbench.magics.gpuprofile import syntax_error_message

    try:  # a cell magic's body (this cell's, or the profiled %%gpuprofile cell's)
        return compile_cell(shell, source, first_line=CELL_MAGIC_FIRST_LINE)
    except SyntaxError as exc:
        raise UsageError(f"{role}: {syntax_error_message(exc)}") from None


def _names(words: list[str]) -> str:
    return ", ".join(f"`{w}`" for w in words)


@dataclass(frozen=True)
class CellPlan:
    """What the two cells are compared on: the names both bind, and their last values when both
    end in an expression; what one binds and the other does not, in words for the record."""

    shared: tuple[str, ...]
    with_last: bool
    notes: tuple[str, ...]

    @property
    def empty(self) -> bool:
        return not self.shared and not self.with_last


def plan_cells(profiled: CompiledCell, variant: CompiledCell) -> CellPlan:
    shared = tuple(n for n in profiled.bound if n in variant.bound)
    only_profiled = [n for n in profiled.bound if n not in variant.bound]
    only_variant = [n for n in variant.bound if n not in profiled.bound]
    with_last = profiled.last_expression is not None and variant.last_expression is not None
    notes = []
    if only_profiled:
        notes.append(
            f"the profiled cell binds {_names(only_profiled)}, which this cell does not: "
            f"{'it is' if len(only_profiled) == 1 else 'they are'} not compared"
        )
    if only_variant:
        notes.append(f"this cell binds {_names(only_variant)}, which the profiled cell does not: not compared")
    if (profiled.last_expression is None) != (variant.last_expression is None):
        which = "the profiled cell" if profiled.last_expression is not None else "this cell"
        notes.append(f"only {which} ends in an expression: the last values are not compared")
    if shared or with_last:
        what = [f"`{n}`" for n in shared] + (["the last value"] if with_last else [])
        notes.insert(0, "the cells are compared on " + ", ".join(what))
    return CellPlan(shared, with_last, tuple(notes))


NOTHING = (
    "nothing to compare: the profiled cell and this cell bind no common name and do not both end in "
    "an expression; assign the result to the same name in both (`loss = step()`) or end both with it"
)


NOTHING_COMPUTED = (
    "nothing to compare: the cells computed no value, gradient or state to check (every name "
    "they bind and their last values were None); return or assign the value to check"
)


def _compared_nothing(cmp: Comparison) -> bool:
    """No candidate that ran had any output, gradient or state compared: the comparison saw nothing
    (a cell whose every compared name and last value was empty), so it cannot say "matches"."""
    ran = [r for r in cmp.results if r.name != cmp.baseline and r.status in ("ok", "incorrect")]
    if not ran:
        return False
    for r in ran:
        if any((getattr(r, "compared", None) or {}).values()):
            return False
        if r.correctness is not None and r.correctness.outputs:
            return False
    return True


def _with_notes(cmp: Comparison, notes: list[str]) -> Comparison:
    """The comparison with the magic's notes in its settings and its record's evidence, and the
    record's settings saying that the cells take no inputs (they run on the namespace)."""
    settings = dict(cmp.settings or {})
    known = list(settings.get("notes") or ())
    settings["notes"] = known + [n for n in notes if n not in known]
    settings.setdefault("inputs", "none")
    record = cmp.decision
    evidence = tuple(record.evidence) + tuple(f"note: {n}" for n in notes if f"note: {n}" not in record.evidence)
    record_settings = dict(record.settings or {})
    record_settings.setdefault("inputs", "none")
    return dataclasses.replace(
        cmp, settings=settings, decision=dataclasses.replace(record, evidence=evidence, settings=record_settings)
    )


def fix_names(text: str | None) -> list[str]:
    """``--fix a,b`` (or ``--fix "a, b"``) as a list of names, in order, each once."""
    if text is None:
        return []
    names = [n.strip() for n in text.split(",")]
    if not all(names):
        raise UsageError(
            f"--fix takes catalog fix names separated by commas (`--fix compiled,cuda_graph`); got {text!r}"
        )
    return list(dict.fromkeys(names))


def _fix_list(run: Any, fn: Any) -> FixList:
    """What applies, for the code the fixes run against: the run's fixes (``run.fixes``, recognised on
    its live code) when there is a run, else the patterns found in ``fn`` alone."""
    import workbench.fixes as fixes

    if run is not None:
        try:
            return run.fixes if getattr(run, "code", None) is not None else run.fixes_for(fn)
        except Exception:  # noqa: BLE001 - a run whose diagnosis fails: the code's patterns still count
            pass
    return fixes.for_callable(fn)


def check_fix_names(names: list[str], listed: FixList, what: str) -> None:
    """Refuse a name the catalog does not have (saying what applies to ``what`` and what the catalog
    holds), and the baseline itself."""
    import workbench.fixes as fixes

    catalog = [n for n in fixes.names() if n != "eager"]
    applicable = listed.names
    for name in names:
        if name == "eager":
            raise UsageError(
                "`eager` is the baseline (the code as written), not a fix: it is every comparison's reference row"
            )
        if name not in catalog:
            raise UsageError(
                f"unknown fix {name!r}: the fixes that apply to {what} are "
                f"{', '.join(applicable) if applicable else 'none'}"
                + (
                    f" (not applicable here: {', '.join(r.fix for r in listed.not_applicable)})"
                    if listed.not_applicable
                    else ""
                )
                + f"; the catalog has {', '.join(catalog)} (wb.fixes.names(); add your own with "
                "wb.fixes.register(wb.fixes.Fix(...)))"
            )


def fix_variant(listed: FixList, name: str, fn: Callable[..., Any]) -> Variant:
    """The catalog fix ``name`` applied to ``fn`` with what ``listed`` found (``FixList.built``)."""
    return listed.built(name, fn)


def _has_statements(shell: InteractiveShell, cell: str) -> bool:
    """Whether the cell holds code (a cell of comments only is empty: ``--fix`` then runs on the
    profiled cell's code); a cell that does not parse holds code (its compile says where it is wrong)."""
    import ast

    if not cell.strip():
        return False
    try:
        return bool(ast.parse(shell.transform_cell(cell)).body)
    except SyntaxError:
        return True


def _first_hypothesis(name: str | None, fixes: list[str], listed: FixList | None) -> Hypothesis | None:
    """What the comparison is judged against: the hypothesis that suggests the rewrite ``name``
    (else the run's top finding); for fixes alone, the first hypothesis a fix tests (``run.fixes``
    found it through it), else the one that suggests it."""
    if name is not None:
        return suggesting_hypothesis(name)
    import workbench.fixes as catalog

    for fix in fixes:
        if listed is not None and listed.context.run is not None:
            tested = listed.context.hypotheses_for(catalog.get(fix))
            if tested:
                return tested[0]
        found = suggesting_hypothesis(fix)
        if found is not None:
            return found
    return None


@magics_class
class GpuVariantMagics(Magics):
    @magic_arguments()
    @argument(
        "name",
        nargs="?",
        default=None,
        help="the variant's name (its row in the comparison table); with --fix and no rewrite of yours, leave it out",
    )
    @argument(
        "--fix",
        default=None,
        metavar="NAME[,NAME]",
        help="run these catalog fixes (wb.fixes) against the profiled cell's code (or, with no NAME, against "
        "the code in this cell), in the same comparison; run.fixes lists those that apply",
    )
    @argument("-b", "--budget", type=float, default=3.0, help="seconds of interleaved timing (default 3)")
    @argument("-c", "--checks", type=int, default=2, help="correctness checks before timing (default 2)")
    @argument("-l", "--time-limit", type=float, default=120.0, help="seconds one run of a cell may take")
    @argument("-o", "--output", default=None, metavar="VAR", help="bind the Comparison to this variable")
    @argument(
        "--training",
        action="store_true",
        help="a training step: forward + backward once per call; the outputs, every parameter "
        "gradient and the optimizer's updated state are compared (default: decided from the "
        "cells: training when the result requires grad or the call steps an optimizer)",
    )
    @argument("--inference", action="store_true", help="compare the outputs only, forward timed")
    @line_cell_magic
    def gpuvariant(self, line: str, cell: str | None = None) -> None:
        """Compare this cell (a variant) with the last %%gpuprofile cell: what both cells compute
        (every name both bind at top level, ``loss = ...``, and their last values) is checked
        against each other, then both are timed in interleaved rounds; shows the table, the
        chart and the decision record.  The comparison is ``_gpuvariant``; the names the cells
        bind get back the values they had before, and the shell's streams and display are
        restored whatever the cells do.

        ``--fix NAME[,NAME]`` runs catalog fixes (``wb.fixes``; ``run.fixes`` lists those that apply
        to the run) in the same comparison: on the profiled cell's code (``%%gpuvariant --fix
        compiled`` with an empty cell, or beside your rewrite: ``%%gpuvariant mine --fix compiled``),
        or, with no NAME, on the code in this cell (its baseline row is ``eager``, the cell as
        written).  The line form ``%gpuvariant --fix compiled`` runs them on the profiled cell's code.
        A fix that does not apply here has its reason in its row."""
        from workbench.variants.compare import compare

        opts = parse_argstring(self.gpuvariant, line)
        if opts.budget <= 0 or opts.checks < 1 or opts.time_limit <= 0:
            raise UsageError("--budget and --time-limit must be > 0 and --checks >= 1")
        if opts.training and opts.inference:
            raise UsageError(
                "--training and --inference exclude each other: pass one (or neither, to decide from the cells)"
            )
        if opts.output is not None and not opts.output.isidentifier():
            raise UsageError(f"-o needs a Python variable name; got {opts.output!r}")
        fixes = fix_names(opts.fix)
        cell = cell or ""
        has_code = _has_statements(magic_shell(self), cell)
        if not fixes and opts.name is None:
            raise UsageError(
                "%%gpuvariant needs a name: `%%gpuvariant NAME` above your rewrite of the profiled cell, "
                "or `%%gpuvariant --fix NAME[,NAME]` to run catalog fixes (run.fixes lists those that apply)"
            )
        if not has_code and (opts.name is not None or not fixes):
            raise UsageError("%%gpuvariant needs the variant's code in the cell below the magic line")
        source = last_profiled_source()
        own_cell = bool(fixes) and opts.name is None and has_code  # the fixes run on this cell's code
        if source is None and not own_cell:
            raise UsageError(
                "no profiled cell yet: run %%gpuprofile on the cell to improve first, "
                "then %%gpuvariant NAME on a cell with your rewrite"
                + (" (or %%gpuvariant --fix NAME with the code to fix in the cell)" if fixes else "")
            )
        from workbench.capture.quiet import captured_native_stderr
        from workbench.errors import NothingToCompareError
        from workbench.magics.cell import CellCallable, restore_names, snapshot_names
        from workbench.magics.gpuprofile import last_run
        from workbench.magics.guard import ShellGuard
        from workbench.magics.progress import StatusLine

        shell = magic_shell(self)
        # the profiled run's code is this code when the cell repeats the profiled one: its diagnosis holds
        same_as_profiled = not own_cell or (source is not None and cell.strip() == source.strip())
        run = last_run() if same_as_profiled else None
        base_name = "eager" if own_cell else "profiled"
        if own_cell:
            profiled_code = _compiled(shell, cell, "this cell")
            variant_code = None
            plan = plan_cells(profiled_code, profiled_code)
        else:
            assert source is not None  # refused above when there is no profiled cell and no own cell
            profiled_code = _compiled(shell, source, "the profiled cell")
            variant_code = _compiled(shell, cell, "this cell") if opts.name is not None else None
            plan = plan_cells(profiled_code, variant_code if variant_code is not None else profiled_code)
        if plan.empty:
            raise UsageError(NOTHING)
        listed: FixList | None = None
        if fixes:
            probe = CellCallable(shell, profiled_code, name=base_name)
            listed = _fix_list(run, probe)
            check_fix_names(fixes, listed, "the profiled run" if run is not None else "this cell's code")
        taken = {base_name, *fixes}
        if opts.name is not None and (opts.name in taken):
            raise UsageError(
                f"{opts.name!r} names "
                + ("the baseline's row" if opts.name == base_name else "a fix given with --fix")
                + ": call your variant something else"
            )
        mode = "training" if opts.training else "inference" if opts.inference else None
        saved, unbound = snapshot_names(
            shell.user_ns, profiled_code.bound + (variant_code.bound if variant_code is not None else ())
        )
        label = opts.name or ",".join(fixes)
        guard = ShellGuard(shell)
        refused: str | None = None
        cells: list[CellCallable] = []
        try:
            with guard:

                def cell_callable(code: CompiledCell, name: str) -> CellCallable:
                    # every compared cell has shown its output before (the profiled one when it was
                    # profiled): the comparison's many runs are silent from the first
                    made = CellCallable(
                        shell,
                        code,
                        guard,
                        show_first=False,
                        name=name,
                        result_names=plan.shared,
                        with_last=plan.with_last,
                    )
                    cells.append(made)
                    return made

                variants: dict[str, Any] = {base_name: cell_callable(profiled_code, base_name)}
                if variant_code is not None and opts.name is not None:
                    variants[opts.name] = cell_callable(variant_code, opts.name)
                for name in fixes:
                    assert listed is not None
                    variants[name] = fix_variant(listed, name, cell_callable(profiled_code, name))
                status = StatusLine(
                    guard, f"%gpuvariant {label}", 0, 0, False, enabled=None if not guard.nested else False
                )
                status.start()
                done = "stopped"
                try:
                    # the profiler's native lines (USDT, CPUAllocator) are held back, shown on a failure
                    with captured_native_stderr():
                        cmp = compare(
                            variants,
                            None,
                            baseline=base_name,
                            checks=opts.checks,
                            budget_s=opts.budget,
                            time_limit_s=opts.time_limit,
                            hypothesis=_first_hypothesis(opts.name, fixes, listed) if run is not None else None,
                            mode=mode,
                            end_to_end_ms=profiled_median_ms() if run is not None else None,
                            progress=lambda stage, name: status.say(f"{stage} {name}"),
                        )
                    done = "done"
                except NothingToCompareError as exc:
                    refused = str(exc).splitlines()[0] if str(exc) else NOTHING
                except SystemExit as exc:
                    raise UsageError(
                        f"a compared cell called sys.exit({exc.code!r}); the comparison stopped "
                        "and nothing was kept. Compared cells must finish normally"
                    ) from None
                finally:
                    status.close(f"%gpuvariant {label}: {done} in {status.elapsed_s():.1f} s")
        finally:
            restore_names(shell.user_ns, saved, unbound)
            for note in guard.notes:
                print(f"%gpuvariant: {note}")
        if refused is not None:
            raise UsageError(refused if refused.startswith("nothing to compare") else f"nothing to compare: {refused}")
        if _compared_nothing(cmp):
            raise UsageError(NOTHING_COMPUTED)
        kinds: dict[str, str] = {}
        for made in cells:
            kinds.update(made.not_data)
        notes = list(plan.notes)
        if fixes:
            notes.append(_fixes_note(variants, fixes, "this cell's code" if own_cell else "the profiled cell's code"))
        if kinds:
            notes.append(
                "compared by their type only (objects, not data): "
                + ", ".join(f"`{n}` ({k})" for n, k in kinds.items())
                + "; their state is compared where the comparison reaches it"
            )
        notes.append("the names the cells bind were given back the values they had before the comparison")
        cmp = _with_notes(cmp, notes)
        shell.user_ns[LAST_VARIANT_NAME] = cmp
        if opts.output:
            shell.user_ns[opts.output] = cmp
        from IPython.display import display

        display(cmp)  # the table, the decision, the chart and the decision record, once
        return None


def _fixes_note(variants: dict[str, Any], fixes: list[str], target: str) -> str:
    parts = []
    for name in fixes:
        v = variants[name]
        if v.not_applicable_reason:
            parts.append(f"`{name}` (not applicable: {v.not_applicable_reason})")
        else:
            where = v.options.get("fix_where") or "the whole call"
            parts.append(f"`{name}` at {where}")
    return f"catalog fixes applied to {target}: " + "; ".join(parts)
