"""A notebook cell as a callable: compiled once with the shell's compiler, run in the user namespace.

The cell is transformed (``%magics``, ``!shell``) and compiled exactly as IPython would compile it,
registered with the shell's line cache so tracebacks show its source. A trailing expression is
evaluated and its value kept, as a normal cell's Out. Output (print, display) shows for the first
execution only; the repeats' output is dropped, so a cell that prints does not print
``1 + warmup + repeat`` times. The silencing belongs to the magic's one
:class:`~workbench.magics.guard.ShellGuard` (shared by every cell the magic runs), which
restores the streams and the display publisher when the magic ends.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass
from types import CodeType
from typing import TYPE_CHECKING, Any, Callable

from IPython.core.error import UsageError

if TYPE_CHECKING:
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.core.magic import Magics

    from workbench.magics.guard import ShellGuard


@dataclass(frozen=True)
class CompiledCell:
    body: CodeType
    last_expression: CodeType | None
    filename: str


def magic_shell(magics: Magics) -> InteractiveShell:
    """The shell a registered magic runs in (IPython types ``Magics.shell`` as optional)."""
    if magics.shell is None:
        raise UsageError("this magic has no IPython shell: load it with %load_ext workbench")
    return magics.shell


def compile_cell(shell: InteractiveShell, cell: str) -> CompiledCell:
    """Compile ``cell`` as the shell compiles a cell; a SyntaxError propagates as IPython shows it."""
    source = shell.transform_cell(cell)
    filename = shell.compile.cache(source, shell.execution_count)
    tree = shell.compile.ast_parse(source, filename=filename)
    tree = shell.transform_ast(tree)
    last = None
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        last = ast.Expression(tree.body.pop().value)
    compiler: Callable[..., CodeType] = shell.compile     # IPython types its source as str; it takes ASTs too
    body = compiler(ast.Module(body=tree.body, type_ignores=[]), filename, "exec")
    last_code = compiler(last, filename, "eval") if last is not None else None
    return CompiledCell(body, last_code, filename)


class CellCallable:
    """Calling it executes the cell once in the shell's namespace and returns its last value.

    ``guard`` is the magic's ShellGuard: after the first call (or from the start, with
    ``show_first=False``) it silences output until the magic ends.  ``name`` defaults to
    ``cell[N]``, N the prompt number the user sees.  ``on_call(index, finished)`` is told
    before and after each call (a counter for the status line; nothing slow).
    """

    def __init__(self, shell: InteractiveShell, compiled: CompiledCell, guard: ShellGuard | None = None, *,
                 show_first: bool = True, name: str | None = None,
                 on_call: Callable[[int, bool], None] | None = None) -> None:
        self._shell = shell
        self._compiled = compiled
        self._guard = guard
        self._show_first = show_first
        self._on_call = on_call
        self.calls = 0
        self.last_value: Any = None
        self.__name__ = self.__qualname__ = name or f"cell[{prompt_number(shell)}]"

    def __call__(self) -> Any:
        __tracebackhide__ = True
        shell, compiled = self._shell, self._compiled
        if self._on_call is not None:
            self._on_call(self.calls, False)
        if self._guard is not None and (self.calls >= 1 or not self._show_first):
            self._guard.silence()
        exec(compiled.body, shell.user_global_ns, shell.user_ns)
        value = None
        if compiled.last_expression is not None:
            value = eval(compiled.last_expression, shell.user_global_ns, shell.user_ns)
        self.last_value = value
        self.calls += 1
        if self._on_call is not None:
            self._on_call(self.calls - 1, True)
        return value


def prompt_number(shell: InteractiveShell | None) -> int:
    """The number in the cell's prompt (``In [4]``) while the cell runs.

    IPython 9 counts up before it runs a stored cell, so ``execution_count`` is one ahead
    during the cell; the display hook's ``prompt_count`` is the number the Out prompt shows
    (older IPython: ``execution_count`` itself), so it is asked first."""
    count = getattr(getattr(shell, "displayhook", None), "prompt_count", None)
    if not isinstance(count, int):
        count = getattr(shell, "execution_count", 0)
    return int(count or 0)
