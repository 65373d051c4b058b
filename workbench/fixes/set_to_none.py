"""``set_to_none``: gradients dropped (``None``) instead of overwritten with zeros between steps.

Recognised in the source of the callable and of the user's functions it calls (``inspect.getsource`` +
``ast``): ``opt.zero_grad(set_to_none=False)`` (or ``zero_grad(False)``, on an optimizer or a module) and
manual loops that zero each gradient (``p.grad.zero_()``, ``p.grad.data.zero_()``, ``p.grad.fill_(0)``,
``p.grad.mul_(0)`` as a statement).  Where the source cannot be read the row says "not applicable: source not
available".

The transform is an AST-rewritten copy of each function holding the pattern: ``set_to_none=True``, and each
zeroing statement replaced by ``<p>.grad = None``; compiled with the file name and line numbers of the
original, run with the same globals and closure cells (the rewritten helpers rebound into a copy of the
caller: ``rebind``).  The next backward writes fresh gradients instead of adding to zeros: the same values
(numerics exact), one pass over every gradient less; code that reads ``.grad`` between zeroing and backward
sees ``None`` (the comparison's checks see that too).
"""

from __future__ import annotations

import ast
import copy
import types
from dataclasses import dataclass

from workbench.capture.cells import source_line
from workbench.fixes import _patterns as P
from workbench.fixes.fix import Fix, Site, absent, applies, not_applicable

NAME = "set_to_none"
RULES = ("zero_grad_not_none",)
ZEROING = ("zero_", "fill_", "mul_")


@dataclass
class Found:
    src: P.Source
    line: str  # file:line
    what: str


def _grad_target(node: ast.AST) -> ast.AST | None:
    """``p`` for ``p.grad`` / ``p.grad.data``, else None."""
    if isinstance(node, ast.Attribute) and node.attr == "data":
        node = node.value
    if isinstance(node, ast.Attribute) and node.attr == "grad":
        return node.value
    return None


def _is_zero(arg: ast.AST) -> bool:
    return isinstance(arg, ast.Constant) and not isinstance(arg.value, bool) and arg.value == 0


def _zeroing_statement(stmt: ast.AST) -> ast.AST | None:
    """The ``p`` of a statement ``p.grad.zero_()`` (``.data.zero_()``, ``.fill_(0)``, ``.mul_(0)``), else None."""
    if not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)):
        return None
    call = stmt.value
    f = call.func
    if not isinstance(f, ast.Attribute) or f.attr not in ZEROING:
        return None
    if f.attr == "zero_" and (call.args or call.keywords):
        return None
    if f.attr in ("fill_", "mul_") and not (len(call.args) == 1 and _is_zero(call.args[0]) and not call.keywords):
        return None
    return _grad_target(f.value)


def _keeps_zeros(call: ast.Call) -> bool:
    """``x.zero_grad(set_to_none=False)`` or ``x.zero_grad(False)``."""
    if not (isinstance(call.func, ast.Attribute) and call.func.attr == "zero_grad"):
        return False
    for k in call.keywords:
        if k.arg == "set_to_none" and isinstance(k.value, ast.Constant) and k.value.value is False:
            return True
    return bool(call.args) and isinstance(call.args[0], ast.Constant) and call.args[0].value is False


def find(src: P.Source) -> list[Found]:
    out = []
    for node in ast.walk(src.tree):
        if isinstance(node, ast.Call) and _keeps_zeros(node):
            out.append(Found(src, src.where(node), f"{ast.unparse(node)}"))
        elif _zeroing_statement(node) is not None:
            out.append(Found(src, src.where(node), ast.unparse(node).strip()))
    return out


class _Rewrite(ast.NodeTransformer):
    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        if _keeps_zeros(node):
            node.keywords = [k for k in node.keywords if k.arg != "set_to_none"]
            node.args = node.args[1:]
            node.keywords.append(ast.keyword(arg="set_to_none", value=ast.Constant(True)))
        return node

    def visit_Expr(self, node: ast.Expr) -> ast.AST:
        target = _zeroing_statement(node)
        if target is None:
            return self.generic_visit(node)
        assign = ast.Assign(
            targets=[ast.Attribute(value=copy.deepcopy(target), attr="grad", ctx=ast.Store())],
            value=ast.Constant(None),
        )
        return ast.copy_location(assign, node)


_FUTURE_FLAGS = 0
for _feature in ("annotations", "generator_stop", "division", "barry_as_FLUFL"):
    try:
        _FUTURE_FLAGS |= getattr(__import__("__future__"), _feature).compiler_flag
    except AttributeError:
        pass


