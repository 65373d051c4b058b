"""Exact decimal-µs text -> integer nanoseconds, vectorised.

Kineto writes ``ts`` and ``dur`` in microseconds, as integers (older traces) or with up to
three decimals (nanosecond resolution). An epoch timestamp in µs (~1.7e15) parsed as float64
keeps only ~0.25 µs of resolution, so the decimal text is parsed here straight into int64
nanoseconds: digits past the third decimal (sub-ns) are truncated. Exponent notation and
other oddities fall back to a per-value float parse (rare, slow, still correct to float64).

``timestamps_ns`` uses the float values the decoder already has wherever float64 is exact
(|ts| < 2**41 µs, the usual case) and re-reads the text only for the chunks that need it.
"""

from __future__ import annotations

import re

import msgspec
import numpy as np

MISSING_NS = np.iinfo(np.int64).min
_WIDTH = 24  # longest accepted number text; longer ones take the slow path
_CHUNK = 1 << 18
_POW10 = np.array([10**k for k in range(19)] + [0], dtype=np.int64)  # index 19 = out of range
# a float timestamp of 13+ integer digits: float64 cannot keep its ns digits
_LONG_FRACTIONAL_TS = re.compile(rb'"ts"\s*:\s*-?\d{13,}\.\d')
_FLOAT_EXACT_LIMIT_US = 2.0**41


class _RawTime(msgspec.Struct, gc=False):
    ts: msgspec.Raw = msgspec.Raw()


class _RawTimes(msgspec.Struct):
    traceEvents: list[_RawTime] = []  # noqa: N815


def timestamps_ns(text: bytes, ts_us: np.ndarray) -> np.ndarray:
    """Absolute int64 ns per event (MISSING_NS where absent), exact to the ns in the text.

    ``text`` is the JSON the events were decoded from ("[...]" or {"traceEvents": [...]}),
    ``ts_us`` their float ``ts`` (nan where absent).
    """
    ts_ns = us_to_ns(ts_us)
    finite = np.isfinite(ts_us)
    if (
        finite.any()
        and np.abs(ts_us[finite]).max() >= _FLOAT_EXACT_LIMIT_US
        and _LONG_FRACTIONAL_TS.search(text) is not None
    ):
        if text[:1] == b"{":
            stamps = msgspec.json.decode(text, type=_RawTimes).traceEvents
        else:
            stamps = msgspec.json.decode(text, type=list[_RawTime])
        exact, ok = parse_us_to_ns([bytes(s.ts) for s in stamps])
        ts_ns = np.where(ok & finite, exact, ts_ns)
    return ts_ns


def us_to_ns(values_us: np.ndarray) -> np.ndarray:
    """float µs -> int64 ns, splitting off the integer part first so no digit is lost to *1000."""
    finite = np.isfinite(values_us) & (np.abs(values_us) < 9.2e15)
    safe = np.where(finite, values_us, 0.0)
    whole = np.floor(safe)
    ns = whole.astype(np.int64) * 1000 + np.rint((safe - whole) * 1000.0).astype(np.int64)
    return np.where(finite, ns, MISSING_NS)


def parse_us_to_ns(texts: list[bytes]) -> tuple[np.ndarray, np.ndarray]:
    """Parse decimal µs texts; return (int64 ns, bool ok). ``ok`` is False where unparseable."""
    n = len(texts)
    out = np.zeros(n, dtype=np.int64)
    ok = np.ones(n, dtype=bool)
    for start in range(0, n, _CHUNK):
        part = texts[start : start + _CHUNK]
        out[start : start + len(part)], ok[start : start + len(part)] = _parse_chunk(part)
    return out, ok


def _parse_chunk(texts: list[bytes]) -> tuple[np.ndarray, np.ndarray]:
    mat = np.array(texts, dtype=f"S{_WIDTH}").view(np.uint8).reshape(len(texts), _WIDTH)
    is_digit = (mat >= 48) & (mat <= 57)
    is_dot = mat == 46
    is_minus = mat == 45
    is_pad = mat == 0
    lengths = _WIDTH - is_pad.sum(axis=1)
    simple = (is_digit | is_dot | is_pad).all(axis=1) | (
        is_minus[:, 0] & (is_digit | is_dot | is_pad)[:, 1:].all(axis=1)
    )
    simple &= (is_dot.sum(axis=1) <= 1) & (lengths > 0) & (lengths < _WIDTH)
    has_dot = is_dot.any(axis=1)
    dot_col = np.where(has_dot, is_dot.argmax(axis=1), lengths)
    cols = np.arange(_WIDTH)
    # exponent of each digit, in ns: integer digits count from the dot, decimals below it
    exp_ns = np.where(
        cols[None, :] < dot_col[:, None], dot_col[:, None] - 1 - cols[None, :] + 3, dot_col[:, None] - cols[None, :] + 3
    )
    usable = is_digit & (exp_ns >= 0)
    exp_ns = np.where(usable & (exp_ns <= 18), exp_ns, 19)
    too_big = (usable & (exp_ns == 19)).any(axis=1)
    values = ((mat.astype(np.int64) - 48) * _POW10[exp_ns]).sum(axis=1, where=usable)
    values = np.where(is_minus[:, 0], -values, values)
    ok = simple & ~too_big
    for i in np.flatnonzero(~ok):
        values[i], ok[i] = _slow_parse(texts[i])
    return values, ok


def _slow_parse(text: bytes) -> tuple[int, bool]:
    try:
        value = float(text)
    except (ValueError, TypeError):
        return 0, False
    if not np.isfinite(value) or abs(value) > 9.2e15:
        return 0, False
    return int(round(value * 1000.0)), True
