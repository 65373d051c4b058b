"""A callable like the user's, reaching other objects: what a module swap (or a rebuilt optimizer) runs on.

``rebind(fn, mapping)`` returns a callable that behaves like ``fn`` with every reference to an object
whose ``id`` is a key of ``mapping`` replaced by the mapped object, wherever ``fn`` holds it: in closure
cells, in the globals its code names (the rebuilt function gets a shallow copy of its globals dict, one
copy per original dict, so helpers from the same notebook or module see each other's rebuilt
versions), in defaults and keyword defaults, in ``functools.partial`` arguments, as the ``self`` of a
bound method, inside tuples, lists and dicts, in the attributes of the user's own objects (a shallow
copy with those attributes replaced), and in the nested functions it reaches through all of these
(rebuilt the same way; bounded in depth, cycle-safe). ``fn`` itself in ``mapping`` (an ``nn.Module``
called directly) is simply replaced. Objects that reach nothing in ``mapping`` are kept as they are (the
same objects, shared with ``fn``). The user's objects are never changed.

``copy_state(context, transform_module)`` builds the mapping for a module swap: a deep copy of every top
module the code reaches (``transform_module(copy)`` then changes the copy and says where), each reached
optimizer rebuilt over the copy's parameters (same class, same hyper-parameters per group, its state
deep-copied and re-keyed to the new parameters by position), LR schedulers of those optimizers copied
onto the new ones, and loose parameters the code or its optimizers reach cloned. ``swap_variant`` wraps
the two into the ``Variant`` a fix's transform returns (not applicable, with the reason, where the model
cannot be copied).

Limits, said plainly: a function the code reaches only through a class (a method of the user's class
other than a bound method's own, or a callable object's ``__call__``) keeps the globals it was defined
with; a rebuilt function writing a ``global`` writes the copy of the globals dict, not the user's.
"""

from __future__ import annotations

import collections
import copy
import functools
import inspect
import types
from typing import Any, Callable

import workbench.variants.reach as _reach
from workbench.errors import InvalidArgumentError

MAX_DEPTH = 8  # hops from fn the walk follows
MAX_NODES = 20_000  # objects it looks at in all
MAX_ITEMS = 2_000  # items of one container

# the library modules the reach walk skips (workbench.variants.reach), and torch and workbench themselves:
# their functions are never rebuilt
_LIBRARY_PREFIXES = (*_reach._SKIP_MODULE_PREFIXES, "torch", "workbench")
CHANGED = "changed: "  # the prefix of copy_state's notes that name a site it changed
_ATOMS = (str, bytes, int, float, complex, bool, type(None), type, types.ModuleType, types.CodeType)


# -- rebind ---------------------------------------------------------------------------------------------------
def rebind(
    fn: Callable[..., Any],
    mapping: dict[int, object],
    *,
    max_depth: int = MAX_DEPTH,
    notes: list[str] | None = None,
) -> Callable[..., Any]:
    """``fn`` with the objects of ``mapping`` (id -> replacement) swapped in; see the module docstring.
    ``notes``: where given, what could not be rebound is appended to it in words."""
    if not callable(fn):
        raise InvalidArgumentError(f"rebind() takes a callable, got {type(fn).__name__}")
    if not mapping:
        return fn
    return _Rebinder(mapping, max_depth, notes if notes is not None else []).run(fn)


def _is_user_object(obj: Any) -> bool:
    mod = type(obj).__module__ or ""
    return not mod.startswith(_LIBRARY_PREFIXES) and hasattr(obj, "__dict__")


def _code_names(code: types.CodeType, depth: int = 0) -> list[str]:
    names = list(code.co_names)
    if depth < 6:
        for const in code.co_consts:
            if isinstance(const, types.CodeType):
                names += _code_names(const, depth + 1)
    return list(dict.fromkeys(names))