def rewrite(src: P.Source) -> types.FunctionType:
    """A copy of ``src.fn`` with the pattern rewritten, compiled from its own source with its file name and
    line numbers, its globals, closure cells, defaults and attributes."""
    fn = src.fn
    tree = _Rewrite().visit(copy.deepcopy(src.tree))
    tree.decorator_list = []  # the function object is the undecorated one
    ast.increment_lineno(tree, src.firstline - 1)
    freevars = fn.__code__.co_freevars
    if freevars:
        # an enclosing function that holds the free variables as its own locals: the compiled inner function
        # gets them as free variables, and the original cells are passed as its closure
        outer = ast.FunctionDef(
            name="__workbench_outer__",
            args=ast.arguments(posonlyargs=[], args=[], vararg=None, kwonlyargs=[], kw_defaults=[], defaults=[]),
            body=[ast.Assign(targets=[ast.Name(v, ast.Store())], value=ast.Constant(None)) for v in freevars]
            + [tree, ast.Return(ast.Name(fn.__name__, ast.Load()))],
            decorator_list=[],
            returns=None,
            **({"type_params": []} if "type_params" in ast.FunctionDef._fields else {}),
        )
        body = [outer]
    else:
        body = [tree]
    module = ast.Module(body=body, type_ignores=[])
    ast.fix_missing_locations(module)
    code = compile(module, src.filename, "exec", flags=fn.__code__.co_flags & _FUTURE_FLAGS, dont_inherit=True)
    inner = _code_named(code, fn.__name__, nested=bool(freevars))
    cells = dict(zip(freevars, fn.__closure__ or ()))
    missing = [v for v in inner.co_freevars if v not in cells]
    if missing:
        raise RuntimeError(f"the rewritten {fn.__name__} needs free variables the original has not: {missing}")
    closure = tuple(cells[v] for v in inner.co_freevars) or None
    new = types.FunctionType(inner, fn.__globals__, fn.__name__, fn.__defaults__, closure)
    new.__kwdefaults__ = dict(fn.__kwdefaults__) if fn.__kwdefaults__ else None
    for attr in ("__qualname__", "__module__", "__doc__"):
        setattr(new, attr, getattr(fn, attr))
    new.__dict__.update(fn.__dict__)
    new.__annotations__ = dict(getattr(fn, "__annotations__", {}) or {})
    return new


def _code_named(code: types.CodeType, name: str, nested: bool) -> types.CodeType:
    consts = [c for c in code.co_consts if isinstance(c, types.CodeType)]
    if nested:
        consts = [c for outer in consts for c in outer.co_consts if isinstance(c, types.CodeType)]
    for c in consts:
        if c.co_name == name:
            return c
    raise RuntimeError(f"the rewritten source of {name} compiled to no function of that name")


def _scan(fn):
    """(sites found, sources read, whether the callable's own source was read: a lambda's counts as read,
    it holds no statement, and where it calls zero_grad(set_to_none=False) itself the row says so)."""
    root, _ = P.root_function(fn)
    sources, _ = P.code_sources(fn)
    own = root is not None and any(s.fn is root for s in sources)
    if root is not None and root.__name__ == "<lambda>":
        tree = P.lambda_source(root)
        if tree is not None and any(_keeps_zeros(c) for c in P.calls(tree)):
            raise _InLambda(source_line(root.__code__.co_filename, root.__code__.co_firstlineno))
        own = tree is not None
    found = [f for s in sources for f in find(s)]
    return found, sources, own


class _InLambda(Exception):
    """zero_grad(set_to_none=False) written in a lambda (its line): no statement to rewrite in place."""


