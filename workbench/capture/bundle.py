"""Run bundles: a folder with run.json (format version), environment.json and trace.json.gz.

This module reads and writes the folder only; the run record that the folder holds is built by
its class (``workbench.capture.run.RunRecord.load``), so that the bundle knows no run type.

The files follow workbench's one reader/writer discipline (``workbench.records``):

* reading: a bundle path, or a file of it, that is not what it should be (a FIFO, a device, a
  folder where a file is expected, a symlink loop or a link to nothing) is refused with a
  ``BundleError`` before it is opened, and so is a record file over its bound (``RUN_MAX_BYTES``,
  ``ENVIRONMENT_MAX_BYTES``): nothing blocks, nothing exhausts the memory. ``run.json`` must hold a
  JSON object of this format and version (a bundle of another version says which workbench wrote
  it), and each field of the run record present in it must be of its type (``RECORD_FIELDS``): a
  ``BundleError`` names the file, the field and what to do;
* writing: the folder is checked writable before anything is written (a ``BundleError`` where it
  is not, nothing partial left); every file is written to a temporary file beside its target and
  renamed over it, ``run.json`` last, so that a reader finds the old bundle or the new one.
"""

from __future__ import annotations

import errno
import json
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import workbench.records as files
from workbench import __version__
from workbench.capture.profiler_session import TRACE_FILE_NAME
from workbench.capture.trace_link import load_trace
from workbench.errors import BundleError
from workbench.trace import TraceData

BUNDLE_FORMAT = "workbench.run"
BUNDLE_FORMAT_VERSION = 1
RUN_FILE = "run.json"
ENVIRONMENT_FILE = "environment.json"
RUN_MAX_BYTES = 64 << 20  # the largest run.json read (samples, diagnostics, history: a few MB at most)
ENVIRONMENT_MAX_BYTES = 16 << 20  # the largest environment.json read

_TEXT = ((str,), "a string")
_TEXT_OR_NULL = ((str, type(None)), "a string or null")
_OBJECT = ((dict,), "an object")
_OBJECT_OR_NULL = ((dict, type(None)), "an object or null")
_LIST_OR_NULL = ((list, type(None)), "a list or null")
_INT = ((int,), "an integer")
_INT_OR_NULL = ((int, type(None)), "an integer or null")
_NUMBER = ((int, float), "a number")
_NUMBER_OR_NULL = ((int, float, type(None)), "a number or null")
# The run record's fields (``RunRecord.to_dict``, the face's ``history``): each present must be of
# its type (a missing one is for the record's class to default or refuse: ``incomplete_record``).
RECORD_FIELDS: dict[str, tuple[tuple[type, ...], str]] = {
    "name": _TEXT,
    "device": _TEXT,
    "created_at": _TEXT,
    "timing": _OBJECT,
    "cold_ms": _NUMBER,
    "warmup": _INT,
    "repeat": _INT,
    "compile": _OBJECT,
    "settings": _OBJECT,
    "memory": _OBJECT,
    "profiler_warmup": _TEXT,
    "trace_note": _TEXT_OR_NULL,
    "traced_timing": _OBJECT_OR_NULL,
    "trace_repeat": _INT_OR_NULL,
    "profiler_overhead": _NUMBER_OR_NULL,
    "health": _OBJECT_OR_NULL,
    "profiler_stderr": _TEXT_OR_NULL,
    "expected_calls": _INT_OR_NULL,
    "history": _OBJECT_OR_NULL,
    "cells": _OBJECT_OR_NULL,
    "module_names": _OBJECT_OR_NULL,
    "optimizer_params": _LIST_OR_NULL,  # the parameters each optimizer's step visited (trace.optimizer_params)
    "statements": _OBJECT_OR_NULL,  # the traced pass's statement lines (trace.statements.StatementLines)
}


@dataclass(frozen=True)
class BundleContents:
    """What a bundle folder holds: the run's record (``RunRecord.to_dict``'s layout, the
    environment back in it, ``trace_path`` made absolute) and its parsed trace data."""

    folder: Path
    record: dict[str, Any]
    trace: TraceData | None


