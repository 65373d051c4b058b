"""``with OptimizerWatch(torch) as watch: ...``: which parameters each optimizer's step visits, and in what order.

A global optimizer step pre-hook (``torch.optim.optimizer.register_optimizer_step_pre_hook``) sees every
``optimizer.step()`` in the block; the first call of each optimizer records its class, the groups'
``foreach`` / ``fused`` settings and its parameters that have a gradient, group by group (the parameters
``torch.optim``'s ``_init_group`` collects, in its order). Only ids and shapes are kept while the block runs
(the hook costs one list walk per optimizer, once); ``records(owners)`` names them afterwards from the
modules that ran (``ModuleNames.owners``). A torch without the hook records nothing.
"""

from __future__ import annotations

import importlib
from types import ModuleType, TracebackType
from typing import Any

from workbench.trace.optimizer_params import OptimizerStepParams, SteppedParam


def _flag(groups: list[dict[str, Any]], key: str) -> bool | None:
    values = {g.get(key) for g in groups}
    if len(values) != 1:
        return None  # groups differ: per group (the span is one step all the same)
    value = values.pop()
    return value if isinstance(value, bool) else None


class OptimizerWatch:
    def __init__(self, torch: ModuleType) -> None:
        self._torch = torch
        self._handle: Any = None
        self._seen: dict[int, tuple[str, bool | None, bool | None, list[tuple[int, tuple[int, ...]]]]] = {}

    def _before_step(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        if id(optimizer) in self._seen:
            return
        groups = list(getattr(optimizer, "param_groups", []) or [])
        params = [
            (id(p), tuple(int(n) for n in p.shape))
            for g in groups
            for p in g.get("params", [])
            if getattr(p, "grad", None) is not None
        ]
        self._seen[id(optimizer)] = (type(optimizer).__name__, _flag(groups, "foreach"), _flag(groups, "fused"), params)

    def __enter__(self) -> OptimizerWatch:
        try:
            optim = importlib.import_module("torch.optim.optimizer")
        except ImportError:  # a torch build without optim: nothing to watch
            return self
        register = getattr(optim, "register_optimizer_step_pre_hook", None)
        if register is not None:
            self._handle = register(self._before_step)
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._handle is not None:
            self._handle.remove()
            self._handle = None

    def records(self, owners: dict[int, tuple[str, str]]) -> tuple[OptimizerStepParams, ...]:
        """The optimizers' steps, their parameters named by ``owners`` (id -> module label, name)."""
        out = []
        for optimizer, foreach, fused, params in self._seen.values():
            named = tuple(SteppedParam(*owners.get(key, ("", "")), shape) for key, shape in params)
            out.append(OptimizerStepParams(optimizer, foreach, fused, named))
        self._seen = {}
        return tuple(out)
