"""Odd events found while reading one file: counted, then reported as one TraceWarning each."""

from __future__ import annotations

import warnings

import numpy as np

from workbench.errors import TraceWarning
from workbench.trace.paths import shown

# an event longer than 30 days is not a measurement
ABSURD_DUR_NS = 30 * 24 * 3600 * 10**9


class Issues:
    def __init__(self, path: str):
        self.path = path
        self.shown = shown(path)
        self.messages: list[str] = []
        self.notes: list[str] = []
        self.absurd_dur_ns = ABSURD_DUR_NS
        self.huge_ts_count = 0
        self.largest_ts_us = 0.0
        self.skipped_count = 0
        self._huge_first = -1
        self._unknown: dict[tuple[str, str], int] = {}
        self._skipped: list[tuple[int, str]] = []
        self._nan_values = 0
        self.skipped_message = ""

    def _add(self, count: int, what: str, indexes: np.ndarray) -> None:
        if count:
            first = int(indexes[0]) if len(indexes) else -1
            self.messages.append(f"{self.shown}: {count} event(s) {what} (first: event #{first})")

    def missing(self, count: int, field: str, indexes: np.ndarray) -> None:
        self._add(count, f"without a numeric '{field}' were dropped", indexes)

    def negative(self, count: int, indexes: np.ndarray) -> None:
        self._add(count, "had a negative 'dur'; their duration was set to 0", indexes)

    def absurd(self, count: int, indexes: np.ndarray) -> None:
        self._add(count, "had a 'dur' over 30 days and were dropped", indexes)

    def unpaired(self, count: int, what: str, indexes: np.ndarray) -> None:
        self._add(count, f"were {what} and were skipped", indexes)

    def huge_ts(self, count: int, indexes: np.ndarray, largest_us: float) -> None:
        """Timestamps too large to be µs: counted here, said once in ``finish``."""
        if count:
            if self._huge_first < 0:
                self._huge_first = int(indexes[0])
            self.huge_ts_count += count
            self.largest_ts_us = max(self.largest_ts_us, largest_us)

    def skipped(self, skipped: list[tuple[int, str]]) -> None:
        """Events that could not be read at all (index in the file, why)."""
        self._skipped.extend(skipped)
        self.skipped_count += len(skipped)

    def unknown(self, found: dict[tuple[str, str], int]) -> None:
        for key, n in found.items():
            self._unknown[key] = self._unknown.get(key, 0) + n

    def nan_values(self, count: int) -> None:
        self._nan_values += count

    @property
    def unit_hint(self) -> str:
        """What the timestamps look like, when they are too large for µs ("" otherwise)."""
        if not self.huge_ts_count:
            return ""
        return (
            f"'ts' values up to {self.largest_ts_us:.3g} are too large to be microseconds (the "
            "Chrome trace format's unit; µs since 1970 are ~1.7e15): they look like nanoseconds. "
            "Divide 'ts' and 'dur' by 1000 when writing the trace (displayTimeUnit changes only "
            "how a viewer shows times, not the unit of 'ts')"
        )

    def finish(self) -> None:
        """Turn what was counted over the whole file into messages (once, after the last chunk)."""
        if self.huge_ts_count:
            self.messages.append(
                f"{self.shown}: {self.huge_ts_count} event(s) were dropped: "
                f"{self.unit_hint} (first: event #{self._huge_first})"
            )
        if self._skipped:
            index, why = self._skipped[0]
            self.skipped_message = f"{len(self._skipped)} event(s) could not be read (first: event #{index}: {why})"
            self.messages.append(
                f"{self.shown}: {self.skipped_message} and were skipped; the rest of the file was loaded"
            )
        if self._unknown:
            total = sum(self._unknown.values())
            kinds = ", ".join(
                f"{n} with cat {cat!r} ph {ph!r}"
                for (ph, cat), n in sorted(self._unknown.items(), key=lambda kv: -kv[1])[:8]
            )
            self.messages.append(f"{self.shown}: {total} event(s) of a kind no table reads were skipped ({kinds})")
        if self._nan_values:
            self.messages.append(
                f"{self.shown}: {self._nan_values} NaN/Infinity value(s) (not standard JSON) were read as absent"
            )

    def note(self, message: str) -> None:
        """Something done on request (not a problem): recorded, not warned."""
        self.notes.append(message)

    def emit(self) -> list[str]:
        for message in self.messages:
            warnings.warn(message, TraceWarning, stacklevel=5)
        return list(self.messages)
