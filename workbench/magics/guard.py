"""What a magic leaves as it found it: one guard per magic call, whatever the cell does.

A magic runs the user's cell many times (cold, warm-up, repeats, checks, rounds). Its
:class:`ShellGuard` is the one owner of everything that running may change:

- ``sys.stdout``, ``sys.stderr`` and the shell's display publisher: the repeats' output is
  silenced by the guard alone (one capture per magic, whichever cell asks first), and on exit
  the three are put back to the objects they were on entry, even if the cell replaced them.
  Guards nest (a magic inside a profiled cell): each restores its own snapshot, so release is
  last-in-first-out by construction.  The silencing publisher forwards everything but
  ``publish`` / ``clear_output`` to the real one, so a kernel that talks to it (ipykernel's
  ``set_parent`` on the next request) keeps working even in the worst case.
- torch's thread count and grad mode: put back, and the change is named in a note.
- the torch profiler: while a guard holds, a profiler started while another is already running
  (the cell's own ``torch.profiler.profile()`` inside a traced run, which crashes the process
  in torch) raises :class:`~workbench.errors.ProfileError` in the cell instead.

Exit restores on success, exception, ``KeyboardInterrupt`` and ``SystemExit`` alike.
"""

from __future__ import annotations

import io
import sys
from types import ModuleType
from typing import TYPE_CHECKING, Any, Literal, TextIO, cast

from workbench.capture.profiler_check import profiler_running
from workbench.errors import ProfileError

if TYPE_CHECKING:
    from IPython.core.displaypub import DisplayPublisher
    from IPython.core.interactiveshell import InteractiveShell

PROFILER_CONFLICT = (
    "the cell starts a torch profiler while another one is running (this magic's traced pass, "
    "or a profiler around it); two profilers at once crash torch, so it was stopped here. "
    "Profile the cell with -T (time only), or remove its own torch.profiler session"
)


class _Sink(io.TextIOBase):
    """A text stream that drops what is written (the repeats' prints), never grows."""

    def __init__(self, original: TextIO) -> None:
        super().__init__()
        self._original = original
        self.chars = 0

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        self.chars += len(text)
        return len(text)

    def isatty(self) -> bool:
        return False

    def fileno(self) -> int:  # code that writes to the file descriptor goes where it went
        return self._original.fileno()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self._original, "encoding", None) or "utf-8"


class _QuietPublisher:
    """The shell's display publisher with ``publish`` and ``clear_output`` dropped; every other
    attribute (``set_parent``, ``parent_header``, ``session``...) is the real publisher's."""

    def __init__(self, original: Any) -> None:
        self._original = original
        self.dropped = 0

    def publish(self, *args: Any, **kwargs: Any) -> None:
        self.dropped += 1

    def clear_output(self, *args: Any, **kwargs: Any) -> None:
        return None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._original, name)


# -- the profiler check: installed by the outermost guard, removed by it -------------------------
_patch_depth = 0
_saved_entry_points: dict[str, Any] = {}


def _refusing(original: Any) -> Any:
    def start(*args: Any, **kwargs: Any) -> Any:
        __tracebackhide__ = True
        if profiler_running():
            raise ProfileError(PROFILER_CONFLICT)
        return original(*args, **kwargs)

    start.__wrapped__ = original  # type: ignore[attr-defined]
    return start


def _install_profiler_check() -> None:
    global _patch_depth
    _patch_depth += 1
    if _patch_depth > 1:
        return
    try:
        import torch.autograd.profiler as ap
    except Exception:  # noqa: BLE001 - no torch: nothing can start a profiler
        return
    for name in ("_prepare_profiler", "_enable_profiler"):
        original = getattr(ap, name, None)
        if original is not None:
            _saved_entry_points[name] = original
            setattr(ap, name, _refusing(original))


def _remove_profiler_check() -> None:
    global _patch_depth
    _patch_depth -= 1
    if _patch_depth > 0:
        return
    _patch_depth = 0
    if _saved_entry_points:
        import torch.autograd.profiler as ap

        for name, original in _saved_entry_points.items():
            setattr(ap, name, original)
        _saved_entry_points.clear()