# -- writing -------------------------------------------------------------------------------------
def save_bundle(record: dict[str, Any], trace_path: str | None, path: str | Path) -> Path:
    """Write ``record`` (a run's ``to_dict``) and a copy of its trace file into the folder ``path``.

    Everything is checked before the first byte is written (the folder writable, the trace and the
    memory snapshot regular files, the record serialisable); each file goes to a temporary file
    first and all are renamed into place at the end, ``run.json`` last."""
    folder = files.as_path(path, "run bundle folder", error=BundleError)
    _refuse_non_folder(folder)
    record = dict(record)
    env = record.pop("environment", None)
    if not isinstance(env, dict):
        raise BundleError(
            f"cannot save a run bundle to {str(folder)!r}: the run's environment is "
            f"{type(env).__name__}, not an object (a dict); nothing was saved"
        )
    trace_source = _source(trace_path, "the run's trace file") if trace_path is not None else None
    if trace_path is not None and trace_source is None:
        raise BundleError(f"the run's trace file {str(trace_path)!r} is gone; profile again to save a bundle")
    memory = dict(record.get("memory") or {})
    snapshot = memory.get("snapshot_path")
    snapshot_source = _source(snapshot, "the run's memory snapshot") if isinstance(snapshot, str) else None
    files.check_writable(
        folder,
        "run bundle folder",
        error=BundleError,
        action="nothing was saved",
        fix="make it writable or save the run to another folder",
    )
    record["trace_path"] = TRACE_FILE_NAME if trace_path is not None else None
    if snapshot_source is not None:
        from workbench.capture.memory_capture import SNAPSHOT_FILE_NAME

        memory = {**memory, "snapshot_path": SNAPSHOT_FILE_NAME}
    record["memory"] = memory
    try:
        env_text = json.dumps(env, indent=1, default=str)
        run_text = json.dumps(
            {
                "format": BUNDLE_FORMAT,
                "format_version": BUNDLE_FORMAT_VERSION,
                "workbench_version": __version__,
                "run": record,
            },
            indent=1,
            default=str,
        )
    except (TypeError, ValueError, RecursionError) as exc:
        raise BundleError(
            f"the run record cannot be written as JSON ({type(exc).__name__}: {exc}); nothing was saved to "
            f"{str(folder)!r}"
        ) from None
    staged: list[tuple[Path, Path]] = []
    action = "nothing was saved (the folder is as it was)"
    try:
        if trace_source is not None:
            staged += _stage_copy(trace_source, folder / TRACE_FILE_NAME, "the run's trace file", action)
        if snapshot_source is not None:
            from workbench.capture.memory_capture import SNAPSHOT_FILE_NAME

            staged += _stage_copy(snapshot_source, folder / SNAPSHOT_FILE_NAME, "the run's memory snapshot", action)
        for name, text in ((ENVIRONMENT_FILE, env_text), (RUN_FILE, run_text)):
            target = folder / name
            tmp = files.write_atomic(
                target, text, f"run bundle file {name}", error=BundleError, mkdir=False, action=action, commit=False
            )
            staged.append((tmp, target))
    except BaseException:
        files.discard(staged)
        raise
    files.commit(staged, f"the run bundle {str(folder)!r}", error=BundleError)
    return folder


def _refuse_non_folder(folder: Path) -> None:
    try:
        st = os.stat(folder)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise BundleError(
                f"cannot save a run bundle to {str(folder)!r}: it is a symlink loop; remove the link or give "
                "another folder path; nothing was saved"
            ) from None
        return  # missing (created), or said by the write check
    if stat.S_ISREG(st.st_mode):
        raise BundleError(f"cannot save a run bundle to {str(folder)!r}: it is a file; give a folder path")
    if not stat.S_ISDIR(st.st_mode):
        raise BundleError(
            f"cannot save a run bundle to {str(folder)!r}: it is {files.file_kind(st.st_mode)}, not a folder; "
            "give a folder path; nothing was saved"
        )


def _source(name: str | os.PathLike, what: str) -> Path | None:
    """A file to copy into the bundle: None where it does not exist; a BundleError where it is not
    a regular file (copying a FIFO or a device could block or never end)."""
    p = files.as_path(name, what, error=BundleError)
    if files.check_regular(p, what, max_bytes=files.UNBOUNDED, error=BundleError) is None:
        return None
    return p


def _stage_copy(source: Path, target: Path, what: str, action: str) -> list[tuple[Path, Path]]:
    """The (temporary, target) pair of a copy of ``source``; none when ``source`` is the target
    already (a bundle saved again into its own folder)."""
    try:
        if source.resolve() == target.resolve():
            return []
    except (OSError, RuntimeError):
        pass
    tmp = files.copy_atomic(source, target, what, error=BundleError, action=action, commit=False)
    return [(tmp, target)]


