"""The one place where capture turns an exported trace file into trace data (``workbench.trace``)."""

from __future__ import annotations

from pathlib import Path

from workbench.errors import BundleError
from workbench.trace import TraceData, read_trace


def load_trace(path: str | Path, *, strict: bool = False) -> tuple[TraceData | None, str]:
    """(TraceData or None, note).

    Not strict (right after profiling): a failed parse becomes the note, so the timing, which
    stands on its own, is not lost, and the raw file stays with the run. Strict (loading a saved
    bundle): a parse failure raises BundleError.
    """
    try:
        return read_trace(str(path), cache=True), ""
    except Exception as exc:
        if strict:
            raise BundleError(
                f"the bundle's trace {str(path)!r} could not be parsed ({type(exc).__name__}: "
                f"{exc}); the file may be damaged: profile again and save a new bundle"
            ) from exc
        return None, f"trace not parsed: {type(exc).__name__}: {exc}"
