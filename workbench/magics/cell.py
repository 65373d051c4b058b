"""A notebook cell as a callable: compiled once with the shell's compiler, run in the user namespace.

The cell is transformed (``%magics``, ``!shell``) and compiled exactly as IPython would compile it,
registered with the shell's line cache so tracebacks show its source. A trailing expression is
evaluated and its value kept, as a normal cell's Out. Output (print, display) shows for the first
execution only; the repeats' output is captured and dropped, so a cell that prints does not print
``1 + warmup + repeat`` times.
"""
from __future__ import annotations

import ast
from contextlib import ExitStack
from dataclasses import dataclass
from types import CodeType
from typing import Any


@dataclass(frozen=True)
class CompiledCell:
    body: CodeType
    last_expression: CodeType | None
    filename: str


def compile_cell(shell: Any, cell: str) -> CompiledCell:
    """Compile ``cell`` as the shell compiles a cell; a SyntaxError propagates as IPython shows it."""
    source = shell.transform_cell(cell)
    filename = shell.compile.cache(source, shell.execution_count)
    tree = shell.compile.ast_parse(source, filename=filename)
    tree = shell.transform_ast(tree)
    last = None
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        last = ast.Expression(tree.body.pop().value)
    body = shell.compile(ast.Module(body=tree.body, type_ignores=[]), filename, "exec")
    last_code = shell.compile(last, filename, "eval") if last is not None else None
    return CompiledCell(body, last_code, filename)


class CellCallable:
    """Calling it executes the cell once in the shell's namespace and returns its last value."""

    def __init__(self, shell: Any, compiled: CompiledCell) -> None:
        self._shell = shell
        self._compiled = compiled
        self._output = ExitStack()
        self.calls = 0
        self.last_value: Any = None
        self.__name__ = self.__qualname__ = f"cell[{shell.execution_count}]"

    def __call__(self) -> Any:
        __tracebackhide__ = True
        shell, compiled = self._shell, self._compiled
        exec(compiled.body, shell.user_global_ns, shell.user_ns)
        value = None
        if compiled.last_expression is not None:
            value = eval(compiled.last_expression, shell.user_global_ns, shell.user_ns)
        self.last_value = value
        self.calls += 1
        if self.calls == 1:
            self._silence_later_calls()
        return value

    def _silence_later_calls(self) -> None:
        from IPython.utils.capture import capture_output

        self._output.enter_context(capture_output(stdout=True, stderr=True, display=True))

    def release_output(self) -> None:
        """Stop capturing the repeats' output (always call it, in a finally)."""
        self._output.close()
