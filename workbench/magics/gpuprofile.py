"""``%%gpuprofile`` / ``%gpuprofile``: profile a notebook cell (or one line's code) with
``wb.profile`` and show the ProfileRun.

Plumbing only: parse the options, compile the cell, call the library in try/finally, keep the
run and the profiled source, display it. The cell runs ``1 + warmup + repeat`` times in the
user's namespace, so its side effects (appends, counters, file writes) repeat that many times;
its output shows once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_cell_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments, parse_argstring

from workbench.capture.cells import cell_id
from workbench.errors import ProfileError
from workbench.magics.cell import CELL_MAGIC_FIRST_LINE, magic_shell

if TYPE_CHECKING:
    import argparse

    from IPython.core.interactiveshell import InteractiveShell

    from workbench.api.run import ProfileRun
    from workbench.magics.cell import CellCallable
    from workbench.magics.guard import ShellGuard

LAST_RUN_NAME = "_gpuprofile"  # the user-namespace name of the last successful run
EXPLAIN_NAME = "_gpuprofile_explain"  # the user-namespace name of the last --explain result

_last_run: ProfileRun | None = None
_last_source: str | None = None


def last_run() -> ProfileRun | None:
    """The ProfileRun of the last ``%%gpuprofile`` that finished (None before the first)."""
    return _last_run


def last_cell_source() -> str | None:
    """The code the last successful ``%%gpuprofile`` profiled: the cell below the magic line, or
    the line form's code (None before the first; a failed profile leaves the previous one)."""
    return _last_source


def _check_options(opts: argparse.Namespace) -> None:
    if opts.warmup < 0:
        raise UsageError(f"-w/--warmup must be >= 0 (untimed calls after the cold one); got {opts.warmup}")
    if opts.repeat < 1:
        raise UsageError(f"-r/--repeat must be >= 1 (timed calls); got {opts.repeat}")
    if opts.trace_repeat is not None and opts.trace_repeat < 1:
        raise UsageError(f"--trace-repeat must be >= 1 (traced calls); got {opts.trace_repeat}")
    if opts.threads is not None and opts.threads < 1:
        raise UsageError(f"-t/--threads must be >= 1; got {opts.threads}")
    if getattr(opts, "memory", False) and opts.no_trace:
        raise UsageError("--memory records allocations in the traced pass: it cannot go with -T/--no-trace")
    if opts.output is not None and not opts.output.isidentifier():
        raise UsageError(f"-o needs a Python variable name to bind the run to; got {opts.output!r}")


def syntax_error_message(exc: SyntaxError) -> str:
    """Where the cell's syntax is wrong, with a caret, as one UsageError message."""
    text = (exc.text or "").rstrip("\n")
    caret = " " * max(0, (exc.offset or 1) - 1 - (len(text) - len(text.lstrip()))) + "^"
    where = f"line {exc.lineno}" if exc.lineno else "the cell"
    shown = f"\n    {text.strip()}\n    {caret}" if text.strip() else ""
    return (
        f"the cell has a syntax error at {where}: {exc.msg}{shown}\n"
        "Nothing was run and no profile was recorded; fix the cell and run it again."
    )


_PROFILER_NAMES = {"emit_nvtx", "emit_itt", "_enable_profiler", "_prepare_profiler", "profile_kineto"}
_PROFILER_MODULES = ("torch.profiler", "torch.autograd.profiler")


def starts_own_profiler(code: str) -> bool:
    """Whether the cell's code visibly opens a torch profiler (``torch.profiler.profile(...)``,
    ``torch.autograd.profiler.profile``, ``from torch.profiler import profile``, ``emit_nvtx``).

    Read from the source, before anything runs: such a cell is timed without a trace, since
    two profilers at once crash torch.  (A profiler opened deeper, in a function the cell calls,
    is stopped by the ShellGuard's check with a ProfileError instead.)"""
    import ast

    try:
        tree = ast.parse(code)
    except SyntaxError:
        return False
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(_PROFILER_MODULES):
            if any(a.name in ("profile", *_PROFILER_NAMES) for a in node.names):
                return True
        if isinstance(node, ast.Attribute):
            if node.attr in _PROFILER_NAMES:
                return True
            if node.attr == "profile" and isinstance(node.value, (ast.Attribute, ast.Name)):
                owner = node.value.attr if isinstance(node.value, ast.Attribute) else node.value.id
                if owner == "profiler":
                    return True
    return False


def trace_plan(guard: ShellGuard, code: str, opts: argparse.Namespace) -> tuple[bool, str | None]:
    """``(trace, note)``: trace unless -T, a profiler is already running, or the cell starts one."""
    if opts.no_trace:
        return False, None
    if guard.profiler_was_running:
        return False, (
            "a torch profiler is already running (a traced %%gpuprofile around this one, or "
            "the caller's own torch.profiler session): this run is timed only, with no trace"
        )
    if starts_own_profiler(code):
        return False, (
            "the cell opens its own torch profiler: this run is timed only, with no trace "
            "(two profilers at once crash torch); remove the cell's profiler to get a trace"
        )
    return True, None


