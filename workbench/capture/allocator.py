"""One allocator mode for every process a report times: glibc malloc's thresholds pinned.

glibc's malloc adapts two thresholds as a process runs: the size above which a buffer gets its own
``mmap`` (128 KiB at start, raised to the size of each large buffer freed) and the free space at the
top of the heap it hands back to the OS (twice that). Whether a workload's multi-MiB tensors come
from already-mapped heap memory or from pages the kernel maps afresh (a minor page fault per 4 KiB)
therefore depends on what the process freed before, and on which thread's arena served it. Measured
on the built-in demo (4 MiB tensors, 2 threads), ``benchmarks/allocator_modes.py``: six fresh
processes at the default thresholds gave medians of 4.5-21.1 ms for the same code, and one report's
process moved from 7.4 ms to 4.5 ms after a traced pass and a compiled variant had run in it: the
report's headline and its Experiments section disagreed by 1.6x without any code change.

``steady`` pins the thresholds (mmap above 32 MiB, the largest glibc takes; trim above 1 GiB;
64 MiB top pad) so that freed buffers up to 32 MiB are reused from the heap instead of mapped
again: every process then times the same steady state (the same demo: 4.1-5.4 ms in six processes
on a loaded machine, and the headline within 1 % of the experiments' eager median). What it leaves out is stated, not hidden: a workload whose cost *is* fresh memory (a
buffer mapped and faulted in every call) is faster under ``steady`` than in a default process, and
buffers above 32 MiB are still mapped per call. The health check's ``allocator`` line says which
mode a run was timed in.

Child processes get the mode through glibc's own environment variables (``steady_env``), this
process through ``mallopt``; glibc has no call that returns to the adaptive thresholds, so pinning
lasts for the rest of the process (``workbench report`` is a process of its own). Other C libraries
(musl, macOS): "not applicable", nothing changed.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
from dataclasses import dataclass
from typing import Any, Mapping

STEADY, DEFAULT = "steady", "default"
MODES = (STEADY, DEFAULT)

MMAP_THRESHOLD_BYTES = 32 * 2**20  # glibc's maximum (HEAP_MAX_SIZE / 2 on 64-bit); larger is refused
TRIM_THRESHOLD_BYTES = 2**30
TOP_PAD_BYTES = 64 * 2**20

# mallopt parameter numbers (malloc.h) and the environment variables glibc reads at start-up
_M_TRIM_THRESHOLD, _M_TOP_PAD, _M_MMAP_THRESHOLD = -1, -2, -3
_SETTINGS = (
    ("mmap_threshold", _M_MMAP_THRESHOLD, "MALLOC_MMAP_THRESHOLD_", MMAP_THRESHOLD_BYTES),
    ("trim_threshold", _M_TRIM_THRESHOLD, "MALLOC_TRIM_THRESHOLD_", TRIM_THRESHOLD_BYTES),
    ("top_pad", _M_TOP_PAD, "MALLOC_TOP_PAD_", TOP_PAD_BYTES),
)

_pinned: "AllocatorMode | None" = None  # set by pin_steady() in this process


@dataclass(frozen=True)
class AllocatorMode:
    """The allocator mode a process timed in: ``name`` (steady / default), whether the pin took
    (``applied``), the byte settings, how it was set (mallopt, environment, none) and a sentence."""

    name: str
    applied: bool
    settings_bytes: tuple[tuple[str, int], ...] = ()
    source: str = "none"
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "applied": self.applied,
            "settings_bytes": dict(self.settings_bytes),
            "source": self.source,
            "note": self.note,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any] | None) -> "AllocatorMode | None":
        if not isinstance(d, Mapping) or not isinstance(d.get("name"), str):
            return None
        raw = d.get("settings_bytes")
        settings = tuple((str(k), int(v)) for k, v in raw.items()) if isinstance(raw, Mapping) else ()
        return cls(
            name=d["name"],
            applied=bool(d.get("applied")),
            settings_bytes=settings,
            source=str(d.get("source", "none")),
            note=str(d.get("note", "")),
        )

    @property
    def label(self) -> str:
        """What a reader is told: ``steady mode (glibc thresholds pinned: mmap above 32 MiB, ...)``."""
        if self.name == STEADY and self.applied:
            said = {"mmap_threshold": "mmap above", "trim_threshold": "trim above", "top_pad": "top pad"}
            parts = ", ".join(f"{said.get(key, key)} {_mib(value)}" for key, value in self.settings_bytes)
            return f"steady mode (glibc thresholds pinned: {parts})"
        return f"{self.name} mode ({self.note})" if self.note else f"{self.name} mode"


def _mib(n: int) -> str:
    return f"{n / 2**30:g} GiB" if n >= 2**30 else f"{n / 2**20:g} MiB"


def _steady_settings() -> tuple[tuple[str, int], ...]:
    return tuple((key, value) for key, _, _, value in _SETTINGS)


def _glibc() -> Any | None:
    """The C library if it is glibc (it has ``gnu_get_libc_version`` and ``mallopt``), else None."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.gnu_get_libc_version.restype = ctypes.c_char_p
        libc.gnu_get_libc_version()
        libc.mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
        libc.mallopt.restype = ctypes.c_int
        return libc
    except (OSError, AttributeError, TypeError):
        return None


