"""One small exception hierarchy for the whole package.

Every message says what was wrong, where, and what to do about it.
"""

from __future__ import annotations

import importlib.util


class WorkbenchError(Exception):
    """Base class of every error workbench raises on purpose."""


class InvalidArgumentError(WorkbenchError, ValueError):
    """A caller passed a value workbench cannot use (a count <= 0, a non-callable, ...)."""


class TraceFormatError(WorkbenchError, ValueError):
    """A trace file is missing, truncated, not a trace, or has events that cannot be read."""

    def __init__(self, message: str, *, path: str | None = None, event_index: int | None = None):
        where = []
        if path is not None:
            where.append(f"file {path!r}")
        if event_index is not None:
            where.append(f"event #{event_index}")
        full = f"{message} ({', '.join(where)})" if where else message
        super().__init__(full)
        self.path = path
        self.event_index = event_index


class TraceWarning(UserWarning):
    """A trace is usable but something in it was odd (and what was done about it)."""


class NotApplicableError(WorkbenchError):
    """A capability needs something this machine lacks (a GPU, Triton, a browser).

    ``reason`` is the plain statement shown to the user as "not applicable: <reason>".
    """

    def __init__(self, reason: str):
        super().__init__(f"not applicable: {reason}")
        self.reason = reason


class MissingDependencyError(WorkbenchError, ImportError):
    """An optional package a feature needs is not installed; the message names the pip extra.

    An ``ImportError`` too, so code that already catches a missing import keeps working.
    """

    def __init__(self, package: str, *, extra: str, feature: str):
        super().__init__(
            f"{feature} needs {package}, which is not installed: pip install 'workbench[{extra}]'", name=package
        )
        self.package = package
        self.extra = extra
        self.feature = feature


def require_package(package: str, *, extra: str, feature: str) -> None:
    """Raise MissingDependencyError, naming the pip ``extra`` that brings it, unless ``package`` is
    installed. Looks the package up without importing it, so the check costs nothing."""
    if importlib.util.find_spec(package) is None:
        raise MissingDependencyError(package, extra=extra, feature=feature)


class NotJudged(WorkbenchError):
    """A rule cannot judge: the facts it needs are not in this trace or run (no GPU activity, no
    steps, ...). The diagnosis reports ``reason`` as "not judged" instead of a hypothesis."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


class ProfileError(WorkbenchError):
    """Profiling a callable or a cell failed for a reason other than the user's code raising."""


class BundleError(WorkbenchError):
    """A saved run bundle is missing files, has the wrong version, or cannot be read."""


class ReportError(WorkbenchError):
    """Executing or rendering a report failed."""


class RegistryError(WorkbenchError, KeyError):
    """A name was looked up in a registry (rules, variants, templates) and is not there."""

    def __str__(self) -> str:  # KeyError quotes its message; we want it plain
        return str(self.args[0]) if self.args else ""


class StudyError(WorkbenchError):
    """A study folder or history file cannot be used as asked (newer format, a missing callable, ...)."""


class NothingToCompareError(InvalidArgumentError):
    """``compare`` found nothing to check: the baseline returns None (or nothing with values) and
    reaches no model, optimizer or parameter whose state it changes."""
