"""Run a variant so that its failure stays in its own row and leaves nothing global changed.

``call_with_limit`` runs one call on a worker thread with a time limit (a hang becomes a
``VariantTimeout``; the worker is interrupted where Python can interrupt it).  ``StateGuard``
snapshots process-wide settings a variant might flip (threads, grad mode, TF32/matmul
precision, default dtype, deterministic mode, the timers, the current CUDA stream) and
restores them, naming what changed.
"""
from __future__ import annotations

import ctypes
import queue
import threading
import time
from typing import Any, Callable

from workbench.errors import WorkbenchError

TIMER_NAMES = ("perf_counter", "perf_counter_ns", "monotonic", "monotonic_ns", "time", "time_ns",
               "process_time", "process_time_ns")
ORIGINAL_TIMERS = {name: getattr(time, name) for name in TIMER_NAMES}


class VariantTimeout(WorkbenchError):
    """A variant's call ran past its time limit."""


class _Worker:
    """One long-lived daemon thread running calls in turn (same malloc arena, cheap to reuse)."""

    def __init__(self) -> None:
        self.jobs: queue.Queue = queue.Queue()
        self.thread = threading.Thread(target=self._loop, name="workbench-variant-call", daemon=True)
        self.thread.start()

    def _loop(self) -> None:
        while True:
            fn, args, box, done = self.jobs.get()
            if fn is None:
                return
            try:
                _adopt(box.pop("caller_settings"))
                box["out"] = fn(*args)
            except BaseException as exc:  # noqa: BLE001 - handed to the caller
                box["err"] = exc
            finally:
                done.set()

    def stop(self) -> None:
        self.jobs.put((None, None, None, None))


_worker: _Worker | None = None


def _thread_settings() -> tuple[int, bool]:
    """Per-thread torch settings of the caller: intra-op threads (OpenMP's are per thread, and
    inductor compiles its kernels for the count it sees) and grad mode."""
    import torch

    return torch.get_num_threads(), torch.is_grad_enabled()


def _adopt(settings: tuple[int, bool]) -> None:
    import torch

    threads, grad = settings
    if torch.get_num_threads() != threads:
        torch.set_num_threads(threads)
    torch.set_grad_enabled(grad)


def call_with_limit(fn: Callable[..., Any], args: tuple[Any, ...], limit_s: float) -> Any:
    """``fn(*args)`` on the worker thread; raises VariantTimeout past ``limit_s``, re-raises errors."""
    global _worker
    if _worker is None or not _worker.thread.is_alive():
        _worker = _Worker()
    box: dict[str, Any] = {"caller_settings": _thread_settings()}
    done = threading.Event()
    _worker.jobs.put((fn, args, box, done))
    if not done.wait(limit_s):
        hung, _worker = _worker, None
        hung.stop()                       # its loop ends once the interrupted call unwinds
        stopped = _interrupt(hung.thread)
        raise VariantTimeout(
            f"did not return within {limit_s:g} s (raise time_limit_s if it is just slow); "
            + ("its thread was interrupted" if stopped else
               "its thread could not be interrupted (blocked in native code) and was left as a daemon"))
    if "err" in box:
        raise box["err"]
    return box.get("out")


def stop_worker() -> None:
    """End the worker thread (it is restarted on the next call)."""
    global _worker
    if _worker is not None:
        _worker.stop()
        _worker.thread.join(1.0)
        _worker = None


def _interrupt(worker: threading.Thread, grace_s: float = 1.0) -> bool:
    """Raise VariantTimeout inside the worker (effective once it runs Python bytecode again)."""
    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(worker.ident), ctypes.py_object(VariantTimeout))
    deadline = time.monotonic() + grace_s
    while worker.is_alive() and time.monotonic() < deadline:
        time.sleep(0.005)
    return not worker.is_alive()


def _torch_settings() -> dict[str, tuple[Callable[[], Any], Callable[[Any], None]]]:
    import torch

    b = torch.backends
    settings = {
        "torch.get_num_threads": (torch.get_num_threads, torch.set_num_threads),
        "torch.is_grad_enabled": (torch.is_grad_enabled, torch.set_grad_enabled),
        "torch.get_default_dtype": (torch.get_default_dtype, torch.set_default_dtype),
        "torch.float32_matmul_precision": (torch.get_float32_matmul_precision,
                                           torch.set_float32_matmul_precision),
        "torch.deterministic_algorithms": (torch.are_deterministic_algorithms_enabled,
                                           torch.use_deterministic_algorithms),
        "cudnn.benchmark": (lambda: b.cudnn.benchmark, lambda v: setattr(b.cudnn, "benchmark", v)),
        "cudnn.allow_tf32": (lambda: b.cudnn.allow_tf32, lambda v: setattr(b.cudnn, "allow_tf32", v)),
        "cuda.matmul.allow_tf32": (lambda: b.cuda.matmul.allow_tf32,
                                   lambda v: setattr(b.cuda.matmul, "allow_tf32", v)),
    }
    if torch.cuda.is_available():
        settings["torch.cuda.current_stream"] = (torch.cuda.current_stream, torch.cuda.set_stream)
    return settings


class StateGuard:
    """``with StateGuard() as g: ...``; afterwards ``g.changed`` names what was changed (and restored)."""

    def __enter__(self) -> "StateGuard":
        self._settings = _torch_settings()
        self._before = {k: get() for k, (get, _) in self._settings.items()}
        self._timers = {n: getattr(time, n) for n in TIMER_NAMES}
        self.changed: list[str] = []
        return self

    def __exit__(self, *exc: Any) -> None:
        for name, (get, set_) in self._settings.items():
            now = get()
            if now != self._before[name]:
                self.changed.append(f"{name} {self._before[name]!r} -> {now!r}")
                set_(self._before[name])
        for name, fn in self._timers.items():
            if getattr(time, name) is not fn:
                self.changed.append(f"time.{name} was replaced")
                setattr(time, name, fn)