def steady_env() -> dict[str, str]:
    """The environment variables that start a child process in the steady mode (glibc reads them
    before ``main``; other C libraries ignore them)."""
    return {env: str(value) for _, _, env, value in _SETTINGS}


ENV_VAR = "WORKBENCH_ALLOCATOR"  # the mode a report uses when none is passed (steady when unset)


def check_mode(mode: Any, where: str = "allocator mode") -> str:
    """``mode`` if it names a mode, else an ``InvalidArgumentError`` listing them."""
    from workbench.errors import InvalidArgumentError

    if mode not in MODES:
        raise InvalidArgumentError(f"{where} must be one of {', '.join(MODES)}; got {mode!r}")
    return str(mode)


def requested_mode(mode: str | None = None, environ: Mapping[str, str] | None = None) -> str:
    """The mode to time in: ``mode`` when given, else ``$WORKBENCH_ALLOCATOR``, else steady."""
    if mode is not None:
        return check_mode(mode)
    env = os.environ if environ is None else environ
    chosen = env.get(ENV_VAR, "").strip()
    return check_mode(chosen, f"the environment variable {ENV_VAR}") if chosen else STEADY


def pin_steady() -> AllocatorMode:
    """Pin this process's malloc thresholds (``mallopt``) for the rest of its life; the mode."""
    global _pinned
    if _pinned is not None and _pinned.applied:
        return _pinned
    libc = _glibc()
    if libc is None:
        _pinned = AllocatorMode(
            STEADY,
            False,
            note="not applicable: the C library is not glibc, so its "
            "malloc thresholds cannot be pinned; timings keep its own behaviour",
        )
        return _pinned
    refused = [key for key, number, _, value in _SETTINGS if libc.mallopt(number, value) != 1]
    if refused:
        _pinned = AllocatorMode(
            STEADY,
            False,
            note=f"glibc refused {', '.join(refused)}: the thresholds "
            "stay adaptive, so timings may differ between processes",
        )
    else:
        _pinned = AllocatorMode(STEADY, True, _steady_settings(), "mallopt")
    return _pinned


def current_mode(environ: Mapping[str, str] | None = None) -> AllocatorMode:
    """The mode this process runs in: pinned here (``pin_steady``), started pinned (every steady
    variable in its environment, as ``steady_env`` sets them), or glibc's adaptive default."""
    if _pinned is not None:
        return _pinned
    env = os.environ if environ is None else environ
    if all(env.get(name) == str(value) for _, _, name, value in _SETTINGS):
        if _glibc() is not None:
            return AllocatorMode(STEADY, True, _steady_settings(), "environment")
        return AllocatorMode(STEADY, False, note="not applicable: the C library is not glibc")
    return AllocatorMode(
        DEFAULT,
        False,
        note="the C library's adaptive thresholds: large buffers may be "
        "mapped afresh on every call or reused, depending on what the process freed before",
    )
