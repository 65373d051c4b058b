"""Resolve ``module:function`` into a callable and its arguments, with plain errors."""
from __future__ import annotations

import importlib
import inspect
import itertools
from typing import Any, Callable

from workbench.errors import InvalidArgumentError

DEFAULT_WORKLOAD = "workbench.demo:workload"


def resolve_workload(spec: str) -> tuple[Callable[..., Any], tuple[Any, ...]]:
    """``module:function`` -> (function, args). Args come from ``module.make_inputs()`` when the
    module defines it (as ``workbench.demo`` does) and the function takes arguments; else none."""
    module_name, sep, func_name = spec.partition(":")
    if not sep or not module_name or not func_name:
        raise InvalidArgumentError(f"workload {spec!r} is not of the form module:function "
                                   f"(for example {DEFAULT_WORKLOAD})")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and module_name.startswith(exc.name):
            raise InvalidArgumentError(f"unknown workload {spec!r}: no module named {exc.name!r} "
                                       "(is it on PYTHONPATH / installed?)") from None
        raise
    func = getattr(module, func_name, None)
    if not callable(func):
        raise InvalidArgumentError(f"unknown workload {spec!r}: module {module_name!r} has no callable "
                                   f"{func_name!r}")
    make_inputs = getattr(module, "make_inputs", None)
    if callable(make_inputs) and func is not make_inputs and _needs_arguments(func):
        args = make_inputs()
        return func, tuple(args) if isinstance(args, (tuple, list)) else (args,)
    return func, ()


def _needs_arguments(func: Callable[..., Any]) -> bool:
    try:
        params = inspect.signature(func).parameters.values()
    except (TypeError, ValueError):  # builtins without a signature
        return True
    return any(p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
               for p in params)


def workload_inputs(spec: str) -> tuple[Callable[..., Any], Callable[[], tuple[Any, ...]]]:
    """``module:function`` -> (function, a zero-argument factory of its arguments). The factory
    calls ``module.make_inputs()`` afresh each time where the module has it (with a new ``seed=``
    each call where it takes one), so a variant comparison checks every variant on fresh inputs;
    else it returns the same arguments."""
    func, args = resolve_workload(spec)
    module = importlib.import_module(spec.partition(":")[0])
    make_inputs = getattr(module, "make_inputs", None)
    if not (args and callable(make_inputs)):
        return func, lambda: args
    seeds = itertools.count(1)
    seeded = _takes_seed(make_inputs)

    def fresh() -> tuple[Any, ...]:
        made = make_inputs(seed=next(seeds)) if seeded else make_inputs()
        return tuple(made) if isinstance(made, (tuple, list)) else (made,)
    return func, fresh


def _takes_seed(func: Callable[..., Any]) -> bool:
    """Whether ``func`` takes a ``seed`` keyword (then each call gets a new one: fresh values)."""
    try:
        return "seed" in inspect.signature(func).parameters
    except (TypeError, ValueError):
        return False
