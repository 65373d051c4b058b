"""A fix must change a copy: ``ModelGuard`` watches the user's modules and optimizers while a fix's transform
runs (the catalog's and, above all, a user's own ``wb.fixes.register``-ed one) and puts back what it
changed in place: a submodule replaced (``model.blocks[0].attn = ...``), a parameter rebound or written
(``weight.mul_(2)``), an optimizer's param groups edited.  What it changed is named in the error, so the
fix's row says why and the user's model is as it was (its parameter values, by a snapshot taken before
the transform, up to ``MAX_SNAPSHOT_BYTES``; beyond that an in-place write is named, not undone).
"""

from __future__ import annotations

import copy
from typing import Any

from workbench.errors import InvalidArgumentError

MAX_SNAPSHOT_BYTES = 256 * 2**20  # parameter and buffer values copied to undo an in-place write


def _version(t: Any) -> int | None:
    try:
        return int(t._version)
    except Exception:  # noqa: BLE001 - an inference tensor has no version counter
        return None


class ModelGuard:
    """Snapshot of the structure (``_modules``, ``_parameters``, ``_buffers``) of every reached module, each
    tensor's version counter, the values (within the budget) and each optimizer's param groups."""

    def __init__(self, modules: list[tuple[str, Any]], optimizers: list[Any]) -> None:
        self.modules: list[tuple[str, Any, dict, dict, dict]] = []
        self.tensors: list[tuple[str, Any, int | None, Any]] = []
        room = MAX_SNAPSHOT_BYTES
        seen: set[int] = set()
        for top_name, top in modules:
            for path, m in top.named_modules():
                if id(m) in seen:
                    continue
                seen.add(id(m))
                where = ".".join(p for p in (top_name, path) if p)  # "" for the top module itself
                self.modules.append((where, m, dict(m._modules), dict(m._parameters), dict(m._buffers)))
                for kind in ("_parameters", "_buffers"):
                    for name, t in getattr(m, kind).items():
                        if t is None:
                            continue
                        size = t.numel() * t.element_size()
                        value = None
                        if size <= room:
                            value, room = t.detach().clone(), room - size
                        self.tensors.append((f"{where}.{name}" if where else name, t, _version(t), value))
        self.optimizers = [
            (opt, [dict(g) for g in opt.param_groups], [list(g["params"]) for g in opt.param_groups])
            for opt in optimizers
        ]

    def changed(self) -> list[str]:
        out: list[str] = []
        for where, m, mods, params, bufs in self.modules:
            for label, now, was in (
                ("submodule", m._modules, mods),
                ("parameter", m._parameters, params),
                ("buffer", m._buffers, bufs),
            ):
                for key in set(now) | set(was):
                    if now.get(key) is not was.get(key):
                        out.append(f"{label} {where + '.' if where else ''}{key} replaced")
        for name, t, version, _ in self.tensors:
            if version is not None and _version(t) != version:
                out.append(f"{name} written in place")
        for i, (opt, groups, params) in enumerate(self.optimizers):
            if len(opt.param_groups) != len(groups) or any(
                list(g["params"]) != p for g, p in zip(opt.param_groups, params)
            ):
                out.append(f"optimizer[{i}] {type(opt).__name__}'s parameter groups changed")
        return out

    def restore(self) -> list[str]:
        """Put back what changed; returns what could not be."""
        import torch

        failed: list[str] = []
        for _, m, mods, params, bufs in self.modules:
            m._modules.clear()
            m._modules.update(mods)
            m._parameters.clear()
            m._parameters.update(params)
            m._buffers.clear()
            m._buffers.update(bufs)
        with torch.no_grad():
            for name, t, version, value in self.tensors:
                if version is None or _version(t) == version:
                    continue
                if value is None:
                    failed.append(f"{name} (over the {MAX_SNAPSHOT_BYTES >> 20} MiB snapshot budget)")
                    continue
                t.copy_(value)
        for opt, groups, params in self.optimizers:
            opt.param_groups[:] = [dict(g, params=p) for g, p in zip(copy.copy(groups), params)]
        return failed


def guarded_transform(fix: Any, fn: Any, context: Any, label: str) -> Any:
    """``fix.transform(fn, context, label)`` under a ``ModelGuard``: a transform that changes the user's
    reached model or optimizer in place raises InvalidArgumentError naming what it changed, after it was
    put back (the comparison then shows the fix's row as not applicable, with that reason)."""
    try:
        reach = context.reach
        guard = ModelGuard(list(reach.modules), list(reach.optimizers))
    except Exception:  # noqa: BLE001 - nothing reached, or a module that cannot be listed: unguarded
        guard = None
    error: BaseException | None = None
    try:
        return fix.transform(fn, context, label)
    except BaseException as exc:
        error = exc
        raise
    finally:
        changed = guard.changed() if guard is not None else []
        if changed:
            failed = guard.restore()  # type: ignore[union-attr]
            back = "it was put back" if not failed else f"put back except {', '.join(failed)}"
            also = f"; the transform also raised {type(error).__name__}: {error}" if error is not None else ""
            raise InvalidArgumentError(
                f"fix {fix.name!r} changed your model in place ({'; '.join(changed[:4])}"
                f"{'; ...' if len(changed) > 4 else ''}); {back}. A fix must change a copy "
                f"(workbench.fixes.rebind.copy_state makes one){also}"
            ) from error
