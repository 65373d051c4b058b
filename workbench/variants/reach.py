"""What a variant depends on: the ``nn.Module``s, parameters, buffers and optimizers its callable reaches.

A training step is usually written as a plain function that closes over a model (``loss_fn = lambda:
F.cross_entropy(model(x), y)``), so its parameters are not arguments: they are found here by walking
what the callable can reach: an ``nn.Module`` itself, bound methods, closure cells, the globals its
code names (``co_names``, through nested code objects), default arguments, ``functools.partial``,
compiled wrappers (``_torchdynamo_orig_callable``, ``__wrapped__``, ``_orig_mod``), the attributes of
user objects, containers, and objects exposing ``__workbench_reach__()`` (an iterable of further objects
to search; the notebook's cell callable implements it).  The walk is bounded in depth and size and
never loops on cycles.

Parameters are named by module path (``named_parameters()`` of the top reached module; a second top
module is prefixed with the name it was found under); a parameter reachable only through an optimizer
is ``optimizer[i].param[j]``; a plain leaf tensor that requires grad by the variable name it was found under.
"""

from __future__ import annotations

import dis
import functools
import types
from dataclasses import dataclass, field
from typing import Any, Iterable

MAX_DEPTH = 8  # how many hops from the callable the walk follows
MAX_OBJECTS = 20_000  # how many objects it looks at in all
MAX_ITEMS = 2_000  # how many items of one container

_SKIP_MODULE_PREFIXES = (
    "builtins",
    "numpy",
    "pandas",
    "typing",
    "collections",
    "functools",
    "abc",
    "IPython",
    "ipykernel",
    "traitlets",
    "zmq",
    "asyncio",
    "threading",
    "logging",
)


@dataclass
class Reach:
    """What one callable reaches (or several, merged)."""

    modules: list[tuple[str, Any]] = field(default_factory=list)  # top modules, (name, module)
    params: dict[str, Any] = field(default_factory=dict)  # name -> tensor that takes gradients
    buffers: dict[str, Any] = field(default_factory=dict)  # name -> tensor
    optimizers: list[Any] = field(default_factory=list)
    helpers: list[Any] = field(default_factory=list)  # LR schedulers, gradient scalers: state_dict() snapshotted
    # plain tensors the code reads by name (closure cells, globals, a cell's namespace): inputs that are
    # no arguments, snapshotted so that a call changing one in place is seen and undone
    data: dict[str, Any] = field(default_factory=dict)

    @property
    def empty(self) -> bool:
        return not (self.params or self.buffers or self.optimizers)

    def names_by_id(self) -> dict[int, str]:
        return {id(t): n for n, t in {**self.data, **self.buffers, **self.params}.items()}

    def describe(self) -> dict[str, Any]:
        return {
            "parameters": len(self.params),
            "buffers": len(self.buffers),
            "optimizers": len(self.optimizers),
            "modules": [f"{n or '(top)'}: {type(m).__name__}" for n, m in self.modules],
            "schedulers_and_scalers": [type(h).__name__ for h in self.helpers],
        }


def _torch():
    import torch

    return torch


def _is_user_object(obj: Any) -> bool:
    """An instance of a class defined outside the libraries (its attributes may hold a model)."""
    mod = type(obj).__module__ or ""
    return not mod.startswith(_SKIP_MODULE_PREFIXES + ("torch",))


def _is_variant(obj: Any) -> bool:
    return type(obj).__name__ == "Variant" and type(obj).__module__ == "workbench.variants.spec"


