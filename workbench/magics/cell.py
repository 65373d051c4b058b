"""A notebook cell as a callable: compiled once with the shell's compiler, run in the user namespace.

The cell is transformed (``%magics``, ``!shell``) and compiled exactly as IPython would compile it,
registered with the shell's line cache so tracebacks show its source. A trailing expression is
evaluated and its value kept, as a normal cell's Out. Output (print, display) shows for the first
execution only; the repeats' output is dropped, so a cell that prints does not print
``1 + warmup + repeat`` times. The silencing belongs to the magic's one
:class:`~workbench.magics.guard.ShellGuard` (shared by every cell the magic runs), which
restores the streams and the display publisher when the magic ends.

What a cell computes is its last value *and* the names it binds at top level (``loss = step()``
binds ``loss``): :func:`bound_names` reads them from the code (assignments, augmented and
annotated assignments, ``for`` targets, ``with ... as`` names, ``:=``; imports, ``def`` and
``class`` excluded, and ``_``).  A :class:`CellCallable` given ``result_names`` returns
``{name: value, ..., "last value": value}`` so that a comparison sees what the cell computed;
``__workbench_reach__()`` hands the comparison the namespace values the cell's code refers to
(the model and optimizer a cell's functions close over are found through them).
"""

from __future__ import annotations

import ast
import types
from dataclasses import dataclass
from types import CodeType
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping

from IPython.core.error import UsageError

if TYPE_CHECKING:
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.core.magic import Magics

    from workbench.magics.guard import ShellGuard

LAST_VALUE = "last value"  # the key of a cell's trailing expression in its result
# names a cell may refer to that are the shell's, not the user's computation
SHELL_NAMES = frozenset({"get_ipython", "exit", "quit", "In", "Out", "display", "_ih", "_oh", "_dh"})


@dataclass(frozen=True)
class CompiledCell:
    body: CodeType
    last_expression: CodeType | None
    filename: str
    bound: tuple[str, ...] = ()  # names bound at top level, in first-binding order
    referenced: tuple[str, ...] = ()  # names the code reads (its functions' bodies included)


def magic_shell(magics: Magics) -> InteractiveShell:
    """The shell a registered magic runs in (IPython types ``Magics.shell`` as optional)."""
    if magics.shell is None:
        raise UsageError("this magic has no IPython shell: load it with %load_ext workbench")
    return magics.shell


def _target_names(target: ast.AST) -> list[str]:
    if isinstance(target, ast.Name):
        return [target.id]
    if isinstance(target, (ast.Tuple, ast.List)):
        return [n for elt in target.elts for n in _target_names(elt)]
    if isinstance(target, ast.Starred):
        return _target_names(target.value)
    return []  # ``obj.attr = ...``, ``d[k] = ...`` bind no name


def _statement_names(stmt: ast.stmt) -> list[str]:
    """Names one top-level statement binds (its nested blocks included, never a def/class body)."""
    out: list[str] = []
    if isinstance(stmt, ast.Assign):
        out += [n for t in stmt.targets for n in _target_names(t)]
    elif isinstance(stmt, ast.AugAssign):
        out += _target_names(stmt.target)
    elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
        out += _target_names(stmt.target)
    elif isinstance(stmt, (ast.For, ast.AsyncFor)):
        out += _target_names(stmt.target)
    elif isinstance(stmt, (ast.With, ast.AsyncWith)):
        out += [n for item in stmt.items if item.optional_vars is not None for n in _target_names(item.optional_vars)]
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Import, ast.ImportFrom)):
        return out
    # ``:=`` in this statement's own expressions (not inside a lambda or a comprehension's scope)
    for node in _own_nodes(stmt):
        if isinstance(node, ast.NamedExpr):
            out += _target_names(node.target)
    for block in ("body", "orelse", "finalbody"):
        for inner in getattr(stmt, block, None) or ():
            if isinstance(inner, ast.stmt):
                out += _statement_names(inner)
    for handler in getattr(stmt, "handlers", None) or ():
        if handler.name:
            out.append(handler.name)
        for inner in handler.body:
            out += _statement_names(inner)
    for case in getattr(stmt, "cases", None) or ():
        for inner in case.body:
            out += _statement_names(inner)
    return out


def _own_nodes(stmt: ast.stmt) -> Iterable[ast.AST]:
    """The expression nodes of ``stmt`` itself: not its nested statements, lambdas or comprehensions."""
    todo: list[ast.AST] = [
        child for field, child in _fields(stmt) if field not in ("body", "orelse", "finalbody", "handlers", "cases")
    ]
    while todo:
        node = todo.pop()
        yield node
        if isinstance(node, (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp, ast.stmt)):
            continue
        todo += [child for _, child in _fields(node)]


