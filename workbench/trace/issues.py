"""Odd events found while reading one file: counted, then reported as one TraceWarning each."""
from __future__ import annotations

import warnings

import numpy as np

from workbench.errors import TraceWarning

# an event longer than 30 days is not a measurement
ABSURD_DUR_NS = 30 * 24 * 3600 * 10**9


class Issues:
    def __init__(self, path: str):
        self.path = path
        self.messages: list[str] = []
        self.notes: list[str] = []
        self.absurd_dur_ns = ABSURD_DUR_NS

    def _add(self, count: int, what: str, indexes: np.ndarray) -> None:
        if count:
            first = int(indexes[0]) if len(indexes) else -1
            self.messages.append(f"{self.path}: {count} event(s) {what} (first: event #{first})")

    def missing(self, count: int, field: str, indexes: np.ndarray) -> None:
        self._add(count, f"without a numeric '{field}' were dropped", indexes)

    def negative(self, count: int, indexes: np.ndarray) -> None:
        self._add(count, "had a negative 'dur'; their duration was set to 0", indexes)

    def absurd(self, count: int, indexes: np.ndarray) -> None:
        self._add(count, "had a 'dur' over 30 days and were dropped", indexes)

    def note(self, message: str) -> None:
        """Something done on request (not a problem): recorded, not warned."""
        self.notes.append(message)

    def emit(self) -> list[str]:
        for message in self.messages:
            warnings.warn(message, TraceWarning, stacklevel=4)
        return list(self.messages)
