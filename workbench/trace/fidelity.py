"""What a trace's format could not provide, and the one error that says so.

A reader of another tool's format (Nsight Systems SQLite, rocprofv3 JSON) fills the same declared
tables as the Kineto reader, and records in ``TraceMeta.fidelity`` one note per table or column the
format lacks: the key is a table (``"runtime"``: the table holds no rows because the format has
none) or ``"table.column"`` (the column is all absent), the value says what is missing and why. A
Kineto trace has an empty ``fidelity``.

``require(meta, keys, what)`` raises ``NotAvailableError`` ("not available from nsys-sqlite 3.25.0:
…") where a needed key is missing, so an analysis that needs it says so instead of giving a number.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from workbench.errors import WorkbenchError

if TYPE_CHECKING:
    from workbench.trace.data import TraceMeta

KINETO = "kineto"


class NotAvailableError(WorkbenchError):
    """An analysis needs a table or column the trace's format does not provide."""

    def __init__(self, source: str, missing: list[str]):
        self.source = source
        self.missing = missing
        super().__init__(f"not available from {source}: {'; '.join(missing)}")


def missing(meta: TraceMeta, keys: Iterable[str]) -> list[str]:
    """The fidelity notes of ``keys`` (tables or ``table.column``) this trace lacks."""
    fidelity = getattr(meta, "fidelity", None) or {}
    return [f"{key}: {fidelity[key]}" for key in keys if key in fidelity]


def require(meta: TraceMeta, keys: Iterable[str]) -> None:
    """Raise NotAvailableError naming what is missing, if any of ``keys`` is in the trace's fidelity."""
    notes = missing(meta, keys)
    if notes:
        raise NotAvailableError(getattr(meta, "source", KINETO), notes)