def _fields(node: ast.AST) -> list[tuple[str, ast.AST]]:
    out = []
    for field, value in ast.iter_fields(node):
        if isinstance(value, ast.AST):
            out.append((field, value))
        elif isinstance(value, list):
            out += [(field, v) for v in value if isinstance(v, ast.AST)]
    return out


def bound_names(tree: ast.Module | Iterable[ast.stmt]) -> tuple[str, ...]:
    """The names a cell binds at top level, in first-binding order: assignments (``a = ...``,
    ``a, b = ...``), ``a += ...``, ``a: T = ...``, ``for a in ...``, ``with ... as a``, ``except E
    as a``, ``(a := ...)``, in the cell's own blocks (``if``, ``for``, ``with``, ``try``) too.
    Imports, ``def`` and ``class`` are not results; nor is ``_``."""
    body = tree.body if isinstance(tree, ast.Module) else list(tree)
    names = [n for stmt in body for n in _statement_names(stmt)]
    return tuple(n for n in dict.fromkeys(names) if n != "_")


def referenced_names(tree: ast.AST) -> tuple[str, ...]:
    """Every name the code reads (``model`` in ``model.fc(x)``, ``step`` in ``loss = step()``),
    in the bodies of the functions it defines too, in order of first use."""
    augmented = {id(node.target) for node in ast.walk(tree) if isinstance(node, ast.AugAssign)}
    found = [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Name) and (isinstance(node.ctx, ast.Load) or id(node) in augmented)
    ]  # ``loss += 1`` reads ``loss``
    found.sort(key=lambda n: (getattr(n, "lineno", 0), getattr(n, "col_offset", 0)))
    return tuple(dict.fromkeys(n.id for n in found))


CELL_MAGIC_FIRST_LINE = 2  # a cell magic's body starts on the cell's second line (the magic's own is the first)


def compile_cell(shell: InteractiveShell, cell: str, *, first_line: int = 1) -> CompiledCell:
    """Compile ``cell`` as the shell compiles a cell; a SyntaxError propagates as IPython shows it.

    ``first_line``: the line of the notebook cell the code starts on (``CELL_MAGIC_FIRST_LINE`` for a
    cell magic's body): the code is compiled with that many lines before it, so that a traceback, a
    syntax error and the attribution (``cell [7], line 3``) name the line the user sees in the cell."""
    source = "\n" * max(0, first_line - 1) + shell.transform_cell(cell)
    filename = shell.compile.cache(source, shell.execution_count)
    tree = shell.compile.ast_parse(source, filename=filename)
    tree = shell.transform_ast(tree)
    referenced = referenced_names(tree)
    bound = bound_names(tree)
    last = None
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        last = ast.Expression(tree.body.pop().value)
    compiler: Callable[..., CodeType] = shell.compile  # IPython types its source as str; it takes ASTs too
    body = compiler(ast.Module(body=tree.body, type_ignores=[]), filename, "exec")
    last_code = compiler(last, filename, "eval") if last is not None else None
    return CompiledCell(body, last_code, filename, bound, referenced)


def is_data(value: Any) -> bool:
    """Whether a bound value is something a comparison can hold against another's: a tensor, a
    number, a string, None, or a tuple / list / dict of those."""
    if value is None or isinstance(value, (bool, int, float, complex, str, bytes)):
        return True
    if type(value).__module__.startswith("torch") and hasattr(value, "dtype") and hasattr(value, "shape"):
        return True
    if type(value).__module__.startswith("numpy") and hasattr(value, "dtype"):
        return True
    if isinstance(value, (tuple, list)):
        return all(is_data(v) for v in value)
    if isinstance(value, dict):
        return all(is_data(v) for v in value.values())
    return False


def _own_copy(value: Any) -> Any:
    """The value with every tensor in it a detached copy (a comparison poisons the outputs it has
    checked: a tensor the cell merely points to, a parameter or an input, must not be hit)."""
    from workbench.variants.tree import map_tensors

    return map_tensors(value, lambda t: t.detach().clone())


def _is_shared_tensor_tree(value: Any, before: set[int]) -> bool:
    from workbench.variants.tree import tensor_leaves

    for _, t in tensor_leaves(value, "out"):
        if id(t) in before or (getattr(t, "requires_grad", False) and getattr(t, "is_leaf", False)):
            return True
        if type(t).__name__ == "Parameter":
            return True
    return False


