"""What ``wb.profile(fn, memory=True)`` records besides the profiler's allocator events.

- **Named tensors** (``TensorRoles``): the trace's allocator events say where memory was allocated, not
  what it is; memory allocated before the traced pass (parameters, optimizer state, the call's inputs)
  appears in it only if freed. While the traced pass runs, global hooks note every ``nn.Module`` that
  runs forward and every ``torch.optim.Optimizer`` that steps; afterwards each parameter, its gradient,
  each optimizer state tensor and each tensor argument of the call is recorded by storage address and
  size (``run.memory["roles"]``), so that ``workbench.analysis.memory`` can name those blocks.
- **On CUDA, the allocator's history** (``torch.cuda.memory._record_memory_history``) during the traced
  pass, its snapshot (``torch.cuda.memory._snapshot()``) saved as a pickle beside the trace (and in the
  run's bundle); ``wb.load_memory_snapshot`` reads it back without running code from it.

The clean timed repeats run with none of this; it is on only around the traced pass.
"""

from __future__ import annotations

import pickle
from pathlib import Path
from types import ModuleType, TracebackType
from typing import Any

SNAPSHOT_FILE_NAME = "memory_snapshot.pickle"
HISTORY_MAX_ENTRIES = 200_000
MAX_ROLES = 20_000


def _storage(t: Any) -> tuple[int, int] | None:
    try:
        storage = t.untyped_storage()
        return int(storage.data_ptr()), int(storage.nbytes())
    except Exception:  # noqa: BLE001 - a tensor without storage (meta, sparse, a subclass): not named
        return None


def _device(t: Any) -> str:
    d = t.device
    return "cpu" if d.type == "cpu" else f"{d.type}:{d.index if d.index is not None else 0}"


class TensorRoles:
    """``with TensorRoles(torch, inputs) as roles: ...`` then ``roles.records()``."""

    def __init__(self, torch: ModuleType, inputs: tuple[Any, ...] = ()) -> None:
        self._torch = torch
        self._inputs = inputs
        self._modules: dict[int, Any] = {}
        self._optimizers: dict[int, Any] = {}
        self._handles: list[Any] = []

    def __enter__(self) -> TensorRoles:
        torch = self._torch
        self._handles.append(torch.nn.modules.module.register_module_forward_pre_hook(self._saw_module))
        import importlib

        optim = importlib.import_module("torch.optim.optimizer")
        register = getattr(optim, "register_optimizer_step_post_hook", None)
        if register is not None:
            self._handles.append(register(self._saw_optimizer))
        return self

    def _saw_module(self, module: Any, args: Any) -> None:
        self._modules.setdefault(id(module), module)

    def _saw_optimizer(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        self._optimizers.setdefault(id(optimizer), optimizer)

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles.clear()

    def records(self) -> list[dict[str, Any]]:
        """One dict per named tensor: device, addr, bytes, role, name."""
        torch = self._torch
        out: list[dict[str, Any]] = []
        seen: set[tuple[str, int]] = set()

        def add(t: Any, role: str, name: str) -> None:
            if len(out) >= MAX_ROLES or not isinstance(t, torch.Tensor):
                return
            found = _storage(t)
            if found is None or found[1] <= 0:
                return
            key = (_device(t), found[0])
            if key in seen:
                return
            seen.add(key)
            out.append({"device": key[0], "addr": found[0], "bytes": found[1], "role": role, "name": name})

        params: dict[int, str] = {}
        for module in self._modules.values():
            for pname, p in module.named_parameters(recurse=False):
                params.setdefault(id(p), f"{type(module).__name__}.{pname}")
                add(p, "parameter", params[id(p)])
            for bname, b in module.named_buffers(recurse=False):
                add(b, "parameter", f"{type(module).__name__}.{bname} (buffer)")
        for module in self._modules.values():
            for pname, p in module.named_parameters(recurse=False):
                if p.grad is not None:
                    add(p.grad, "gradient", f"{type(module).__name__}.{pname}.grad")
        for optimizer in self._optimizers.values():
            kind = type(optimizer).__name__
            for p, state in getattr(optimizer, "state", {}).items():
                for key, value in state.items() if isinstance(state, dict) else ():
                    add(value, "optimizer_state", f"{kind} {key} of {params.get(id(p), 'a parameter')}")
        for i, value in enumerate(self._inputs):
            add(value, "input", f"argument {i}")
        return out


class CudaHistory:
    """Record the CUDA caching allocator's history over a block and save its snapshot to ``folder``."""

    def __init__(self, torch: ModuleType, folder: Path) -> None:
        self._torch = torch
        self.path = Path(folder) / SNAPSHOT_FILE_NAME
        self.note = ""
        self._on = False

    def __enter__(self) -> CudaHistory:
        memory = getattr(self._torch.cuda, "memory", None)
        if memory is None or not hasattr(memory, "_record_memory_history"):
            self.note = "this torch has no torch.cuda.memory._record_memory_history: no allocator snapshot"
            return self
        try:
            memory._record_memory_history(max_entries=HISTORY_MAX_ENTRIES)
            self._on = True
        except Exception as exc:  # noqa: BLE001 - the snapshot is extra evidence; the trace still has events
            self.note = f"the CUDA allocator's history could not be recorded ({exc}): no snapshot"
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if not self._on:
            return
        memory = self._torch.cuda.memory
        try:
            if exc_type is None:
                snapshot = memory._snapshot()
                with open(self.path, "wb") as fh:
                    pickle.dump(snapshot, fh)
        except Exception as error:  # noqa: BLE001
            self.note = f"the CUDA allocator's snapshot could not be saved ({error})"
        finally:
            try:
                memory._record_memory_history(enabled=None)
            except Exception:  # noqa: BLE001
                pass
            self._on = False

    @property
    def saved(self) -> bool:
        return self.path.exists()