class _Rebinder:
    def __init__(self, mapping: dict[int, object], max_depth: int, notes: list[str]) -> None:
        import torch

        self.mapping = mapping
        self.max_depth = max_depth
        self.notes = notes
        self.leaf_types = (torch.nn.Module, torch.optim.Optimizer, torch.Tensor)
        self.objects: dict[int, Any] = {}  # id -> object walked (kept alive, so the ids stay theirs)
        self.edges: dict[int, list[int]] = {}
        self.needs: set[int] = set()
        self.memo: dict[int, Any] = {}
        self.globals_copies: dict[int, dict[str, Any]] = {}
        self.cells: dict[int, Any] = {}

    # the objects fn reaches that rebind can rebuild, and which of them reach something mapped
    def _children(self, obj: Any) -> list[Any]:
        if id(obj) in self.mapping or isinstance(obj, _ATOMS) or isinstance(obj, self.leaf_types):
            return []
        if isinstance(obj, types.FunctionType):
            out: list[Any] = []
            for cell in obj.__closure__ or ():
                try:
                    out.append(cell.cell_contents)
                except ValueError:  # an empty cell
                    pass
            g = obj.__globals__
            out += [g[n] for n in _code_names(obj.__code__) if n in g]
            out += list(obj.__defaults__ or ())
            out += list((obj.__kwdefaults__ or {}).values())
            return out
        if isinstance(obj, types.MethodType):
            return [obj.__self__, obj.__func__]
        if isinstance(obj, functools.partial):
            return [obj.func, *obj.args, *(obj.keywords or {}).values()]
        if isinstance(obj, (tuple, list)):
            return list(obj[:MAX_ITEMS])
        if isinstance(obj, dict):
            return [v for _, v in zip(range(MAX_ITEMS), obj.values())]
        if _is_user_object(obj):
            try:
                return [v for _, v in zip(range(MAX_ITEMS), vars(obj).values())]
            except TypeError:
                return []
        return []

    def _walk(self, root: Any) -> None:
        queue = collections.deque([(root, 0)])  # breadth first: each object is met at its shallowest depth
        while queue and len(self.objects) < MAX_NODES:
            obj, depth = queue.popleft()
            key = id(obj)
            if key in self.objects:
                continue
            self.objects[key] = obj
            kids = self._children(obj) if depth < self.max_depth else []
            self.edges[key] = [id(k) for k in kids]
            for k in kids:
                if id(k) not in self.objects:
                    queue.append((k, depth + 1))
        reverse: dict[int, list[int]] = {}
        for parent, kids in self.edges.items():
            for k in kids:
                reverse.setdefault(k, []).append(parent)
        todo = [k for k in self.objects if k in self.mapping]
        while todo:
            k = todo.pop()
            if k in self.needs:
                continue
            self.needs.add(k)
            todo += [p for p in reverse.get(k, ()) if p not in self.needs]

    def run(self, fn: Any) -> Any:
        self._walk(fn)
        return self.sub(fn)

    # rebuilding
    def sub(self, obj: Any) -> Any:
        key = id(obj)
        if key in self.mapping:
            return self.mapping[key]
        if key not in self.needs:
            return obj
        if key in self.memo:
            return self.memo[key]
        if isinstance(obj, types.FunctionType):
            return self._function(obj)
        if isinstance(obj, types.MethodType):
            out = types.MethodType(self.sub(obj.__func__), self.sub(obj.__self__))
            self.memo[key] = out
            return out
        if isinstance(obj, functools.partial):
            out = functools.partial(
                self.sub(obj.func),
                *[self.sub(a) for a in obj.args],
                **{k: self.sub(v) for k, v in obj.keywords.items()},
            )
            self.memo[key] = out
            return out
        if isinstance(obj, tuple):
            items = [self.sub(v) for v in obj]
            out = type(obj)(*items) if hasattr(obj, "_fields") else tuple(items)
            self.memo[key] = out
            return out
        if isinstance(obj, list):
            out = list(obj)
            self.memo[key] = out
            out[:] = [self.sub(v) for v in obj]
            return out
        if isinstance(obj, dict):
            try:
                out = copy.copy(obj)
            except Exception:  # noqa: BLE001 - a dict subclass that cannot be copied: a plain dict
                out = dict(obj)
            self.memo[key] = out
            for k, v in obj.items():
                if id(v) in self.needs or id(v) in self.mapping:
                    out[k] = self.sub(v)
            return out
        if _is_user_object(obj):
            try:
                out = copy.copy(obj)
            except Exception as exc:  # noqa: BLE001
                self.notes.append(
                    f"a {type(obj).__name__} object the code reaches could not be copied to rebind its attributes "
                    f"({type(exc).__name__}: {exc}); it still holds the original objects"
                )
                self.memo[key] = obj
                return obj
            self.memo[key] = out
            for k, v in list(vars(obj).items()):
                if id(v) in self.needs or id(v) in self.mapping:
                    try:
                        object.__setattr__(out, k, self.sub(v))
                    except Exception:  # noqa: BLE001 - a read-only attribute: through the instance dict
                        vars(out)[k] = self.sub(v)
            return out
        return obj

    def _globals_for(self, g: dict[str, Any]) -> dict[str, Any]:
        new = self.globals_copies.get(id(g))
        if new is None:
            new = dict(g)  # a shallow copy: the same objects, the mapped ones replaced as found
            self.globals_copies[id(g)] = new
        return new

    def _function(self, fn: types.FunctionType) -> types.FunctionType:
        g = self._globals_for(fn.__globals__)
        closure = None
        if fn.__closure__:
            # the cells are made first (empty) so that a cycle back to fn finds the new function
            pending = []
            cells = []
            for cell in fn.__closure__:
                try:
                    value = cell.cell_contents
                except ValueError:
                    cells.append(cell)
                    continue
                if id(value) in self.needs or id(value) in self.mapping:
                    new = self.cells.get(id(cell))
                    if new is None:
                        new = types.CellType()
                        self.cells[id(cell)] = new
                        pending.append((new, value))
                    cells.append(new)
                else:
                    cells.append(cell)
            closure = tuple(cells)
        else:
            pending = []
        new_fn = types.FunctionType(fn.__code__, g, fn.__name__, None, closure)
        self.memo[id(fn)] = new_fn
        for attr in ("__qualname__", "__module__", "__doc__"):
            try:
                setattr(new_fn, attr, getattr(fn, attr))
            except (AttributeError, TypeError):
                pass
        new_fn.__dict__.update(fn.__dict__)
        try:
            new_fn.__annotations__ = dict(fn.__annotations__)
        except (AttributeError, TypeError):
            pass
        for cell, value in pending:
            cell.cell_contents = self.sub(value)
        for name in _code_names(fn.__code__):
            if name in fn.__globals__:
                value = fn.__globals__[name]
                if id(value) in self.needs or id(value) in self.mapping:
                    g[name] = self.sub(value)
        if fn.__defaults__:
            new_fn.__defaults__ = tuple(self.sub(d) for d in fn.__defaults__)
        if fn.__kwdefaults__:
            new_fn.__kwdefaults__ = {k: self.sub(v) for k, v in fn.__kwdefaults__.items()}
        return new_fn