class CellCallable:
    """Calling it executes the cell once in the shell's namespace and returns its last value.

    ``guard`` is the magic's ShellGuard: after the first call (or from the start, with
    ``show_first=False``) it silences output until the magic ends.  ``name`` defaults to
    ``cell[N]``, N the prompt number the user sees.  ``on_call(index, finished)`` is told
    before and after each call (a counter for the status line; nothing slow).

    ``result_names``: the call returns ``{name: the value the cell bound to it, ...}`` for these
    names instead of the bare last value, with the last value under ``"last value"`` when
    ``with_last``; a None is left out (it is no value: a cell whose names all hold None returns
    ``{}``, which the comparison refuses as nothing to compare, never as a match).  A bound value that is not data (a module, an optimizer,
    a function) is given by its type's name (``"<AdamW>"``): two cells that bind the same kind of
    object agree there, and the object's own state is the comparison's to find (through
    ``__workbench_reach__``).  A tensor the cell only points to (an input, a parameter, a value
    another name holds) is returned as a copy, so the checks never write into the namespace.
    """

    def __init__(
        self,
        shell: InteractiveShell,
        compiled: CompiledCell,
        guard: ShellGuard | None = None,
        *,
        show_first: bool = True,
        name: str | None = None,
        on_call: Callable[[int, bool], None] | None = None,
        result_names: Iterable[str] | None = None,
        with_last: bool = True,
    ) -> None:
        self._shell = shell
        self._compiled = compiled
        self._guard = guard
        self._show_first = show_first
        self._on_call = on_call
        self.result_names = tuple(result_names) if result_names is not None else None
        self.with_last = with_last
        self.calls = 0
        self.last_value: Any = None
        self.not_data: dict[str, str] = {}  # bound names given by their type, and the type
        self.__name__ = self.__qualname__ = name or f"cell[{prompt_number(shell)}]"

    def __call__(self) -> Any:
        __tracebackhide__ = True
        shell, compiled = self._shell, self._compiled
        if self._on_call is not None:
            self._on_call(self.calls, False)
        if self._guard is not None and (self.calls >= 1 or not self._show_first):
            self._guard.silence()
        before = {id(v) for v in shell.user_ns.values()} if self.result_names is not None else set()
        exec(compiled.body, shell.user_global_ns, shell.user_ns)
        value = None
        if compiled.last_expression is not None:
            value = eval(compiled.last_expression, shell.user_global_ns, shell.user_ns)
        self.last_value = value
        self.calls += 1
        if self._on_call is not None:
            self._on_call(self.calls - 1, True)
        if self.result_names is None:
            return value
        return self._result(value, before)

    def _result(self, value: Any, before: set[int]) -> dict[str, Any]:
        ns = self._shell.user_ns
        out: dict[str, Any] = {}
        for name in self.result_names or ():
            if name not in ns:
                out[name] = "<not bound>"  # a branch that did not run: compared as such
            elif ns[name] is not None:  # None is no value: two Nones never "match"
                out[name] = self._leaf(name, ns[name], before)
        if self.with_last and value is not None:
            out[LAST_VALUE] = self._leaf(LAST_VALUE, value, before)
        return out

    def _leaf(self, name: str, value: Any, before: set[int]) -> Any:
        if not is_data(value):
            kind = type(value).__name__
            self.not_data[name] = kind
            return f"<{kind}>"
        return _own_copy(value) if _is_shared_tensor_tree(value, before) else value

    def __workbench_reach__(self) -> list[Any]:
        """The namespace values the cell's code refers to (``step``, ``model``, ``opt``, ``x``...), by
        name, for the comparison to search for the parameters and optimizer state a call changes and
        the plain tensors it reads (a cell changing one in place is then seen, and undone); modules
        and the shell's own names are left out."""
        ns = self._shell.user_ns
        out: dict[str, Any] = {}
        for name in self._compiled.referenced:
            if name in SHELL_NAMES or name not in ns:
                continue
            value = ns[name]
            if isinstance(value, types.ModuleType):
                continue
            out[name] = value
        return [out]


def snapshot_names(ns: Mapping[str, Any], names: Iterable[str]) -> tuple[dict[str, Any], set[str]]:
    """What the names hold now (and which are unbound), to put back with :func:`restore_names`."""
    names = list(dict.fromkeys(names))
    return {n: ns[n] for n in names if n in ns}, {n for n in names if n not in ns}


def restore_names(ns: dict[str, Any], saved: Mapping[str, Any], unbound: Iterable[str]) -> None:
    for name, value in saved.items():
        ns[name] = value
    for name in unbound:
        ns.pop(name, None)


def prompt_number(shell: InteractiveShell | None) -> int:
    """The number in the cell's prompt (``In [4]``) while the cell runs.

    IPython 9 counts up before it runs a stored cell, so ``execution_count`` is one ahead
    during the cell; the display hook's ``prompt_count`` is the number the Out prompt shows
    (older IPython: ``execution_count`` itself), so it is asked first."""
    count = getattr(getattr(shell, "displayhook", None), "prompt_count", None)
    if not isinstance(count, int):
        count = getattr(shell, "execution_count", 0)
    return int(count or 0)
