"""Two torch profilers at once crash the process (a segmentation fault in kineto): know whether one
is recording, and whether the profiled code starts one of its own.

``profiler_running()`` reads torch's own flag. ``ProfilerStartWatch`` wraps torch's profiler entry
points (``torch.autograd.profiler._prepare_profiler`` / ``_enable_profiler``, which
``torch.profiler.profile`` and ``torch.autograd.profiler.profile`` both go through) for the time of a
``with`` block: every start the code makes is counted, and with ``refuse=True`` a start while a
profiler is already recording raises ``ProfileError`` instead of crashing. The wrappers nest (an
outer watch, e.g. a magic's, stays in force) and the originals are put back last-in-first-out.
"""

from __future__ import annotations

import sys
from types import TracebackType
from typing import Any, Callable

from workbench.errors import ProfileError

ENTRY_POINTS = ("_prepare_profiler", "_enable_profiler")

NESTED_START = (
    "the profiled code starts a torch profiler while another one is recording (the traced pass, or a "
    "profiler around it); two profilers at once crash torch, so it was stopped here. Profile with "
    "trace=False (time only), or remove the code's own torch.profiler session"
)


def profiler_running() -> bool:
    """Whether a torch (autograd/kineto) profiler is recording now."""
    torch = sys.modules.get("torch")
    if torch is None:
        return False
    try:
        return bool(torch.autograd._profiler_enabled())
    except Exception:  # noqa: BLE001 - an old or odd torch: assume not
        return False


class ProfilerStartWatch:
    """Count the profiler starts made inside the block; ``refuse=True`` stops a nested one."""

    def __init__(self, *, refuse: bool = False, message: str = NESTED_START) -> None:
        self.refuse = refuse
        self.message = message
        self.starts = 0
        self._saved: dict[str, Callable[..., Any]] = {}
        self._module: Any = None

    def _wrap(self, original: Callable[..., Any]) -> Callable[..., Any]:
        def start(*args: Any, **kwargs: Any) -> Any:
            __tracebackhide__ = True
            self.starts += 1
            if self.refuse and profiler_running():
                raise ProfileError(self.message)
            return original(*args, **kwargs)

        start.__wrapped__ = original  # type: ignore[attr-defined]
        return start

    def __enter__(self) -> "ProfilerStartWatch":
        try:
            import torch.autograd.profiler as autograd_profiler
        except Exception:  # noqa: BLE001 - no torch: nothing can start a profiler
            return self
        self._module = autograd_profiler
        for name in ENTRY_POINTS:
            original = getattr(autograd_profiler, name, None)
            if original is not None:
                self._saved[name] = original
                setattr(autograd_profiler, name, self._wrap(original))
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        for name, original in self._saved.items():
            setattr(self._module, name, original)
        self._saved.clear()