# -- reading -------------------------------------------------------------------------------------
def _read_json(path: Path, what: str, max_bytes: int) -> Any:
    data = files.read_bytes(path, what, max_bytes=max_bytes, error=BundleError, lock=False)
    if data is None:
        raise BundleError(
            f"{what} missing: {str(path)!r} does not exist; a run bundle is the folder "
            "ProfileRun.save(path) writes — save the run again"
        )
    try:
        return json.loads(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise BundleError(
            f"{what} {str(path)!r} is not readable JSON (not UTF-8 text: {exc}); save the run again"
        ) from None
    except (ValueError, RecursionError) as exc:
        raise BundleError(f"{what} {str(path)!r} is not readable JSON ({exc}); save the run again") from None


def read_bundle(path: str | Path) -> BundleContents:
    """The record and the parsed trace of the bundle folder ``path``; a ``BundleError`` saying what
    is wrong for a folder that is not a readable bundle."""
    folder = files.as_path(path, "run bundle", error=BundleError)
    _check_folder(folder)
    doc = _read_json(folder / RUN_FILE, "run record", RUN_MAX_BYTES)
    _check_version(doc, folder)
    record = dict(doc["run"])
    _check_fields(record, folder)
    environment = _read_json(folder / ENVIRONMENT_FILE, "environment record", ENVIRONMENT_MAX_BYTES)
    if not isinstance(environment, dict):
        raise BundleError(
            f"environment record {str(folder / ENVIRONMENT_FILE)!r} holds a JSON "
            f"{_json_type(environment)}, not an object; the bundle was edited or written by something "
            "else: save the run again"
        )
    record["environment"] = environment
    trace, note = None, record.get("trace_note") or ""
    if record.get("trace_path"):
        trace_file = _inside(folder, record["trace_path"], "trace")
        if files.check_regular(trace_file, "the bundle's trace", max_bytes=files.UNBOUNDED, error=BundleError) is None:
            raise BundleError(
                f"the bundle {str(folder)!r} names trace {record['trace_path']!r} but "
                "the file is missing; copy the whole folder, or profile again"
            )
        record["trace_path"] = str(trace_file)
        trace, note = load_trace(trace_file, strict=True)
    record["trace_note"] = note
    memory = record.get("memory")
    if isinstance(memory, dict) and isinstance(memory.get("snapshot_path"), str):  # memory=True on CUDA
        snapshot = _inside(folder, memory["snapshot_path"], "memory snapshot")
        found = files.check_regular(
            snapshot, "the bundle's memory snapshot", max_bytes=files.UNBOUNDED, error=BundleError
        )
        record["memory"] = {**memory, "snapshot_path": str(snapshot) if found is not None else None}
    return BundleContents(folder=folder, record=record, trace=trace)


def _check_folder(folder: Path) -> None:
    """The bundle path must be a folder (links followed): anything else is said, naming what it is."""
    try:
        st = os.stat(folder)
    except FileNotFoundError:
        link = " (a symlink to nothing)" if os.path.islink(folder) else ""
        raise BundleError(
            f"no run bundle at {str(folder)!r}: not a folder{link}. Pass the folder that "
            "run.save(path) / %%gpuprofile's run.save wrote"
        ) from None
    except OSError as exc:
        kind = "a symlink loop" if exc.errno == errno.ELOOP else f"not readable ({exc.strerror or exc})"
        raise BundleError(
            f"no run bundle at {str(folder)!r}: not a folder, {kind}. Pass the folder that "
            "run.save(path) / %%gpuprofile's run.save wrote"
        ) from None
    if not stat.S_ISDIR(st.st_mode):
        kind = "a file" if stat.S_ISREG(st.st_mode) else (files.file_kind(st.st_mode) or "not a regular file")
        raise BundleError(
            f"no run bundle at {str(folder)!r}: not a folder ({kind}). Pass the folder that "
            "run.save(path) / %%gpuprofile's run.save wrote"
        )


def incomplete_record(folder: Path, exc: Exception) -> BundleError:
    """The error for a bundle whose record lacks or mistypes a field."""
    return BundleError(
        f"run record {str(Path(folder) / RUN_FILE)!r} (the bundle {str(folder)!r}) is incomplete "
        f"({type(exc).__name__}: {exc}): a field is missing or holds what the run cannot read; "
        "save the run again"
    )


def _json_type(value: Any) -> str:
    names = {dict: "object", list: "array", str: "string", bool: "boolean", type(None): "null"}
    return names.get(type(value), "number" if isinstance(value, (int, float)) else type(value).__name__)


def _check_fields(record: dict[str, Any], folder: Path) -> None:
    """Each field of ``RECORD_FIELDS`` present must be of its type: a clear error here, naming the
    file and the field, not a template crash or a raw exception later."""
    run_file = str(folder / RUN_FILE)
    for key, (types, described) in RECORD_FIELDS.items():
        if key not in record:
            continue
        value = record[key]
        ok = isinstance(value, types) and not isinstance(value, bool)
        if ok and isinstance(value, int) and abs(value) >= 2**63:
            ok = False
        if not ok:
            shown = repr(value)
            shown = shown if len(shown) <= 60 else shown[:57] + "..."
            raise BundleError(
                f"run record {run_file!r} (the bundle {str(folder)!r}) has a {key} of type "
                f"{type(value).__name__} ({shown}); it must be {described}. The bundle was edited or "
                "written by something else: fix that field or save the run again"
            )
    trace_path = record.get("trace_path")
    if trace_path is not None and not isinstance(trace_path, str):
        raise BundleError(
            f"run record {run_file!r} (the bundle {str(folder)!r}) names a trace_path of type "
            f"{type(trace_path).__name__}; it must be a file name inside the bundle"
        )
    memory = record.get("memory")
    if isinstance(memory, dict) and not isinstance(memory.get("snapshot_path"), (str, type(None))):
        raise BundleError(
            f"run record {run_file!r} names a memory.snapshot_path of type "
            f"{type(memory['snapshot_path']).__name__}; it must be a file name inside the bundle (or null)"
        )


def _inside(folder: Path, name: str, what: str) -> Path:
    """``folder / name``, refused unless it resolves (links followed) to a file inside ``folder``:
    a bundle may only name its own files."""
    try:
        root = folder.resolve()
        target = (folder / name).resolve()
    except (OSError, RuntimeError):  # a symlink loop on the way
        raise BundleError(
            f"the bundle {str(folder)!r} names {what} file {name!r}, which is a symlink loop: refused "
            "before opening it; copy the real file into the bundle"
        ) from None
    if Path(name).is_absolute() or not target.is_relative_to(root) or target == root:
        raise BundleError(
            f"the bundle {str(folder)!r} names {what} file {name!r}, which is outside the "
            "bundle; a bundle may only name files inside its own folder (as ProfileRun.save "
            "writes it). Refused: copy the file into the bundle and name it relative to it"
        )
    return folder / name


def _check_version(doc: Any, folder: Path) -> None:
    run_file = str(folder / RUN_FILE)
    if not isinstance(doc, dict):
        raise BundleError(
            f"{run_file!r} holds a JSON {_json_type(doc)}, not an object: it is not a workbench run record "
            f"(expected format {BUNDLE_FORMAT!r}); save the run again"
        )
    if doc.get("format") != BUNDLE_FORMAT or "run" not in doc:
        raise BundleError(f"{run_file!r} is not a workbench run record (expected format {BUNDLE_FORMAT!r})")
    version = doc.get("format_version")
    wrote = doc.get("workbench_version")
    by = f"workbench {wrote}" if isinstance(wrote, str) and wrote else "a workbench that did not record its version"
    if version != BUNDLE_FORMAT_VERSION or isinstance(version, bool):
        if isinstance(version, int) and not isinstance(version, bool):
            age = "a newer" if version > BUNDLE_FORMAT_VERSION else "an older"
            which = f"written by {by} ({age} format)"
        else:
            which = f"written by {by}; its format version is not a version number"
        raise BundleError(
            f"run bundle {str(folder)!r} has format version {version!r}, {which}; this workbench "
            f"({__version__}) reads version {BUNDLE_FORMAT_VERSION}. Load it with the workbench version "
            "that wrote it, or profile again and save a new bundle"
        )
    if not isinstance(doc["run"], dict):
        raise BundleError(
            f"{run_file!r}: its 'run' field holds a JSON {_json_type(doc['run'])}, not an object (the run "
            "record); the bundle was edited or written by something else: save the run again"
        )
