"""workbench: a notebook-native GPU performance lab for PyTorch and Triton users.

Public names (see DESIGN.md) are loaded lazily so that ``import workbench`` stays cheap and
does not import torch: a trace recorded on a GPU box can be analysed anywhere.

    import workbench as wb
    run = wb.profile(fn, *args, warmup=3, repeat=20)
    trace = wb.load_trace("trace.json.gz")
    cmp = wb.compare({"eager": f, "compiled": wb.variants.compiled(f)}, inputs=make_inputs)

In a notebook: ``%load_ext workbench`` then ``%%gpuprofile`` on a cell.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if (
    TYPE_CHECKING
):  # what static tools and editors see: the lazy table's names, typed (tests/test_packaging.py keeps them equal)
    from workbench import charts, errors, fixes, render, report, variants, widgets
    from workbench.api.distributed import profile_distributed
    from workbench.api.profiling import profile
    from workbench.api.run import ProfileRun, load_run
    from workbench.api.trace import Trace, diff, load_memory_snapshot, load_trace
    from workbench.measurement import Measurement
    from workbench.study import Study
    from workbench.variants.compare import compare
    from workbench.workloads import demo

# public name -> (module, attribute); attribute None means the module itself
_LAZY: dict[str, tuple[str, str | None]] = {
    "profile": ("workbench.api.profiling", "profile"),
    "ProfileRun": ("workbench.api.run", "ProfileRun"),
    "load_run": ("workbench.api.run", "load_run"),
    "load_trace": ("workbench.api.trace", "load_trace"),
    "diff": ("workbench.api.trace", "diff"),
    "load_memory_snapshot": ("workbench.api.trace", "load_memory_snapshot"),
    "Trace": ("workbench.api.trace", "Trace"),
    "Measurement": ("workbench.measurement", "Measurement"),
    "render": ("workbench.render", None),
    "compare": ("workbench.variants", "compare"),
    "variants": ("workbench.variants", None),
    "fixes": ("workbench.fixes", None),
    "charts": ("workbench.charts", None),
    "report": ("workbench.report", None),
    "demo": ("workbench.workloads.demo", None),
    "errors": ("workbench.errors", None),
    "widgets": ("workbench.widgets", None),
    "Study": ("workbench.study", "Study"),
    "profile_distributed": ("workbench.api.distributed", "profile_distributed"),
}

__all__ = sorted(_LAZY) + ["__version__", "load_ipython_extension", "unload_ipython_extension"]


def __getattr__(name: str) -> Any:
    try:
        module_name, attr = _LAZY[name]
    except KeyError:
        raise AttributeError(f"module 'workbench' has no attribute {name!r}") from None
    module = importlib.import_module(module_name)
    value = module if attr is None else getattr(module, attr)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext workbench``: register ``%%gpuprofile`` and friends, and the HTML display of
    the results whose own layer has none (``workbench.render.ipython``)."""
    from workbench.magics import load_ipython_extension as _load
    from workbench.render.ipython import register_display_formatters

    register_display_formatters(ipython)
    _load(ipython)


def unload_ipython_extension(ipython: Any) -> None:
    from workbench.magics import unload_ipython_extension as _unload

    _unload(ipython)


def _register_display() -> None:
    """Inside an IPython shell, results display through ``workbench.render`` from the start."""
    from workbench.render.ipython import register_in_running_shell

    register_in_running_shell()


_register_display()