def _profile_cell(runner: CellCallable, opts: argparse.Namespace, trace: bool = True) -> ProfileRun:
    """Call the library (the magic's ShellGuard restores the shell around this)."""
    __tracebackhide__ = True
    from workbench.api.profiling import profile

    try:
        return profile(
            runner,
            warmup=opts.warmup,
            repeat=opts.repeat,
            trace=trace and not opts.no_trace,
            name=opts.name or runner.__name__,
            threads=opts.threads,
            grad_enabled=False if opts.no_grad else None,
            trace_repeat=opts.trace_repeat,
            memory=bool(getattr(opts, "memory", False)) and trace and not opts.no_trace,
            history=False,
        )  # the magic records the cell's own source (record_history)
    except SystemExit as exc:
        raise ProfileError(
            f"the cell called sys.exit({exc.code!r}) in execution {runner.calls + 1} (1 cold + "
            f"{opts.warmup} warm-up + {opts.repeat} timed"
            + ("" if opts.no_trace else ", then a traced pass")
            + "); profiling stopped and no run was kept. A profiled cell must finish normally: remove "
            "the exit call"
        ) from None


def notebook_of(shell: InteractiveShell | None) -> str | None:
    """The notebook the shell runs in, where the front end says (JupyterLab's ``__session__``,
    ``JPY_SESSION_NAME``, VS Code's ``__vsc_ipynb_file__``); None in a plain shell or script."""
    import os

    ns = getattr(shell, "user_ns", {}) or {}
    for value in (ns.get("__vsc_ipynb_file__"), ns.get("__session__"), os.environ.get("JPY_SESSION_NAME")):
        if isinstance(value, str) and value.endswith(".ipynb"):
            return value
    return None


def record_history(shell: InteractiveShell | None, run: ProfileRun, source: str) -> None:
    """Append the run to the cell's history and set ``run.history``; a history that cannot be
    written is a warning, never a failed profile."""
    from workbench.study.history import record_profile

    run.history = record_profile(run.record, source, notebook=notebook_of(shell), where="%gpuprofile")


def _keep(shell: InteractiveShell, run: ProfileRun, output: str | None, source: str) -> None:
    global _last_run, _last_source
    _last_run, _last_source = run, source
    shell.user_ns[LAST_RUN_NAME] = run
    if output:
        shell.user_ns[output] = run