# -- copy_state -----------------------------------------------------------------------------------------------
def copy_problem(module: Any, label: str = "the model") -> str | None:
    """Why ``module`` cannot be deep-copied (the attribute that fails, in words), or None: checked on its
    structure only (its parameters and buffers are not copied), so it is cheap on a large model."""
    import torch

    memo: dict[int, Any] = {}
    try:
        for t in list(module.parameters()) + list(module.buffers()):
            memo[id(t)] = t
    except Exception as exc:  # noqa: BLE001
        return f"{label} cannot list its parameters ({type(exc).__name__}: {exc})"
    try:
        copy.deepcopy(module, dict(memo))
        return None
    except Exception as exc:  # noqa: BLE001 - find the attribute that fails
        first = f"{type(exc).__name__}: {exc}"
    for path, sub in module.named_modules():
        for key, value in vars(sub).items():
            if key in ("_modules", "_parameters", "_buffers") or isinstance(value, torch.Tensor):
                continue
            try:
                copy.deepcopy(value, dict(memo))
            except Exception as exc:  # noqa: BLE001
                where = f"{path}.{key}" if path else key
                return (
                    f"{label} cannot be deep-copied: its attribute {where} ({type(value).__name__}) fails "
                    f"({type(exc).__name__}: {str(exc)[:120]}); a module swap runs on a copy so that your model is "
                    "never changed: make that attribute copyable (or drop it from the module)"
                )
    return (
        f"{label} cannot be deep-copied ({first[:160]}); a module swap runs on a copy so that your model is never "
        "changed: make the model copyable with copy.deepcopy"
    )


