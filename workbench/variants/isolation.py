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
from types import FrameType
from typing import Any, Callable

from workbench.errors import WorkbenchError

TIMER_NAMES = (
    "perf_counter",
    "perf_counter_ns",
    "monotonic",
    "monotonic_ns",
    "time",
    "time_ns",
    "process_time",
    "process_time_ns",
)
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
                _adopt(box["caller_settings"])
                box["out"] = fn(*args)
            except BaseException as exc:  # noqa: BLE001 - handed to the caller
                box["err"] = exc
            finally:
                try:
                    box["settings_after"] = _thread_settings()
                except BaseException:  # noqa: BLE001
                    pass
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


THREAD_SETTING_NAMES = ("torch.get_num_threads", "torch.is_grad_enabled")


def call_with_limit(
    fn: Callable[..., Any], args: tuple[Any, ...], limit_s: float, changed: list[str] | None = None
) -> Any:
    """``fn(*args)`` on the worker thread; raises VariantTimeout past ``limit_s``, re-raises errors.

    Per-thread torch settings the call changed on the worker (intra-op threads, grad mode: the
    caller's guard cannot see them there) are appended to ``changed`` ("name before -> after");
    the worker adopts the caller's settings again before its next call."""
    global _worker
    if _worker is None or not _worker.thread.is_alive():
        _worker = _Worker()
    box: dict[str, Any] = {"caller_settings": _thread_settings()}
    done = threading.Event()
    _worker.jobs.put((fn, args, box, done))
    if not done.wait(limit_s):
        hung, _worker = _worker, None
        hung.stop()  # its loop ends once the interrupted call unwinds
        stopped = _interrupt(hung.thread)
        raise VariantTimeout(
            f"did not return within {limit_s:g} s (raise time_limit_s if it is just slow); "
            + (
                "its thread was interrupted"
                if stopped
                else "its thread could not be interrupted (blocked in native code) and was left as a daemon"
            )
        )
    after = box.get("settings_after")
    if changed is not None and after is not None:
        for name, before, now in zip(THREAD_SETTING_NAMES, box["caller_settings"], after):
            if before != now:
                changed.append(f"{name} {before!r} -> {now!r}")
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
    assert worker.ident is not None, "only a started worker is interrupted"
    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(worker.ident), ctypes.py_object(VariantTimeout))
    deadline = time.monotonic() + grace_s
    while worker.is_alive() and time.monotonic() < deadline:
        time.sleep(0.005)
    return not worker.is_alive()


def _torch_settings() -> dict[str, tuple[Callable[[], Any], Callable[[Any], Any]]]:
    import torch

    b = torch.backends
    settings: dict[str, tuple[Callable[[], Any], Callable[[Any], Any]]] = {
        "torch.get_num_threads": (torch.get_num_threads, torch.set_num_threads),
        "torch.is_grad_enabled": (torch.is_grad_enabled, torch.set_grad_enabled),
        "torch.get_default_dtype": (torch.get_default_dtype, torch.set_default_dtype),
        "torch.float32_matmul_precision": (torch.get_float32_matmul_precision, torch.set_float32_matmul_precision),
        "torch.deterministic_algorithms": (
            torch.are_deterministic_algorithms_enabled,
            torch.use_deterministic_algorithms,
        ),
        "cudnn.benchmark": (lambda: b.cudnn.benchmark, lambda v: setattr(b.cudnn, "benchmark", v)),
        "cudnn.allow_tf32": (lambda: b.cudnn.allow_tf32, lambda v: setattr(b.cudnn, "allow_tf32", v)),
        "cuda.matmul.allow_tf32": (lambda: b.cuda.matmul.allow_tf32, lambda v: setattr(b.cuda.matmul, "allow_tf32", v)),
    }
    if torch.cuda.is_available():
        settings["torch.cuda.current_stream"] = (torch.cuda.current_stream, torch.cuda.set_stream)
    return settings