def _transform(fn, context, name):
    from workbench.fixes.rebind import rebind
    from workbench.variants.spec import Variant

    description = "zero_grad(set_to_none=True) / p.grad = None in an AST-rewritten copy of the code"

    def failed(reason: str) -> Variant:
        return Variant(name=name, fn=fn, kind="user", description=description, not_applicable_reason=reason)

    try:
        found, _, own = _scan(fn)
    except _InLambda as exc:
        return failed(f"zero_grad(set_to_none=False) is called in a lambda ({exc}): write it as a def to rewrite it")
    if not own:
        return failed("source not available: the callable's source cannot be read (inspect.getsource)")
    if not found:
        return failed("no zero_grad(set_to_none=False) or p.grad.zero_() in the code's source")
    new_funcs: dict[int, types.FunctionType] = {}
    for f in found:
        if id(f.src.fn) not in new_funcs:
            try:
                new_funcs[id(f.src.fn)] = rewrite(f.src)
            except Exception as exc:  # noqa: BLE001 - say why the rewrite could not be compiled
                return failed(
                    f"the rewritten {f.src.fn.__name__} ({f.line}) did not compile: {type(exc).__name__}: {exc}"
                )
    root, _ = P.root_function(fn)
    others = {k: v for k, v in new_funcs.items() if root is None or k != id(root)}
    if root is not None and id(root) in new_funcs:
        new_root = rebind(new_funcs[id(root)], others) if others else new_funcs[id(root)]
        if fn is root:
            result = new_root
        elif isinstance(fn, types.MethodType) and fn.__func__ is root:
            result = types.MethodType(new_root, fn.__self__)
        elif P.root_function(fn)[1] is fn:  # a module called directly: its rewritten forward, bound to it
            result = types.MethodType(new_root, fn)
        else:
            result = rebind(fn, {id(root): new_root, **others})
    else:
        result = rebind(fn, others)
    lines = [f.line for f in found]
    return Variant(
        name=name,
        fn=result,
        kind="user",
        numerical_class="exact",
        description=f"{description}: {', '.join(lines[:6])}",
        options={"rewritten": lines},
    )


def _reached_functions(fn) -> list:
    """The user's functions a notebook cell's code refers to (``__workbench_reach__``: the names it reads)."""
    import types

    reach = getattr(fn, "__workbench_reach__", None)
    if reach is None or isinstance(fn, types.FunctionType):
        return []
    try:
        items = list(reach())
    except Exception:  # noqa: BLE001 - a broken protocol reaches nothing
        return []
    values = [v for item in items for v in (item.values() if isinstance(item, dict) else (item,))]
    return [v for v in values if isinstance(v, types.FunctionType)]


def recognise(context):
    from workbench.fixes.registry import get

    hyps = context.hypotheses_for(get(NAME))
    kw = {"hypotheses": P.titles(hyps), "stake_ms": P.stake(hyps)}
    if not context.live:
        if hyps:
            return not_applicable(NAME, "the run was loaded from a file: pass the code (run.fixes_for(fn))", **kw)
        return absent(NAME, "no live code to read")
    try:
        found, sources, own = _scan(context.fn)
    except _InLambda as exc:
        return not_applicable(
            NAME, f"zero_grad(set_to_none=False) is called in a lambda ({exc}): write it as a def to rewrite it", **kw
        )
    if not own:
        reached = _reached_functions(context.fn)
        if reached:  # a notebook cell: its code is no function, the functions it calls are
            hits = []
            for f in reached:
                try:
                    hits += _scan(f)[0]
                except _InLambda:
                    continue
            if not hits:
                return absent(
                    NAME,
                    "no zero_grad(set_to_none=False) or p.grad.zero_() in the functions the cell calls "
                    "(zero_grad() sets None by default)",
                )
            return not_applicable(
                NAME,
                f"found in a function the cell calls ({', '.join(h.line for h in hits[:3])}): rewrite it there "
                "(zero_grad(set_to_none=True)) and compare the two cells with %%gpuvariant",
                tuple(Site(h.line, "line", h.what[:80]) for h in hits[:12]),
                **kw,
            )
        if hyps or context.optimizers:
            return not_applicable(NAME, "source not available: the callable's source cannot be read", **kw)
        if P.root_function(context.fn)[0] is None:
            return absent(NAME, "the callable is no Python function of the user's (a library module, a builtin)")
        return absent(NAME, "the callable's source cannot be read and it reaches no optimizer")
    if not found:
        if hyps:
            return not_applicable(
                NAME,
                "the trace shows gradients zeroed in place, but no zero_grad(set_to_none=False) or p.grad.zero_() is "
                f"in the source the rewrite reads ({len(sources)} function{'s' if len(sources) != 1 else ''})",
                **kw,
            )
        return absent(
            NAME, "no zero_grad(set_to_none=False) or p.grad.zero_() in the code (zero_grad() sets None by default)"
        )
    sites = tuple(Site(f.line, "line", f.what[:80]) for f in found[:12])
    return applies(
        NAME,
        f"gradients are overwritten with zeros each step ({', '.join(f.what for f in found[:2])}): setting them to "
        "None lets backward write fresh ones, one pass over every gradient less",
        sites,
        **kw,
    )


FIXES = (
    Fix(
        NAME,
        "zero_grad(set_to_none=True) instead of set_to_none=False, and p.grad = None instead of p.grad.zero_(), "
        "in an AST-rewritten copy of the code",
        "setting",
        "exact",
        _transform,
        recognise=recognise,
        mechanisms=RULES,
    ),
)
