"""Torch globals that profiling may change, put back whatever the profiled code does."""

from __future__ import annotations

from contextlib import contextmanager
from types import ModuleType
from typing import Any, Iterator


@contextmanager
def applied_torch_settings(
    torch: ModuleType, *, threads: int | None = None, grad_enabled: bool | None = None
) -> Iterator[dict[str, Any]]:
    """Apply the requested thread count / grad mode for the block; restore the previous values.

    Yields the settings in effect inside the block (recorded on the run). Only what is requested
    is changed, and what is changed is always restored, also on exceptions and KeyboardInterrupt.
    """
    saved_threads = torch.get_num_threads()
    saved_grad = torch.is_grad_enabled()
    try:
        if threads is not None:
            torch.set_num_threads(threads)
        if grad_enabled is not None:
            torch.set_grad_enabled(grad_enabled)
        yield {"num_threads": torch.get_num_threads(), "grad_enabled": torch.is_grad_enabled()}
    finally:
        if threads is not None:
            torch.set_num_threads(saved_threads)
        if grad_enabled is not None:
            torch.set_grad_enabled(saved_grad)