def _call_transform(transform_module: Callable[..., Any], module: Any) -> tuple[Any, list[Any]]:
    import torch

    got = transform_module(module)
    if isinstance(got, tuple) and len(got) == 2 and isinstance(got[0], torch.nn.Module):
        return got[0], list(got[1] or [])
    return module, list(got or [])


def copy_state(context: Any, transform_module: Callable[..., Any] | None = None) -> tuple[dict[int, object], list[str]]:
    """``(mapping id(original) -> copy, notes)`` for ``rebind``: every top module ``context`` reaches
    deep-copied and changed by ``transform_module(copy) -> list[Site]`` (or ``(new module, sites)`` where it
    replaces the module itself; sites of a second top module are prefixed with its name), each reached
    optimizer rebuilt over the copy's parameters, its LR schedulers copied onto it. Raises
    ``InvalidArgumentError`` with the reason where a model cannot be copied or an optimizer rebuilt. The
    notes list what was changed (``"changed: " + str(site)``) and how the state was carried over."""
    import torch

    from workbench.fixes.fix import Site

    reach = context.reach
    tops = list(reach.modules)
    notes: list[str] = []
    mapping: dict[int, object] = {}
    pmap: dict[int, Any] = {}  # id(original tensor) -> its copy
    for i, (top_name, top) in enumerate(tops):
        label = f"the model {top_name!r} ({type(top).__name__})" if top_name else f"the model ({type(top).__name__})"
        memo: dict[int, Any] = {}
        try:
            new = copy.deepcopy(top, memo)
        except Exception:  # noqa: BLE001 - say which attribute
            raise InvalidArgumentError(
                copy_problem(top, label) or f"{label} cannot be deep-copied; a module swap needs a copy"
            ) from None
        prefix = f"{top_name}." if top_name else ""
        sites: list[Any] = []
        if transform_module is not None:
            new, sites = _call_transform(transform_module, new)
        for s in sites:
            if isinstance(s, Site):
                where = (prefix + s.where) if (prefix and s.kind == "module") else (s.where or top_name)
                s = Site(where, s.kind, s.detail)
            notes.append(CHANGED + str(s))
        mapping[id(top)] = new
        new_mods = dict(new.named_modules())
        for path, sub in top.named_modules():
            if path and path in new_mods:
                mapping[id(sub)] = new_mods[path]
        new_params = dict(new.named_parameters())
        new_bufs = dict(new.named_buffers())
        taken: set[int] = set()
        missing: list[tuple[str, Any]] = []
        for path, p in top.named_parameters():
            q = new_params.get(path)
            if q is not None and q.shape == p.shape:
                pmap[id(p)] = q
                taken.add(id(q))
            else:
                missing.append((path, p))
        for path, b in top.named_buffers():
            q = new_bufs.get(path)
            if q is not None:
                pmap[id(b)] = q
        if missing:
            # parameters the transform moved (a bias into a fused epilogue): the copy deepcopy made of
            # them where it is still in the model, else the first unmatched one of equal shape and values
            left = [q for q in new.parameters() if id(q) not in taken]
            for path, p in missing:
                q = memo.get(id(p))
                if q is None or all(q is not x for x in left):
                    q = next((x for x in left if x.shape == p.shape and torch.equal(x.detach(), p.detach())), None)
                if q is None:
                    notes.append(f"{prefix}{path}: not in the changed copy (its optimizer state is not carried over)")
                    continue
                left = [x for x in left if x is not q]
                pmap[id(p)] = q
        del memo
    # loose parameters (tensors that take gradients outside the models, optimizer-only parameters): cloned
    for name, p in reach.params.items():
        if id(p) not in pmap:
            clone = p.detach().clone().requires_grad_(p.requires_grad)
            pmap[id(p)] = clone
            notes.append(f"{name}: a parameter outside the model, cloned for the copy")
    mapping.update(pmap)
    for i, opt in enumerate(reach.optimizers):
        new_opt = rebuild_optimizer(opt, lambda p: pmap.get(id(p), p), where=f"optimizer[{i}]")
        mapping[id(opt)] = new_opt
        n = sum(len(g["params"]) for g in opt.param_groups)
        notes.append(f"optimizer[{i}] {type(opt).__name__} rebuilt over the copy's {n} parameters, its state copied")
    for h in reach.helpers:
        inner = getattr(h, "optimizer", None)
        if inner is not None and id(inner) in mapping:
            try:
                mapping[id(h)] = copy.deepcopy(h, {id(inner): mapping[id(inner)]})
                notes.append(f"{type(h).__name__} copied onto the rebuilt optimizer")
            except Exception as exc:  # noqa: BLE001
                notes.append(
                    f"{type(h).__name__} could not be copied ({type(exc).__name__}: {exc}); it still drives the "
                    "original optimizer, so the copy's learning rate does not follow it"
                )
    return mapping, notes