class StateGuard:
    """``with StateGuard() as g: ...``; afterwards ``g.changed`` names what was changed (and restored)."""

    def __init__(self) -> None:
        self.changed: list[str] = []

    def __enter__(self) -> "StateGuard":
        self._settings = _torch_settings()
        self._before = {k: get() for k, (get, _) in self._settings.items()}
        self._timers = {n: getattr(time, n) for n in TIMER_NAMES}
        self.changed = []
        return self

    def __exit__(self, *exc: object) -> None:
        for name, (get, set_) in self._settings.items():
            now = get()
            if now != self._before[name]:
                self.changed.append(f"{name} {self._before[name]!r} -> {now!r}")
                set_(self._before[name])
        for name, fn in self._timers.items():
            if getattr(time, name) is not fn:
                self.changed.append(f"time.{name} was replaced")
                setattr(time, name, fn)


class SettingsWatch:
    """A snapshot of the process-wide settings (StateGuard's list and the timers), checked and
    restored after each timed sample: ``restore()`` returns what the sample changed, so a variant
    that sets one thread or turns grad off is named and no later sample runs under its setting."""

    def __init__(self) -> None:
        self._settings = _torch_settings()
        self._before = {k: get() for k, (get, _) in self._settings.items()}
        self._timers = {n: getattr(time, n) for n in TIMER_NAMES}

    def restore(self) -> list[str]:
        changed = []
        for name, (get, set_) in self._settings.items():
            now = get()
            if now != self._before[name]:
                changed.append(f"{name} {self._before[name]!r} -> {now!r}")
                set_(self._before[name])
        for name, fn in self._timers.items():
            if getattr(time, name) is not fn:
                changed.append(f"time.{name} was replaced")
                setattr(time, name, fn)
        return changed


class CallDeadline:
    """A time limit on calls made in this thread (the timed rounds call variants directly, not on
    the worker, so that the worker's hand-off is not timed).

    ``with CallDeadline(limit_s) as d: d.arm(); ...; d.disarm()``: past the limit a VariantTimeout
    is raised in the calling thread: by SIGALRM in the main thread (which also interrupts a sleep),
    elsewhere by an asynchronous exception from a watchdog thread (effective once the call runs
    Python bytecode again).  An outer alarm (pytest-timeout, say) is put back on exit, minus the
    time spent."""

    def __init__(self, limit_s: float) -> None:
        self.limit_s = float(limit_s)
        self._armed_at: float | None = None

    def __enter__(self) -> "CallDeadline":
        import signal

        self._signal = (
            threading.current_thread() is threading.main_thread()
            and hasattr(signal, "setitimer")
            and hasattr(signal, "SIGALRM")
        )
        self._entered = time.monotonic()
        if self._signal:
            self._old_handler = signal.signal(signal.SIGALRM, self._on_alarm)
            self._old_timer = signal.setitimer(signal.ITIMER_REAL, 0)
        else:
            self._target = threading.get_ident()
            self._stop = threading.Event()
            self._lock = threading.Lock()
            self._watchdog = threading.Thread(target=self._watch, name="workbench-timing-deadline", daemon=True)
            self._watchdog.start()
        return self

    def _on_alarm(self, signum: int, frame: FrameType | None) -> None:
        if self._armed_at is not None:
            self._armed_at = None
            raise VariantTimeout(f"did not return within {self.limit_s:g} s")

    def _watch(self) -> None:
        while not self._stop.wait(0.05):
            with self._lock:
                start = self._armed_at
                if start is not None and time.monotonic() - start > self.limit_s:
                    self._armed_at = None
                    ctypes.pythonapi.PyThreadState_SetAsyncExc(
                        ctypes.c_ulong(self._target), ctypes.py_object(VariantTimeout)
                    )

    def arm(self) -> None:
        if self._signal:
            import signal

            self._armed_at = time.monotonic()
            signal.setitimer(signal.ITIMER_REAL, self.limit_s)
        else:
            with self._lock:
                self._armed_at = time.monotonic()

    def disarm(self) -> None:
        if self._signal:
            import signal

            signal.setitimer(signal.ITIMER_REAL, 0)
            self._armed_at = None
        else:
            with self._lock:
                self._armed_at = None

    def __exit__(self, *exc: object) -> None:
        if self._signal:
            import signal

            signal.setitimer(signal.ITIMER_REAL, 0)
            self._armed_at = None
            signal.signal(signal.SIGALRM, self._old_handler)
            remaining, interval = self._old_timer
            if remaining > 0:
                left = max(remaining - (time.monotonic() - self._entered), 1e-3)
                signal.setitimer(signal.ITIMER_REAL, left, interval)
        else:
            self._stop.set()
            self._watchdog.join(1.0)
