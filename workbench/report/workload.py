"""Resolve ``module:function`` into a callable and its arguments, with plain errors.

The current folder is importable (as under ``python -m``), so ``--workload bench:step`` finds
``./bench.py`` without ``PYTHONPATH=.``. A workload that fails (raises, calls ``sys.exit``, runs
past a time limit) is a ``WorkloadError``, told apart from bad input (``InvalidArgumentError``):
``workbench report`` exits 3 (4 for the time limit) instead of 2.
"""

from __future__ import annotations

import contextlib
import importlib
import inspect
import itertools
import math
import os
import signal
import sys
import threading
import traceback
from types import FrameType
from typing import Any, Callable, Iterator

from workbench._moved import current_spec
from workbench.errors import InvalidArgumentError, ReportError

DEFAULT_WORKLOAD = "workbench.workloads.demo:workload"
EXIT_WORKLOAD_FAILED = 3
EXIT_TIME_LIMIT = 4


class WorkloadError(ReportError):
    """The workload itself failed: it raised, called ``sys.exit``, or its process died."""

    exit_code = EXIT_WORKLOAD_FAILED


class WorkloadTimeout(WorkloadError):
    """The workload ran past the time limit and was stopped."""

    exit_code = EXIT_TIME_LIMIT


def _where(exc: BaseException) -> str:
    """``file:line`` of the innermost frame of ``exc``'s traceback, "" without one."""
    frames = traceback.extract_tb(exc.__traceback__)
    return f" at {frames[-1].filename}:{frames[-1].lineno}" if frames else ""


def _failed(what: str, exc: BaseException) -> WorkloadError:
    if isinstance(exc, SystemExit):
        return WorkloadError(
            f"{what} called sys.exit({exc.code!r}){_where(exc)}: a workload must return "
            "(raise an exception to signal a failure)"
        )
    return WorkloadError(f"{what} raised {type(exc).__name__}: {exc}{_where(exc)}")


def _current_folder_importable() -> None:
    """Put the working folder on ``sys.path`` (first, as ``python -m`` does) if it is not there."""
    cwd = os.getcwd()
    if not any(os.path.abspath(p or os.curdir) == cwd for p in sys.path):
        sys.path.insert(0, cwd)


def resolve_workload(spec: str) -> tuple[Callable[..., Any], tuple[Any, ...]]:
    """``module:function`` -> (function, args). Args come from ``module.make_inputs()`` when the
    module defines it (as ``workbench.workloads.demo`` does) and the function takes arguments; else none."""
    spec = current_spec(spec)  # a module moved since (workbench.demo): where it is now
    module_name, sep, func_name = spec.partition(":")
    if not sep or not module_name or not func_name:
        raise InvalidArgumentError(
            f"workload {spec!r} is not of the form module:function (for example {DEFAULT_WORKLOAD})"
        )
    _current_folder_importable()
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and module_name.startswith(exc.name):
            raise InvalidArgumentError(
                f"unknown workload {spec!r}: no module named {exc.name!r} "
                f"(not in the current folder {os.getcwd()!r}, nor installed, "
                "nor on PYTHONPATH)"
            ) from None
        raise _failed(f"importing the workload module {module_name!r}", exc) from exc
    except (Exception, SystemExit) as exc:
        raise _failed(f"importing the workload module {module_name!r}", exc) from exc
    func = getattr(module, func_name, None)
    if not callable(func):
        raise InvalidArgumentError(f"unknown workload {spec!r}: module {module_name!r} has no callable {func_name!r}")
    make_inputs = getattr(module, "make_inputs", None)
    if callable(make_inputs) and func is not make_inputs and _needs_arguments(func):
        try:
            args = make_inputs()
        except (Exception, SystemExit) as exc:
            raise _failed(f"{module_name}.make_inputs() (the workload's inputs)", exc) from exc
        return func, tuple(args) if isinstance(args, (tuple, list)) else (args,)
    return func, ()


def _needs_arguments(func: Callable[..., Any]) -> bool:
    try:
        params = inspect.signature(func).parameters.values()
    except (TypeError, ValueError):  # builtins without a signature
        return True
    return any(p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in params)


def workload_inputs(
    spec: str, resolved: tuple[Callable[..., Any], tuple[Any, ...]] | None = None
) -> tuple[Callable[..., Any], Callable[[], tuple[Any, ...]]]:
    """``module:function`` -> (function, a zero-argument factory of its arguments). The factory
    calls ``module.make_inputs()`` afresh each time where the module has it (with a new ``seed=``
    each call where it takes one), so a variant comparison checks every variant on fresh inputs;
    else it returns the same arguments. ``resolved``: the (function, arguments) the caller already
    resolved ``spec`` to (the report resolves its workload once), else it is resolved here."""
    func, args = resolved if resolved is not None else resolve_workload(spec)
    module = importlib.import_module(current_spec(spec).partition(":")[0])
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


@contextlib.contextmanager
def time_limit(seconds: float | None, what: str) -> Iterator[None]:
    """Raise ``WorkloadTimeout`` in this (main) thread when the block runs past ``seconds``.

    Uses SIGALRM, so it applies on POSIX in the main thread (elsewhere the block runs unlimited);
    a long call inside torch ends first, then the timeout is raised. None: no limit."""
    if (
        seconds is None
        or not math.isfinite(seconds)
        or not hasattr(signal, "setitimer")
        or threading.current_thread() is not threading.main_thread()
    ):
        yield
        return

    def expire(signum: int, frame: FrameType | None) -> None:
        raise WorkloadTimeout(
            f"{what} ran past the time limit of {seconds:g} s and was stopped; raise --time-limit or lower --repeat"
        )

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def run_guarded(call: Callable[[], Any], what: str, time_limit_s: float | None = None) -> Any:
    """``call()``, with the workload's own failures (an exception, ``sys.exit``) turned into a
    ``WorkloadError`` and ``time_limit_s`` enforced; workbench's own errors and
    KeyboardInterrupt pass unchanged."""
    from workbench.errors import WorkbenchError

    try:
        with time_limit(time_limit_s, what):
            return call()
    except WorkbenchError:
        raise
    except (Exception, SystemExit) as exc:
        raise _failed(what, exc) from exc