class ShellGuard:
    """``with ShellGuard(shell) as guard: ...``; ``guard.silence()`` drops output from then on;
    ``guard.notes`` says what the cell had changed and the guard put back."""

    def __init__(self, shell: InteractiveShell) -> None:
        self.shell = shell
        self.notes: list[str] = []
        self._silenced = False
        self._entered = False

    # -- entering ------------------------------------------------------------------------
    def __enter__(self) -> "ShellGuard":
        self.stdout, self.stderr = sys.stdout, sys.stderr
        self.display_pub = getattr(self.shell, "display_pub", None)
        self.profiler_was_running = profiler_running()
        self.nested = _patch_depth > 0  # inside another magic's guard
        torch = _torch()
        self._threads = torch.get_num_threads() if torch is not None else None
        self._grad = torch.is_grad_enabled() if torch is not None else None
        _install_profiler_check()
        self._entered = True
        return self

    @property
    def silenced(self) -> bool:
        return self._silenced

    def silence(self) -> None:
        """From now until exit, prints and displays are dropped (idempotent)."""
        if self._silenced or not self._entered:
            return
        self._silenced = True
        sys.stdout, sys.stderr = _Sink(self.stdout), _Sink(self.stderr)
        if self.display_pub is not None:
            # a stand-in that forwards all but publishing: duck-typed as the shell's publisher
            self.shell.display_pub = cast("DisplayPublisher", _QuietPublisher(self.display_pub))

    def publish_now(self, data: dict[str, Any], **kwargs: Any) -> None:
        """Publish through the real display publisher even while silenced (progress lines)."""
        if self.display_pub is not None:
            self.display_pub.publish(data, **kwargs)

    # -- leaving -------------------------------------------------------------------------
    def __exit__(self, *exc: object) -> Literal[False]:
        if not self._entered:
            return False
        self._entered = False
        self._silenced = False
        try:
            _remove_profiler_check()
        finally:
            self._restore_streams()
            self._restore_torch()
        return False

    def _restore_streams(self) -> None:
        replaced = []
        if not isinstance(sys.stdout, _Sink) and sys.stdout is not self.stdout:
            replaced.append("sys.stdout")
        if not isinstance(sys.stderr, _Sink) and sys.stderr is not self.stderr:
            replaced.append("sys.stderr")
        pub = getattr(self.shell, "display_pub", None)
        if self.display_pub is not None and not isinstance(pub, _QuietPublisher) and pub is not self.display_pub:
            replaced.append("the display publisher")
        sys.stdout, sys.stderr = self.stdout, self.stderr
        if self.display_pub is not None:
            self.shell.display_pub = self.display_pub
        if replaced:
            self.notes.append(f"the cell replaced {', '.join(replaced)}; put back as it was before the magic")

    def _restore_torch(self) -> None:
        torch = _torch()
        if torch is None:
            return
        if self._threads is not None and torch.get_num_threads() != self._threads:
            self.notes.append(
                f"the cell changed torch's threads {self._threads} → {torch.get_num_threads()}; "
                "put back (set it in a cell outside the magic to keep it)"
            )
            torch.set_num_threads(self._threads)
        if self._grad is not None and torch.is_grad_enabled() != self._grad:
            self.notes.append(
                f"the cell turned grad mode {'off' if self._grad else 'on'}; put back "
                "(use --no-grad, or set it outside the magic)"
            )
            torch.set_grad_enabled(self._grad)
        if profiler_running() and not self.profiler_was_running:
            self.notes.append("the cell left a torch profiler running; it was stopped")
            try:
                torch.autograd._disable_profiler()
            except Exception as exc:  # noqa: BLE001 - say it, do not crash the kernel
                self.notes[-1] = f"the cell left a torch profiler running and stopping it failed: {exc}"


def _torch() -> ModuleType | None:
    try:
        import torch
    except ImportError:
        return None
    return torch