def _constructor_kwargs(cls: type, defaults: dict[str, Any]) -> dict[str, Any]:
    try:
        params = inspect.signature(cls.__init__).parameters
    except (TypeError, ValueError):
        return {}
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        return dict(defaults)
    return {k: v for k, v in defaults.items() if k in params}


def rebuild_optimizer(
    opt: Any,
    param_for: Callable[[Any], Any] = lambda p: p,
    *,
    where: str = "the optimizer",
    overrides: dict[str, Any] | None = None,
) -> Any:
    """A new optimizer of ``opt``'s class over ``param_for(p)`` of each of its parameters, with the same
    hyper-parameters per group (``overrides`` replacing some: ``{"foreach": True}``) and its state
    deep-copied and re-keyed to the new parameters by position. Raises ``InvalidArgumentError`` where the
    class cannot be built that way."""
    import torch

    overrides = dict(overrides or {})
    cls = type(opt)
    groups = []
    for g in opt.param_groups:
        ng = {k: copy.deepcopy(v) for k, v in g.items() if k != "params"}
        ng.update(overrides)
        ng["params"] = [param_for(p) for p in g["params"]]
        groups.append(ng)
    kwargs = _constructor_kwargs(cls, {**copy.deepcopy(opt.defaults), **overrides})
    try:
        new = cls(groups, **kwargs)
    except Exception as exc:  # noqa: BLE001 - a user's optimizer with its own constructor
        raise InvalidArgumentError(
            f"{where} ({cls.__name__}) could not be rebuilt over the copy's parameters "
            f"({type(exc).__name__}: {str(exc)[:160]}); pass optimizer= a standard torch.optim optimizer"
        ) from None
    new.defaults.update({k: v for k, v in overrides.items()})
    for g, ng in zip(opt.param_groups, new.param_groups):
        for p in g["params"]:
            st = opt.state.get(p)
            if not st:
                continue
            q = param_for(p)
            copied = {}
            for k, v in st.items():
                if isinstance(v, torch.Tensor):
                    v = v.detach().clone()
                    if v.dim() and v.shape != q.shape and v.shape == p.shape:
                        raise InvalidArgumentError(
                            f"{where} ({cls.__name__}): its state {k!r} has shape {tuple(v.shape)} but the copy's "
                            f"parameter has shape {tuple(q.shape)}"
                        )
                    copied[k] = v
                else:
                    copied[k] = copy.deepcopy(v)
            new.state[q] = copied
    return new