@magics_class
class GpuProfileMagics(Magics):
    @magic_arguments()
    @argument("-w", "--warmup", type=int, default=3, help="untimed calls after the cold first call (>= 0, default 3)")
    @argument("-r", "--repeat", type=int, default=20, help="timed calls (>= 1, default 20)")
    @argument(
        "--trace-repeat",
        type=int,
        default=None,
        help="calls in the separate traced pass, after the clean timed ones (>= 1; default: "
        "a few, 3 to 20, enough to cover 50 ms of clean time)",
    )
    @argument(
        "-T",
        "--no-trace",
        action="store_true",
        help="no torch.profiler session: timing only, without profiler overhead",
    )
    @argument(
        "--memory",
        action="store_true",
        help="record memory in the traced pass (allocations with their op, module and line; on CUDA the "
        "allocator's history and snapshot): run.memory, and what recording it cost",
    )
    @argument("-n", "--name", default=None, help="the run's name (default: cell[<n>])")
    @argument(
        "-o",
        "--output",
        default=None,
        metavar="VAR",
        help="bind the ProfileRun to this variable (the last run is always _gpuprofile)",
    )
    @argument(
        "-t", "--threads", type=int, default=None, help="torch.set_num_threads for the profile, restored afterwards"
    )
    @argument(
        "--no-grad",
        action="store_true",
        help="run with autograd off (torch.set_grad_enabled(False)), restored afterwards",
    )
    @argument("-q", "--quiet", action="store_true", help="keep the run but do not display it")
    @argument(
        "--no-history",
        action="store_true",
        help="do not append this run to the cell's history (workbench-history.jsonl beside the "
        "notebook, in the current folder otherwise; `workbench history` reads it)",
    )
    @argument(
        "--explain",
        action="store_true",
        help="line form only (%%gpuprofile --explain f(x)): after profiling, run "
        "torch._dynamo.explain on the call (graph count, graph breaks and their reasons); "
        "it resets dynamo's caches, so compiled functions compile again on their next call",
    )
    @line_cell_magic
    def gpuprofile(self, line: str, cell: str | None = None) -> ProfileRun | None:
        """Profile this cell: one cold run timed apart, warm-up runs, timed repeats under one
        torch.profiler session; shows timing (median, p95, spread), cold time, compile
        diagnostics, top ops/kernels and hypotheses.

        Cell form: ``%%gpuprofile [options]`` above the cell.  Line form: ``%gpuprofile
        [options] CODE`` profiles CODE (e.g. ``%gpuprofile -r 10 f(x)``); options come first.
        Options: -w/--warmup N (untimed calls after the cold one, default 3), -r/--repeat N
        (timed calls, default 20), --trace-repeat N (calls traced apart after the clean timed ones;
        default 3 to 20, enough to cover 50 ms), -T/--no-trace (timing only), -n/--name NAME, -o/--output VAR
        (bind the run), -t/--threads N (torch threads while profiling), --no-grad, -q/--quiet
        (keep, do not display), --explain (line form: torch._dynamo.explain of the call),
        --no-history (do not append the run to the cell's history; ``run.history`` holds it).

        The code executes 1 + warmup + repeat times in your namespace: assignments persist, side
        effects repeat; output shows once (from the first execution). The last run is
        ``_gpuprofile`` and ``workbench.magics.last_run()``, its source
        ``workbench.magics.gpuprofile.last_cell_source()`` (what ``%%gpuvariant`` compares
        against); a cell that fails leaves no run.  ``run.code`` is the cell's callable (the
        compiled cell, run in your namespace), so ``run.fixes`` lists the catalog fixes that apply
        to it and ``%gpuvariant --fix NAME`` runs them.
        """
        __tracebackhide__ = True
        from workbench.magics.line_form import split_options

        if cell is None:
            line, code = split_options(self.gpuprofile.parser, line)
            if not code.strip():
                raise UsageError(
                    "%gpuprofile needs code after the options, e.g. `%gpuprofile -r 10 f(x)`; "
                    "or use %%gpuprofile on a cell"
                )
        else:
            code = cell
        opts = parse_argstring(self.gpuprofile, line)
        _check_options(opts)
        if cell is not None and opts.explain:
            raise UsageError("--explain works on the line form, on one call: `%gpuprofile --explain f(x)`")
        if not code.strip():
            raise UsageError("%%gpuprofile needs code in the cell below the magic line")
        if opts.explain:
            from workbench.magics.explain import parse_call

            parse_call(code)  # refuse a line that is not one call before profiling it
        run, last_value = self._profile(code, opts, first_line=1 if cell is None else CELL_MAGIC_FIRST_LINE)
        if opts.explain:
            self._explain(code)
        if last_value is not None and cell is not None:
            from IPython.display import display

            display(last_value)
        return None if opts.quiet else run

    def _profile(self, code: str, opts: argparse.Namespace, *, first_line: int) -> tuple[ProfileRun, Any]:
        __tracebackhide__ = True
        from workbench.magics.cell import CellCallable, compile_cell, prompt_number
        from workbench.magics.guard import ShellGuard
        from workbench.magics.progress import StatusLine

        try:
            compiled = compile_cell(magic_shell(self), code, first_line=first_line)
        except SyntaxError as exc:
            raise UsageError(syntax_error_message(exc)) from None
        name = opts.name or f"cell[{prompt_number(magic_shell(self))}]"
        guard, note = ShellGuard(magic_shell(self)), None
        try:
            with guard:
                trace, note = trace_plan(guard, code, opts)
                if note:
                    print(f"%gpuprofile: {note}")
                status = StatusLine(
                    guard,
                    f"%gpuprofile {name}",
                    opts.warmup,
                    opts.repeat,
                    trace,
                    enabled=None if not guard.nested else False,
                )
                runner = CellCallable(magic_shell(self), compiled, guard, name=name, on_call=status.on_call)
                status.start()
                done = "stopped"
                try:
                    run = _profile_cell(runner, opts, trace)
                    done = "done"
                    if trace and run.trace is None and run.trace_note:  # asked for, not taken: say why
                        guard.notes.append(run.trace_note)
                finally:
                    status.close(f"%gpuprofile {name}: {done}, {runner.calls} calls in {status.elapsed_s():.1f} s")
        finally:
            for line in guard.notes:
                print(f"%gpuprofile: {line}")
        # the cell's code, live, for run.fixes (and %%gpuvariant --fix): the compiled cell as it was
        # profiled, outside this magic's guard and status line (a later call runs it in the namespace)
        run.code, run.code_args = CellCallable(magic_shell(self), compiled, name=name), ((), {})
        body_id = cell_id(compiled.filename)  # the cell's body is compiled under a file of its own
        if body_id is not None:
            run.cells[body_id] = prompt_number(magic_shell(self))  # the prompt's number, not IPython's next
        if not opts.no_history:
            record_history(magic_shell(self), run, code)
        _keep(magic_shell(self), run, opts.output, code)
        return run, runner.last_value

    def _explain(self, code: str) -> None:
        from workbench.magics.explain import explain_call

        explanation = explain_call(magic_shell(self), code)
        magic_shell(self).user_ns[EXPLAIN_NAME] = explanation
        print(explanation.summary())