def find_reach(*objs: Any, extra: Iterable[Any] = ()) -> Reach:
    """Walk ``objs`` (callables, modules, optimizers, containers) and ``extra`` (explicit overrides:
    modules, optimizers, tensors, dicts name -> tensor); return what they reach."""
    torch = _torch()
    Module, Optimizer, Tensor = torch.nn.Module, torch.optim.Optimizer, torch.Tensor
    seen: set[int] = set()
    modules: list[tuple[str, Any]] = []
    optimizers: list[Any] = []
    tensors: list[tuple[str, Any]] = []
    data: list[tuple[str, Any]] = []
    helpers: list[Any] = []
    helper_types = _helper_types()
    budget = [MAX_OBJECTS]

    def visit(obj: Any, label: str, depth: int) -> None:
        if obj is None or depth > MAX_DEPTH or budget[0] <= 0:
            return
        key = id(obj)
        if key in seen:
            return
        if isinstance(obj, (str, bytes, int, float, complex, bool, type, types.ModuleType)):
            return
        seen.add(key)
        budget[0] -= 1
        if isinstance(obj, Module):
            modules.append((label, obj))
            return
        if isinstance(obj, Optimizer):
            optimizers.append(obj)
            return
        if helper_types and isinstance(obj, helper_types):
            helpers.append(obj)
            inner_opt = _safe_getattr(obj, "optimizer")
            if inner_opt is not None:
                visit(inner_opt, label, depth + 1)
            return
        if isinstance(obj, Tensor):
            if obj.requires_grad and obj.is_leaf:
                tensors.append((label, obj))
            elif not obj.requires_grad:
                data.append((label, obj))
            return
        nxt = depth + 1
        if hasattr(type(obj), "__workbench_reach__") or _has_own(obj, "__workbench_reach__"):
            try:
                more = list(obj.__workbench_reach__())
            except Exception:  # noqa: BLE001 - a broken protocol adds nothing
                more = []
            for i, item in enumerate(more[:MAX_ITEMS]):
                visit(item, f"{label}[{i}]" if label else f"item[{i}]", nxt)
        for attr in ("_torchdynamo_orig_callable", "__wrapped__", "_orig_mod"):
            inner = _safe_getattr(obj, attr)
            if inner is not None and inner is not obj:
                visit(inner, label, nxt)
        if isinstance(obj, types.MethodType):
            visit(obj.__self__, label, nxt)
            visit(obj.__func__, label, nxt)
            return
        if isinstance(obj, functools.partial):
            visit(obj.func, label, nxt)
            for i, a in enumerate(obj.args):
                visit(a, f"{label}.args[{i}]", nxt)
            for k, v in (obj.keywords or {}).items():
                visit(v, k, nxt)
            return
        if isinstance(obj, types.FunctionType):
            _visit_function(obj, nxt)
            return
        if isinstance(obj, dict):
            for i, (k, v) in enumerate(obj.items()):
                if i >= MAX_ITEMS:
                    break
                visit(v, str(k) if isinstance(k, str) else f"{label}[{k!r}]", nxt)
            return
        if isinstance(obj, (list, tuple, set, frozenset)):
            for i, v in enumerate(obj):
                if i >= MAX_ITEMS:
                    break
                visit(v, f"{label}[{i}]", nxt)
            return
        if _is_variant(obj):
            visit(getattr(obj, "fn", None), label, nxt)
            return
        if not _is_user_object(obj):
            return
        call = getattr(type(obj), "__call__", None)
        if isinstance(call, types.FunctionType):
            visit(call, label, nxt)
        d = _safe_getattr(obj, "__dict__")
        if isinstance(d, dict):
            for i, (k, v) in enumerate(d.items()):
                if i >= MAX_ITEMS:
                    break
                visit(v, str(k), nxt)

    def _visit_function(fn: types.FunctionType, depth: int) -> None:
        code = fn.__code__
        for name, cell in zip(code.co_freevars, fn.__closure__ or ()):
            try:
                value = cell.cell_contents
            except ValueError:  # an empty cell
                continue
            visit(value, name, depth)
        g = fn.__globals__
        for name in _code_names(code):
            if name in g:
                visit(g[name], name, depth)
        for i, d in enumerate(fn.__defaults__ or ()):
            visit(d, f"default[{i}]", depth)
        for k, v in (fn.__kwdefaults__ or {}).items():
            visit(v, k, depth)

    for obj in objs:
        visit(obj, "", 0)
    for label, value in _flatten_extra(extra):
        if isinstance(value, Tensor):
            if all(value is not t for _, t in tensors):
                tensors.append((label, value))  # an explicit parameter, whatever its flags
            continue
        seen.discard(id(value))
        visit(value, label, 0)
    reach = _assemble(modules, optimizers, tensors, data)
    reach.helpers = list(dict.fromkeys(helpers))
    return reach