# -- a module swap's Variant ----------------------------------------------------------------------------------
def swap_variant(
    fn: Callable[..., Any],
    context: Any,
    name: str,
    transform_module: Callable[..., Any],
    *,
    description: str,
    kind: str = "module_swap",
    numerical_class: str = "reordered",
    requires: tuple[str, ...] = (),
    timing_meaningful: bool = True,
    not_applicable_reason: str | None = None,
    in_place: bool = False,
) -> Any:
    """The ``Variant`` of a module swap: ``fn`` rebound to a changed deep copy of its models and optimizers
    (``copy_state``); not applicable, with the reason, where the models cannot be copied or nothing in them
    changed. ``options``: ``changed`` (the sites, in words), ``state_notes`` (how the state was carried over)."""
    from workbench.variants.spec import Variant

    def failed(reason: str) -> Any:
        return Variant(
            name=name,
            fn=fn,
            kind=kind,
            numerical_class=numerical_class,
            requires=requires,
            description=description,
            not_applicable_reason=reason,
        )

    if not_applicable_reason:
        return failed(not_applicable_reason)
    if context is None or getattr(context, "fn", None) is not fn:
        from workbench.fixes.context import FixContext

        context = FixContext.from_callable(fn)
    if not context.reach.modules:
        return failed("the code reaches no nn.Module: nothing to swap (pass model= to wb.compare)")
    try:
        mapping, notes = copy_state(context, transform_module)
    except InvalidArgumentError as exc:
        return failed(str(exc))
    changed = [n[len(CHANGED) :] for n in notes if n.startswith(CHANGED)]
    if not changed:
        return failed("nothing in the model's copy was changed (the pattern is not in it)")
    rebind_notes: list[str] = []
    new_fn = rebind(fn, mapping, notes=rebind_notes)
    return Variant(
        name=name,
        fn=new_fn,
        kind=kind,
        numerical_class=numerical_class,
        requires=requires,
        description=description + "; changed: " + ", ".join(changed[:6]) + (" ..." if len(changed) > 6 else ""),
        options={"changed": changed, "state_notes": [n for n in notes if not n.startswith(CHANGED)] + rebind_notes},
        timing_meaningful=timing_meaningful,
        in_place=(lambda: swap_in_place(context, transform_module)) if in_place else None,
    )


def _structure(top: Any) -> list[tuple[Any, type, dict[str, Any]]]:
    """Each submodule's class and attributes, its child, parameter and buffer tables copied (what a swap edits)."""
    out = []
    for m in top.modules():
        attrs = dict(m.__dict__)
        for table in ("_modules", "_parameters", "_buffers"):
            if isinstance(attrs.get(table), dict):
                attrs[table] = dict(attrs[table])
        out.append((m, type(m), attrs))
    return out


def _put_back(structure: list[tuple[Any, type, dict[str, Any]]]) -> None:
    for m, cls, attrs in structure:
        m.__class__ = cls
        live = m.__dict__
        for table in ("_modules", "_parameters", "_buffers"):  # the same dict objects, their old entries
            if isinstance(live.get(table), dict) and isinstance(attrs.get(table), dict):
                live[table].clear()
                live[table].update(attrs[table])
        for key in [k for k in live if k not in attrs]:
            del live[key]
        for key, value in attrs.items():
            if key not in ("_modules", "_parameters", "_buffers"):
                live[key] = value


def _keep_parameters(top: Any, old: dict[str, tuple[Any, dict[str, Any]]]) -> None:
    """A submodule the swap replaced (a LayerNorm by the Triton one, which copied its weight) gets the
    parameters it replaced back, by identity, where name, shape and dtype agree: the values are the same,
    and the user's optimizer (its state keyed by the parameter objects) keeps stepping them."""
    for path, m in top.named_modules():
        was = old.get(path)
        if was is None or was[0] is m:
            continue
        for name, p in list(m._parameters.items()):
            q = was[1].get(name)
            if p is not None and q is not None and p is not q and p.shape == q.shape and p.dtype == q.dtype:
                m._parameters[name] = q


