"""``nn.Module`` scopes recorded with forward hooks, for a traced pass without the Python tracer.

Where the profiler will not start with ``with_stack=True``, the traced pass can still say which
module ran which ops: global forward pre/post hooks open a ``record_function`` scope named as
the Python tracer names a module call (``"nn.Module: <Class>_<k>"``, ``k`` numbering the
instances of a class in the order they first run) and close it when the forward returns. The
scopes reach the trace as user annotations; ``workbench.analysis.attribution`` reads them as
module scopes. Source lines need the tracer's frames and are not recorded this way.

A forward that raises skips its post hook: its scope (and any opened inside it) is closed when
the next outer forward returns, or when the block ends.
"""

from __future__ import annotations

import threading
from types import ModuleType, TracebackType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

MODULE_SCOPE = "nn.Module: {}_{}"


class ModuleScopes:
    """``with ModuleScopes(torch): ...``: every module forward in the block runs in its own scope."""

    def __init__(self, torch: ModuleType) -> None:
        self._torch = torch
        self._handles: list[Any] = []
        self._numbers: dict[int, str] = {}  # id(module) -> its scope name
        self._per_class: dict[type, int] = {}
        self._local = threading.local()
        self._lock = threading.Lock()

    def _open(self) -> list[tuple[int, Any]]:
        stack = getattr(self._local, "stack", None)
        if stack is None:
            stack = self._local.stack = []
        return stack

    def _name(self, module: torch.nn.Module) -> str:
        with self._lock:
            name = self._numbers.get(id(module))
            if name is None:
                cls = type(module)
                index = self._per_class.get(cls, 0)
                self._per_class[cls] = index + 1
                name = self._numbers[id(module)] = MODULE_SCOPE.format(cls.__name__, index)
            return name

    def _before(self, module: torch.nn.Module, args: tuple[Any, ...]) -> None:
        scope = self._torch.profiler.record_function(self._name(module))
        scope.__enter__()
        self._open().append((id(module), scope))

    def _after(self, module: torch.nn.Module, args: tuple[Any, ...], output: Any) -> None:
        stack = self._open()
        while stack:  # close scopes a raising inner forward left open
            owner, scope = stack.pop()
            scope.__exit__(None, None, None)
            if owner == id(module):
                break

    def __enter__(self) -> ModuleScopes:
        hooks = self._torch.nn.modules.module
        self._handles = [
            hooks.register_module_forward_pre_hook(self._before),
            hooks.register_module_forward_hook(self._after),
        ]
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles = []
        stack = self._open()
        while stack:
            stack.pop()[1].__exit__(None, None, None)


class ModuleNames:
    """``with ModuleNames(torch) as names: ...``, then ``names.paths()``: each module scope the block's
    forwards ran in, by the label the profiler gives it (``"Linear_6"``: the class and its instance
    number, numbered in the order the instances first run, as the Python tracer and ``ModuleScopes``
    number them), mapped to the module's name in its model (``"blocks.1.mlp.fc"``, from
    ``named_modules()`` of the outermost module that ran). The outermost module reads as its class
    (``"GPT"``); where several models ran, their modules' names start with their model's label.

    Only the numbering is recorded while the block runs (one dictionary lookup per forward); the
    names are looked up once, after it. The modules are held until ``paths()`` is called, which also
    fills ``owners``: each parameter of a module that ran (by ``id``) -> (the label of the module holding
    it, its name in the model: ``"blocks.1.mlp.fc.weight"``).
    """

    def __init__(self, torch: ModuleType) -> None:
        self._torch = torch
        self._handle: Any = None
        self._labels: dict[int, str] = {}  # id(module) -> "Class_k"
        self._modules: dict[int, Any] = {}
        self._per_class: dict[type, int] = {}
        self._lock = threading.Lock()
        self.owners: dict[int, tuple[str, str]] = {}

    def _seen(self, module: torch.nn.Module, args: tuple[Any, ...]) -> None:
        if id(module) in self._labels:
            return
        with self._lock:
            if id(module) not in self._labels:
                cls = type(module)
                index = self._per_class.get(cls, 0)
                self._per_class[cls] = index + 1
                self._labels[id(module)] = f"{cls.__name__}_{index}"
                self._modules[id(module)] = module

    def __enter__(self) -> ModuleNames:
        self._handle = self._torch.nn.modules.module.register_module_forward_pre_hook(self._seen)
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._handle is not None:
            self._handle.remove()
            self._handle = None

    def paths(self) -> dict[str, str]:
        """``{"GPT_0": "GPT", "Linear_6": "blocks.1.mlp.fc", ...}`` for every module that ran."""
        modules, labels = self._modules, self._labels
        self._modules = {}
        inside: set[int] = set()
        for module in modules.values():
            inside.update(id(m) for m in module.modules() if m is not module)
        roots = [key for key in modules if key not in inside]
        classes = [type(modules[key]).__name__ for key in roots]
        out: dict[str, str] = {}
        for key in roots:
            root = modules[key]
            unique = len(roots) == 1 or classes.count(type(root).__name__) == 1
            head = type(root).__name__ if unique else labels[key]
            prefix = "" if len(roots) == 1 else head + "."
            for name, module in root.named_modules():
                label = labels.get(id(module))
                if label is not None and label not in out:
                    out[label] = prefix + name if name else head
                if label is not None:
                    for pname, param in module.named_parameters(recurse=False):
                        full = prefix + (f"{name}.{pname}" if name else pname)
                        self.owners.setdefault(id(param), (label, full))
        return out
