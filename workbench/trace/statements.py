"""The statements a traced pass executed in the user's code: ``StatementLines``.

The exported trace names each Python frame by its function's first line (``model.py(40):
forward``); which statement of the function was running is not in it. The traced pass records it
beside the trace (``workbench.capture.statements``, with ``sys.settrace`` on the profiled thread):
a change point each time the innermost frame in the user's files (``workbench.trace.user_files``)
changes, on a call into such a frame, on each line it starts and on its return.

Per change point (arrays of one length, in time order): ``ts_ns`` (when, on the clock of the
trace's timestamps: Kineto's ``ts`` × 1000 + the trace's ``baseTimeNanoseconds``, the system's
realtime clock as torch's profiler converts its own clock to it), ``depth`` (the user's frames on
the stack after the change, 0: none), ``code`` (the innermost one's function, an index into
``codes``: (file as the trace names it, first line, function name); -1 at depth 0) and ``line``
(the line it runs; its first line right after the call, before its first statement starts).
``pid`` / ``tid``: the process and the (native) thread the calls ran on, as the trace's events
name them. ``end_ns``: when recording stopped (after that, nothing is known). ``note``: why the
recording is partial ("" when it is whole).

``to_dict`` / ``from_dict`` keep it small in a run record: each array compressed (zlib) and
base64-encoded, the timestamps as differences.
"""

from __future__ import annotations

import base64
import binascii
import zlib
from dataclasses import dataclass
from typing import Any

import numpy as np

FORMAT = "workbench.statements"
VERSION = 1
_COLUMNS = (("ts_ns", "<i8"), ("code", "<i4"), ("line", "<i4"), ("depth", "<i4"))
MAX_EVENTS = 4_000_000  # the most change points a saved record may hold (the recorder stops at fewer)

Code = tuple[str, int, str]  # (file as the trace names it, the function's first line, its name)


@dataclass(frozen=True, eq=False)
class StatementLines:
    """What the user's code was executing through the traced pass (see the module docstring)."""

    pid: int
    tid: int
    ts_ns: np.ndarray  # int64, on the trace's clock
    code: np.ndarray  # int32, index into codes (-1 at depth 0)
    line: np.ndarray  # int32
    depth: np.ndarray  # int32
    codes: tuple[Code, ...]
    end_ns: int
    note: str = ""

    def __post_init__(self) -> None:
        n = len(self.ts_ns)
        if not all(len(a) == n for a in (self.code, self.line, self.depth)):
            raise ValueError("statement lines: ts_ns, code, line and depth must have one length")

    @classmethod
    def empty(cls, note: str, pid: int = 0, tid: int = 0) -> StatementLines:
        """No change points, with why (``note``): the run then names functions by their first line."""
        none = np.zeros(0, dtype=np.int32)
        return cls(pid, tid, np.zeros(0, dtype=np.int64), none, none.copy(), none.copy(), (), 0, note)

    def __len__(self) -> int:
        return len(self.ts_ns)

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        assert isinstance(other, StatementLines)
        return (self.pid, self.tid, self.codes, self.end_ns, self.note) == (
            other.pid,
            other.tid,
            other.codes,
            other.end_ns,
            other.note,
        ) and all(np.array_equal(getattr(self, c), getattr(other, c)) for c, _ in _COLUMNS)

    __hash__ = None  # type: ignore[assignment]  # holds arrays

    def __repr__(self) -> str:
        return (
            f"StatementLines({len(self)} change points in {len(self.codes)} functions on thread {self.tid}"
            + (f"; {self.note}" if self.note else "")
            + ")"
        )

    def to_dict(self) -> dict[str, Any]:
        ts = np.asarray(self.ts_ns, dtype=np.int64)
        first = int(ts[0]) if len(ts) else 0
        columns = {
            "ts_ns": np.diff(ts, prepend=np.int64(first)) if len(ts) else ts,
            "code": self.code,
            "line": self.line,
            "depth": self.depth,
        }
        return {
            "format": FORMAT,
            "version": VERSION,
            "pid": int(self.pid),
            "tid": int(self.tid),
            "count": len(ts),
            "first_ns": first,
            "end_ns": int(self.end_ns),
            "note": self.note,
            "codes": [[file, int(line), name] for file, line, name in self.codes],
            **{name: _encode(np.asarray(columns[name], dtype=dtype)) for name, dtype in _COLUMNS},
        }

    @classmethod
    def from_dict(cls, d: Any) -> StatementLines:
        """The value of ``to_dict``'s output; a ValueError saying what is wrong for anything else."""
        if not isinstance(d, dict) or d.get("format") != FORMAT:
            raise ValueError(f"statements must be a {FORMAT!r} object (StatementLines.to_dict)")
        if d.get("version") != VERSION:
            raise ValueError(f"statements of version {d.get('version')!r}; this workbench reads version {VERSION}")
        count, pid, tid, first, end = (_integer(d, k) for k in ("count", "pid", "tid", "first_ns", "end_ns"))
        if not 0 <= count <= MAX_EVENTS:
            raise ValueError(f"statements: count must be between 0 and {MAX_EVENTS}; got {count}")
        note = d.get("note", "")
        raw_codes = d.get("codes")
        if not isinstance(note, str) or not isinstance(raw_codes, list):
            raise ValueError("statements: note must be a string and codes a list")
        codes: list[Code] = []
        for entry in raw_codes:
            if not (
                isinstance(entry, list)
                and len(entry) == 3
                and isinstance(entry[0], str)
                and type(entry[1]) is int
                and isinstance(entry[2], str)
            ):
                raise ValueError("statements: each code must be [file, first line, function]")
            codes.append((entry[0], entry[1], entry[2]))
        arrays = {name: _decode(d.get(name), dtype, count, name) for name, dtype in _COLUMNS}
        ts = np.cumsum(arrays["ts_ns"], dtype=np.int64) + np.int64(first) if count else arrays["ts_ns"]
        code, depth = arrays["code"], arrays["depth"]
        if count and (
            (np.diff(ts) < 0).any()
            or (code < -1).any()
            or (code >= len(codes)).any()
            or (depth < 0).any()
            or ((code < 0) != (depth == 0)).any()
        ):
            raise ValueError("statements: the change points are not in time order or name no function")
        return cls(pid, tid, ts, code.astype(np.int32), arrays["line"].astype(np.int32), depth, tuple(codes), end, note)


def _integer(d: dict[str, Any], key: str) -> int:
    value = d.get(key)
    if type(value) is not int:
        raise ValueError(f"statements: {key} must be an integer; got {type(value).__name__}")
    return value


def _encode(values: np.ndarray) -> str:
    return base64.b64encode(zlib.compress(values.tobytes(), 6)).decode("ascii")


def _decode(text: Any, dtype: str, count: int, name: str) -> np.ndarray:
    if not isinstance(text, str):
        raise ValueError(f"statements: {name} must be a base64 string")
    size = np.dtype(dtype).itemsize * count
    try:
        packed = base64.b64decode(text.encode("ascii"), validate=True)
        inflate = zlib.decompressobj()
        raw = inflate.decompress(packed, size + 1)  # bounded: a damaged record cannot blow up
    except (binascii.Error, zlib.error, UnicodeEncodeError) as exc:
        raise ValueError(f"statements: {name} is not compressed base64 ({exc})") from None
    if len(raw) != size or inflate.unconsumed_tail:
        raise ValueError(f"statements: {name} holds {len(raw)} bytes, not the {size} of {count} values")
    return np.frombuffer(raw, dtype=dtype).astype(dtype.lstrip("<"))
