"""``%%gpuvariant NAME``: this cell is a variant of the last ``%%gpuprofile`` cell.

Plumbing only: take the last profiled cell's source (kept by ``%%gpuprofile``), compile both
cells as the shell would, and call ``wb.compare`` (correctness of the cells' last values, then
interleaved timing; the profiled run's median is the end-to-end time for ``micro_only``).  The
comparison is bound to ``_gpuvariant`` (and to ``-o VAR``) and displayed with its decision
record.  When NAME is a variant that a hypothesis of the profiled run suggests (``compiled``,
``cuda_graph``, ...), that hypothesis is judged against the result (supported / weakened /
rejected); a rewrite of your own is judged against the run's top-ranked finding that is not a
caveat about the measurement.  Both cells run many
times in your namespace (checks, warm-up, timed rounds): keep them free of side effects.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from IPython.core.error import UsageError
from IPython.core.magic import Magics, cell_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments, parse_argstring

from workbench.magics.cell import magic_shell

if TYPE_CHECKING:
    from IPython.core.interactiveshell import InteractiveShell

    from workbench.hypotheses.hypothesis import Hypothesis
    from workbench.magics.cell import CellCallable
    from workbench.magics.guard import ShellGuard

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
    from workbench.magics.gpuprofile import last_run
    import workbench.variants.registry as registry
    from workbench.widgets.variant_panel import pick_hypothesis

    run = last_run()
    try:
        hyps = list((run.hypotheses if run is not None else None) or ())
    except Exception:  # noqa: BLE001 - no diagnosis: compare without one
        return None
    return pick_hypothesis(hyps, name, registry_variant=name in registry.names())


def _callable(shell: InteractiveShell, source: str, role: str, guard: ShellGuard | None = None,
              name: str | None = None) -> CellCallable:
    from workbench.magics.cell import CellCallable, compile_cell
    from workbench.magics.gpuprofile import syntax_error_message

    try:
        compiled = compile_cell(shell, source)
    except SyntaxError as exc:
        raise UsageError(f"{role}: {syntax_error_message(exc)}") from None
    # both cells have shown their output before (the profiled one when it was profiled): the
    # comparison's many runs are silent from the first
    return CellCallable(shell, compiled, guard, show_first=False, name=name)


@magics_class
class GpuVariantMagics(Magics):
    @magic_arguments()
    @argument("name", help="the variant's name (its row in the comparison table)")
    @argument("-b", "--budget", type=float, default=3.0, help="seconds of interleaved timing (default 3)")
    @argument("-c", "--checks", type=int, default=2, help="correctness checks before timing (default 2)")
    @argument("-l", "--time-limit", type=float, default=120.0, help="seconds one run of a cell may take")
    @argument("-o", "--output", default=None, metavar="VAR", help="bind the Comparison to this variable")
    @cell_magic
    def gpuvariant(self, line: str, cell: str) -> None:
        """Compare this cell (a variant) with the last %%gpuprofile cell: the cells' last values
        are checked against each other, then both are timed in interleaved rounds; shows the
        table, the chart and the decision record.  The comparison is ``_gpuvariant``; the shell's
        streams and display are restored whatever the cells do."""
        from workbench.variants.compare import compare

        opts = parse_argstring(self.gpuvariant, line)
        if opts.budget <= 0 or opts.checks < 1 or opts.time_limit <= 0:
            raise UsageError("--budget and --time-limit must be > 0 and --checks >= 1")
        if opts.output is not None and not opts.output.isidentifier():
            raise UsageError(f"-o needs a Python variable name; got {opts.output!r}")
        if not cell.strip():
            raise UsageError("%%gpuvariant needs the variant's code in the cell below the magic line")
        source = last_profiled_source()
        if source is None:
            raise UsageError("no profiled cell yet: run %%gpuprofile on the cell to improve first, "
                             "then %%gpuvariant NAME on a cell with your rewrite")
        from workbench.capture.quiet import captured_native_stderr
        from workbench.magics.guard import ShellGuard
        from workbench.magics.progress import StatusLine

        guard = ShellGuard(magic_shell(self))
        try:
            with guard:
                base = _callable(magic_shell(self), source, "the profiled cell", guard, "profiled")
                variant = _callable(magic_shell(self), cell, "this cell", guard, opts.name)
                status = StatusLine(guard, f"%gpuvariant {opts.name}", 0, 0, False,
                                    enabled=None if not guard.nested else False)
                status.start()
                done = "stopped"
                try:
                    # the profiler's native lines (USDT, CPUAllocator) are held back, shown on a failure
                    with captured_native_stderr():
                        cmp = compare({"profiled": base, opts.name: variant}, None, baseline="profiled",
                                      checks=opts.checks, budget_s=opts.budget, time_limit_s=opts.time_limit,
                                      hypothesis=suggesting_hypothesis(opts.name),
                                      end_to_end_ms=profiled_median_ms(),
                                      progress=lambda stage, name: status.say(f"{stage} {name}"))
                    done = "done"
                except SystemExit as exc:
                    raise UsageError(f"a compared cell called sys.exit({exc.code!r}); the comparison stopped "
                                     "and nothing was kept. Compared cells must finish normally") from None
                finally:
                    status.close(f"%gpuvariant {opts.name}: {done} in {status.elapsed_s():.1f} s")
        finally:
            for line in guard.notes:
                print(f"%gpuvariant: {line}")
        magic_shell(self).user_ns[LAST_VARIANT_NAME] = cmp
        if opts.output:
            magic_shell(self).user_ns[opts.output] = cmp
        from IPython.display import display

        display(cmp)                 # the table, the one-line decision and the chart
        display(cmp.decision)        # the decision record, in full
        return None
