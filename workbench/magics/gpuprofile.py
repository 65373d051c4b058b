"""``%%gpuprofile``: profile a notebook cell with ``wb.profile`` and show the ProfileRun.

Plumbing only: parse the options, compile the cell, call the library in try/finally, keep the
run, display it. The cell runs ``1 + warmup + repeat`` times in the user's namespace, so its side
effects (appends, counters, file writes) repeat that many times; its output shows once.
"""
from __future__ import annotations

from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, cell_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments, parse_argstring

from workbench.errors import ProfileError

LAST_RUN_NAME = "_gpuprofile"   # the user-namespace name of the last successful run

_last_run: Any = None


def last_run() -> Any:
    """The ProfileRun of the last ``%%gpuprofile`` that finished (None before the first)."""
    return _last_run


def _check_options(opts: Any) -> None:
    if opts.warmup < 0:
        raise UsageError(f"-w/--warmup must be >= 0 (untimed calls after the cold one); got {opts.warmup}")
    if opts.repeat < 1:
        raise UsageError(f"-r/--repeat must be >= 1 (timed calls); got {opts.repeat}")
    if opts.threads is not None and opts.threads < 1:
        raise UsageError(f"-t/--threads must be >= 1; got {opts.threads}")
    if opts.output is not None and not opts.output.isidentifier():
        raise UsageError(f"-o needs a Python variable name to bind the run to; got {opts.output!r}")


def syntax_error_message(exc: SyntaxError) -> str:
    """Where the cell's syntax is wrong, with a caret, as one UsageError message."""
    text = (exc.text or "").rstrip("\n")
    caret = " " * max(0, (exc.offset or 1) - 1 - (len(text) - len(text.lstrip()))) + "^"
    where = f"line {exc.lineno}" if exc.lineno else "the cell"
    shown = f"\n    {text.strip()}\n    {caret}" if text.strip() else ""
    return (f"the cell has a syntax error at {where}: {exc.msg}{shown}\n"
            "Nothing was run and no profile was recorded; fix the cell and run it again.")


def _profile_cell(runner: Any, opts: Any) -> Any:
    """Call the library; the repeats' output capture is released whatever happens."""
    __tracebackhide__ = True
    from workbench.capture.profile import profile

    try:
        return profile(runner, warmup=opts.warmup, repeat=opts.repeat, trace=not opts.no_trace,
                       name=opts.name or runner.__name__, threads=opts.threads,
                       grad_enabled=False if opts.no_grad else None)
    except SystemExit as exc:
        raise ProfileError(
            f"the cell called sys.exit({exc.code!r}) in execution {runner.calls + 1} of "
            f"{1 + opts.warmup + opts.repeat}; profiling stopped and no run was kept. A "
            "profiled cell must finish normally: remove the exit call") from None
    finally:
        runner.release_output()


def _keep(shell: Any, run: Any, output: str | None) -> None:
    global _last_run
    _last_run = run
    shell.user_ns[LAST_RUN_NAME] = run
    if output:
        shell.user_ns[output] = run


@magics_class
class GpuProfileMagics(Magics):
    @magic_arguments()
    @argument("-w", "--warmup", type=int, default=3,
              help="untimed calls after the cold first call (>= 0, default 3)")
    @argument("-r", "--repeat", type=int, default=20, help="timed calls (>= 1, default 20)")
    @argument("-T", "--no-trace", action="store_true",
              help="no torch.profiler session: timing only, without profiler overhead")
    @argument("-n", "--name", default=None, help="the run's name (default: cell[<n>])")
    @argument("-o", "--output", default=None, metavar="VAR",
              help="bind the ProfileRun to this variable (the last run is always _gpuprofile)")
    @argument("-t", "--threads", type=int, default=None,
              help="torch.set_num_threads for the profile, restored afterwards")
    @argument("--no-grad", action="store_true",
              help="run with autograd off (torch.set_grad_enabled(False)), restored afterwards")
    @argument("-q", "--quiet", action="store_true", help="keep the run but do not display it")
    @cell_magic
    def gpuprofile(self, line: str, cell: str) -> Any:
        """Profile this cell: one cold run timed apart, warm-up runs, timed repeats under one
        torch.profiler session; shows timing (median, p95, spread), cold time, compile
        diagnostics, top ops/kernels and hypotheses.

        The cell executes 1 + warmup + repeat times in your namespace: assignments persist, side
        effects repeat; output shows once (from the first execution). The last run is
        ``_gpuprofile`` and ``workbench.magics.last_run()``; a cell that fails leaves no run.
        """
        __tracebackhide__ = True
        from workbench.magics.cell import CellCallable, compile_cell

        opts = parse_argstring(self.gpuprofile, line)
        _check_options(opts)
        if not cell.strip():
            raise UsageError("%%gpuprofile needs code in the cell below the magic line")
        try:
            compiled = compile_cell(self.shell, cell)
        except SyntaxError as exc:
            raise UsageError(syntax_error_message(exc)) from None
        runner = CellCallable(self.shell, compiled)
        run = _profile_cell(runner, opts)
        _keep(self.shell, run, opts.output)
        if runner.last_value is not None:
            from IPython.display import display

            display(runner.last_value)
        return None if opts.quiet else run