def _helper_types() -> tuple[type, ...]:
    """LR schedulers and gradient scalers: state outside the optimizer that a training step advances."""
    found: list[type] = []
    try:
        from torch.optim import lr_scheduler

        found.append(getattr(lr_scheduler, "LRScheduler", None) or lr_scheduler._LRScheduler)
        plateau = getattr(lr_scheduler, "ReduceLROnPlateau", None)
        if plateau is not None and not issubclass(plateau, found[0]):
            found.append(plateau)
    except Exception:  # noqa: BLE001
        pass
    try:
        from torch.amp import GradScaler

        found.append(GradScaler)
    except Exception:  # noqa: BLE001
        try:
            from torch.cuda.amp import GradScaler as CudaGradScaler

            found.append(CudaGradScaler)
        except Exception:  # noqa: BLE001
            pass
    return tuple(found)


def _has_own(obj: Any, name: str) -> bool:
    try:
        return name in vars(obj)
    except TypeError:
        return False


def _safe_getattr(obj: Any, name: str) -> Any:
    try:
        return getattr(obj, name, None)
    except Exception:  # noqa: BLE001 - a property that raises reaches nothing
        return None


_GLOBAL_LOADS = frozenset({"LOAD_GLOBAL", "LOAD_NAME"})


def _code_names(code: types.CodeType, depth: int = 0) -> list[str]:
    """The global names the code (and the code nested in it) reads: ``LOAD_GLOBAL`` / ``LOAD_NAME``, not
    ``co_names`` as a whole, which also holds attribute names (``opt.step()`` names no global ``step``)."""
    try:
        names = [
            i.argval for i in dis.get_instructions(code) if i.opname in _GLOBAL_LOADS and isinstance(i.argval, str)
        ]
    except Exception:  # noqa: BLE001 - code dis cannot read: every name it holds, as before
        names = list(code.co_names)
    if depth < 6:
        for const in code.co_consts:
            if isinstance(const, types.CodeType):
                names += _code_names(const, depth + 1)
    return list(dict.fromkeys(names))


def _flatten_extra(extra: Iterable[Any]) -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    for item in extra or ():
        if isinstance(item, dict):
            out += [(str(k), v) for k, v in item.items()]
        elif isinstance(item, (list, tuple)):
            out += [(f"param[{i}]", v) for i, v in enumerate(item)]
        else:
            out.append(("", item))
    return out


def _strip(name: str) -> str:
    return name.replace("_orig_mod.", "")


def _assemble(
    modules: list[tuple[str, Any]],
    optimizers: list[Any],
    tensors: list[tuple[str, Any]],
    data: list[tuple[str, Any]] = (),  # type: ignore[assignment]
) -> Reach:
    """Top modules (those not inside another reached one), their parameters and buffers by module
    path, then loose tensors and optimizer-only parameters, then the plain tensors read by name."""
    inside: set[int] = set()
    for _, m in modules:
        for sub in m.modules():
            if sub is not m:
                inside.add(id(sub))
        inner = getattr(m, "_orig_mod", None)
        if inner is not None:
            inside.update(id(s) for s in inner.modules())
    tops = [(n, m) for n, m in modules if id(m) not in inside]
    # the module with the most parameters is named without a prefix (a deep copy of it in another
    # variant then gets the same names); the others are prefixed with the name they were found under
    tops.sort(key=lambda nm: -_count_params(nm[1]))
    reach = Reach(modules=[], optimizers=list(dict.fromkeys(optimizers)))
    taken: set[int] = set()
    used: set[str] = set()
    for k, (label, m) in enumerate(tops):
        prefix = "" if k == 0 else f"{label or f'module[{k}]'}."
        reach.modules.append((prefix.rstrip("."), m))
        try:
            named_p = list(m.named_parameters())
            named_b = list(m.named_buffers())
        except Exception:  # noqa: BLE001 - a module that cannot list its parameters: its tensors by walk
            named_p, named_b = _tensors_by_attributes(m)
        for name, p in named_p:
            if id(p) not in taken:
                taken.add(id(p))
                reach.params[_unique(prefix + _strip(name), used)] = p
        for name, b in named_b:
            if id(b) not in taken:
                taken.add(id(b))
                reach.buffers[_unique(prefix + _strip(name), used)] = b
    for label, t in tensors:
        if id(t) not in taken:
            taken.add(id(t))
            reach.params[_unique(label or "tensor", used)] = t
    for i, opt in enumerate(reach.optimizers):
        for j, p in enumerate(_optimizer_params(opt)):
            if id(p) not in taken:
                taken.add(id(p))
                reach.params[_unique(f"optimizer[{i}].param[{j}]", used)] = p
    for label, t in data:
        if id(t) not in taken:
            taken.add(id(t))
            reach.data[_unique(label or "tensor", used)] = t
    return reach


