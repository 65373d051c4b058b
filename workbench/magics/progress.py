"""A status line under a running magic: which call of which phase, and for how long.

``%%gpuprofile`` on a slow cell runs it ``1 + warmup + repeat`` times (and a traced pass);
without a word that is many silent seconds.  :class:`StatusLine` shows, in the notebook, one
line updated in place (``cold call``, ``warm-up 2/3``, ``timed repeat 7/20``, ``traced pass``,
``parsing the trace``) once the magic has run for ``delay_s``, and ends with what was done.

The line is written by a background thread every ``every_s``: the cell's timed calls only set
a counter, so the status costs the measurement nothing.  It shows in a kernel (a Jupyter front
end), not in a terminal IPython, where it would print a line per update.
"""

from __future__ import annotations

import contextvars
import threading
import time
import uuid
from typing import TYPE_CHECKING

from workbench.render.panel import live_status_html

if TYPE_CHECKING:
    from workbench.magics.guard import ShellGuard


def phase(index: int, finished: bool, warmup: int, repeat: int, traced: bool) -> str:
    """The phase of call ``index`` (0 = the cold call); ``finished``: that call has returned."""
    clean = 1 + warmup + repeat
    if finished and traced and index + 1 == clean:
        return "starting the traced pass (torch.profiler)"
    if finished and traced and index + 1 > clean:
        return "parsing the trace"
    if index == 0:
        return "cold call (compile, lazy init)"
    if index <= warmup:
        return f"warm-up {index}/{warmup}"
    if index < clean:
        return f"timed repeat {index - warmup}/{repeat}"
    return f"traced pass, call {index - clean + 1}" if traced else f"call {index + 1}"


class StatusLine:
    """``line = StatusLine(guard, "cell[4]", warmup, repeat, traced)``; pass ``line.on_call`` to the
    CellCallable; ``line.start()`` … ``line.close()`` (in a finally)."""

    def __init__(
        self,
        guard: ShellGuard,
        label: str,
        warmup: int,
        repeat: int,
        traced: bool,
        *,
        delay_s: float = 1.0,
        every_s: float = 0.5,
        enabled: bool | None = None,
    ) -> None:
        self.guard, self.label = guard, label
        self.warmup, self.repeat, self.traced = warmup, repeat, traced
        self.delay_s, self.every_s = delay_s, every_s
        shell = guard.shell
        self.enabled = (getattr(shell, "kernel", None) is not None) if enabled is None else enabled
        self.display_id = f"workbench-status-{uuid.uuid4().hex[:12]}"
        self.index, self.finished = -1, False
        self.shown: list[str] = []  # every text published, in order (tests read it)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._t0 = time.monotonic()

    def on_call(self, index: int, finished: bool = False) -> None:
        self.index, self.finished = index, finished

    def say(self, what: str) -> None:
        """Show ``what`` as the phase from now on (for work that is not counted in calls)."""
        self.said = what

    def elapsed_s(self) -> float:
        return time.monotonic() - self._t0

    said: str | None = None

    def text(self) -> str:
        if self.said is not None:
            return f"{self.label}: {self.said} · {self.elapsed_s():.1f} s"
        if self.index < 0:
            return f"{self.label}: starting"
        what = phase(self.index, self.finished, self.warmup, self.repeat, self.traced)
        return f"{self.label}: {what} · {time.monotonic() - self._t0:.1f} s"

    def start(self) -> "StatusLine":
        if self.enabled and self._thread is None:
            ctx = contextvars.copy_context()
            self._thread = threading.Thread(target=ctx.run, args=(self._loop,), daemon=True, name="workbench-status")
            self._thread.start()
        return self

    def _loop(self) -> None:
        if self._stop.wait(self.delay_s):
            return
        while True:
            self._publish(self.text())
            if self._stop.wait(self.every_s):
                return

    def _publish(self, text: str) -> None:
        data = {
            "text/plain": text,
            "text/html": live_status_html(text),
        }
        try:
            self.guard.publish_now(data, transient={"display_id": self.display_id}, update=bool(self.shown))
        except Exception:  # noqa: BLE001 - a status line must never break the magic
            return
        self.shown.append(text)

    def close(self, final: str | None = None) -> None:
        """Stop updating; a line that was shown ends with ``final`` (or is emptied)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
        if self.shown:
            self._publish(final or f"{self.label}: stopped after {time.monotonic() - self._t0:.1f} s")