def swap_in_place(context: Any, transform_module: Callable[..., Any]) -> list[str]:
    """The module swap ``transform_module`` made to the models ``context`` reaches themselves (``wb.fixes.apply``):
    returns the sites changed. Refused, with every model put back as it was, where the swap would replace a
    model as a whole (the user's variable would still hold the old one) or give it parameters other than the
    ones it had (the user's optimizer steps those: its state is keyed by them)."""
    changed: list[str] = []
    done: list[list[tuple[Any, type, dict[str, Any]]]] = []
    try:
        for top_name, top in context.reach.modules:
            label = f"the model {top_name!r}" if top_name else f"the model ({type(top).__name__})"
            before = [id(p) for p in top.parameters()]
            done.append(_structure(top))
            old = {path: (m, dict(m._parameters)) for path, m in top.named_modules()}
            new, sites = _call_transform(transform_module, top)
            if new is top:
                _keep_parameters(top, old)
            if new is not top:
                raise InvalidArgumentError(
                    f"the swap replaces {label} as a whole, which cannot be done in place; use the variant "
                    "(wb.variants.build(name, fn)) or assign the swapped copy to your variable"
                )
            if [id(p) for p in top.parameters()] != before:
                raise InvalidArgumentError(
                    f"the swap gives {label} other parameters than it had, so an optimizer built over the old "
                    "ones would no longer step it; use the variant (wb.variants.build(name, fn)), which rebuilds "
                    "the optimizer over the copy"
                )
            prefix = f"{top_name}." if top_name else ""
            changed += [(prefix + str(s)) if getattr(s, "kind", "") == "module" else str(s) for s in sites]
    except BaseException:
        for structure in reversed(done):
            _put_back(structure)
        raise
    if not changed:
        for structure in reversed(done):
            _put_back(structure)
        raise InvalidArgumentError(
            "nothing in your model was changed: the pattern is not in the models the code reaches"
        )
    return changed


def copy_reason(context: Any) -> str | None:
    """Why the models ``context`` reaches cannot be deep-copied (``copy_problem`` of each), or None;
    checked once per context (the recognisers of all module swaps share it)."""
    cached = getattr(context, "_wb_copy_reason", _UNSET)
    if cached is not _UNSET:
        return cached
    reason = None
    for top_name, top in context.reach.modules:
        label = f"the model {top_name!r} ({type(top).__name__})" if top_name else f"the model ({type(top).__name__})"
        reason = copy_problem(top, label)
        if reason:
            break
    try:
        object.__setattr__(context, "_wb_copy_reason", reason)
    except Exception:  # noqa: BLE001 - a context that takes no attributes: checked each time
        pass
    return reason


_UNSET = object()


def with_hypotheses(found: Any, context: Any, fix_name: str) -> Any:
    """``found`` (an Applicability of a fix recognised by its pattern) with the hypotheses of the run
    that the fix tests (its rules, ``context.hypotheses_for``) and the largest time they put at stake."""
    from dataclasses import replace

    from workbench.fixes.registry import get

    try:
        hyps = context.hypotheses_for(get(fix_name))
    except Exception:  # noqa: BLE001 - a fix not (yet) in the catalog: the row as found
        return found
    if not hyps:
        return found
    stake = max(float(getattr(h, "time_at_stake_ms", 0.0) or 0.0) for h in hyps)
    titles = tuple(dict.fromkeys((*found.hypotheses, *(str(getattr(h, "title", h)) for h in hyps))))
    reason = (
        found.reason + "; tests " + "; ".join(f"{h.title} ({h.time_at_stake_ms:.3g} ms at stake)" for h in hyps[:2])
    )
    return replace(found, hypotheses=titles, stake_ms=max(found.stake_ms, stake), reason=reason)