def _count_params(m: Any) -> int:
    try:
        return sum(1 for _ in m.parameters())
    except Exception:  # noqa: BLE001
        return 0


def _tensors_by_attributes(m: Any) -> tuple[list, list]:
    torch = _torch()
    params, bufs = [], []
    for name, v in vars(m).get("_parameters", {}).items():
        if isinstance(v, torch.Tensor):
            params.append((name, v))
    for name, v in vars(m).get("_buffers", {}).items():
        if isinstance(v, torch.Tensor):
            bufs.append((name, v))
    for sub_name, sub in vars(m).get("_modules", {}).items():
        if sub is not None:
            p, b = _tensors_by_attributes(sub)
            params += [(f"{sub_name}.{n}", t) for n, t in p]
            bufs += [(f"{sub_name}.{n}", t) for n, t in b]
    return params, bufs


def _optimizer_params(opt: Any) -> list[Any]:
    out = []
    try:
        for group in opt.param_groups:
            out += list(group["params"])
    except Exception:  # noqa: BLE001 - an optimizer with unusual groups: none found through it
        pass
    return out


def _unique(name: str, used: set[str]) -> str:
    out, k = name, 1
    while out in used:
        k += 1
        out = f"{name}#{k}"
    used.add(out)
    return out


def merge(reaches: Iterable[Reach]) -> Reach:
    """Everything any of ``reaches`` reaches, each tensor and optimizer once (the first name wins)."""
    out = Reach()
    ids: set[int] = set()
    used: set[str] = set()
    opt_ids: set[int] = set()
    for r in reaches:
        for n, m in r.modules:
            if all(m is not x for _, x in out.modules):
                out.modules.append((n, m))
        for kind in ("params", "buffers", "data"):
            for n, t in getattr(r, kind).items():
                if id(t) not in ids:
                    ids.add(id(t))
                    getattr(out, kind)[_unique(n, used)] = t
        for o in r.optimizers:
            if id(o) not in opt_ids:
                opt_ids.add(id(o))
                out.optimizers.append(o)
        for h in r.helpers:
            if all(h is not x for x in out.helpers):
                out.helpers.append(h)
    return out


def explicit(model: Any = None, optimizer: Any = None, params: Any = None) -> list[Any]:
    """The ``model=``, ``optimizer=``, ``params=`` overrides of ``compare`` as a list for ``find_reach(extra=...)``;
    raises InvalidArgumentError on something that is none of those."""
    from workbench.errors import InvalidArgumentError

    torch = _torch()
    out: list[Any] = []

    def many(x: Any) -> list[Any]:
        return [] if x is None else list(x) if isinstance(x, (list, tuple)) else [x]

    for m in many(model):
        if not isinstance(m, torch.nn.Module):
            raise InvalidArgumentError(f"model= takes an nn.Module or a list of them, got {type(m).__name__}")
        out.append(m)
    for o in many(optimizer):
        if not isinstance(o, torch.optim.Optimizer):
            raise InvalidArgumentError(
                f"optimizer= takes a torch.optim.Optimizer or a list of them, got {type(o).__name__}"
            )
        out.append(o)
    if params is not None:
        if isinstance(params, dict):
            items = dict(params)
        else:
            try:
                items = {f"param[{i}]": p for i, p in enumerate(params)}
            except TypeError:
                raise InvalidArgumentError(
                    f"params= takes an iterable of tensors or a dict name -> tensor, got {type(params).__name__}"
                ) from None
        bad = [k for k, v in items.items() if not isinstance(v, torch.Tensor)]
        if bad:
            raise InvalidArgumentError(f"params= must hold tensors; {bad[0]!r} is not one")
        out.append(items)
    return out
