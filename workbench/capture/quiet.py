"""Native stderr held back during the traced pass, shown only when something failed.

torch.profiler's C++ side writes lines such as ``USDT: ... profiler_start`` and ``CPUAllocator ...
Memory block of unknown size`` straight to file descriptor 2, past ``sys.stderr``; a newcomer
reads them as errors. ``captured_native_stderr()`` points fd 2 at a temporary file for the block
and keeps what was written (``.text``). On an exception the text is written back to the real
stderr before the exception propagates, so nothing that explains a failure is lost; otherwise it
stays on the run (``ProfileRun.profiler_stderr``) for whoever wants it.
"""

from __future__ import annotations

import os
import sys
import tempfile
from types import TracebackType
from typing import IO

MAX_KEPT_CHARS = 20_000  # a runaway writer must not fill the run record


class CapturedStderr:
    """``with CapturedStderr() as cap: ...`` then ``cap.text``; a no-op where fd 2 cannot be
    redirected (no real descriptor, e.g. some embedded interpreters)."""

    def __init__(self) -> None:
        self.text = ""
        self.redirected = False
        self._saved: int | None = None
        self._file: IO[bytes] | None = None

    def __enter__(self) -> "CapturedStderr":
        try:
            sys.stderr.flush()
            self._saved = os.dup(2)
        except (OSError, ValueError, AttributeError):
            return self
        self._file = scratch = tempfile.TemporaryFile(mode="w+b")
        try:
            os.dup2(scratch.fileno(), 2)
        except OSError:
            os.close(self._saved)
            self._saved = None
            scratch.close()
            self._file = None
            return self
        self.redirected = True
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if not self.redirected or self._saved is None or self._file is None:
            return
        try:
            sys.stderr.flush()
        except (OSError, ValueError, AttributeError):
            pass
        os.dup2(self._saved, 2)
        os.close(self._saved)
        self._saved = None
        self._file.seek(0)
        data = self._file.read()
        self._file.close()
        self._file = None
        self.redirected = False
        self.text = data.decode("utf-8", errors="replace")[-MAX_KEPT_CHARS:]
        if exc_type is not None and self.text.strip():
            surface(self.text, "while profiling (before the error below)")


def surface(text: str, when: str) -> None:
    """Write held-back native output to the real stderr, with a line saying where it came from."""
    try:
        sys.stderr.write(f"[workbench] native output {when}:\n{text}")
        if not text.endswith("\n"):
            sys.stderr.write("\n")
        sys.stderr.flush()
    except (OSError, ValueError, AttributeError):
        pass


def captured_native_stderr() -> CapturedStderr:
    return CapturedStderr()
