"""Run bundles: a folder with run.json (format version), environment.json and trace.json.gz.

This module reads and writes the folder only; the run record that the folder holds is built by
its class (``workbench.capture.run.RunRecord.load``), so that the bundle knows no run type.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from workbench.capture.profiler_session import TRACE_FILE_NAME
from workbench.capture.trace_link import load_trace
from workbench.errors import BundleError
from workbench.trace import TraceData

BUNDLE_FORMAT = "workbench.run"
BUNDLE_FORMAT_VERSION = 1
RUN_FILE = "run.json"
ENVIRONMENT_FILE = "environment.json"


@dataclass(frozen=True)
class BundleContents:
    """What a bundle folder holds: the run's record (``RunRecord.to_dict``'s layout, the
    environment back in it, ``trace_path`` made absolute) and its parsed trace data."""

    folder: Path
    record: dict[str, Any]
    trace: TraceData | None


def save_bundle(record: dict[str, Any], trace_path: str | None, path: str | Path) -> Path:
    """Write ``record`` (a run's ``to_dict``) and a copy of its trace file into the folder ``path``."""
    folder = Path(path)
    if folder.exists() and not folder.is_dir():
        raise BundleError(f"cannot save a run bundle to {str(folder)!r}: it is a file; give a folder path")
    folder.mkdir(parents=True, exist_ok=True)
    record = dict(record)
    has_trace = trace_path is not None
    if trace_path is not None:
        source = Path(trace_path)
        if not source.exists():
            raise BundleError(f"the run's trace file {str(source)!r} is gone; profile again to save a bundle")
        target = folder / TRACE_FILE_NAME
        if source.resolve() != target.resolve():
            shutil.copyfile(source, target)
    record["trace_path"] = TRACE_FILE_NAME if has_trace else None
    record["memory"] = _save_snapshot(dict(record.get("memory") or {}), folder)
    env = record.pop("environment")
    _write_json(folder / ENVIRONMENT_FILE, env)
    _write_json(folder / RUN_FILE, {"format": BUNDLE_FORMAT, "format_version": BUNDLE_FORMAT_VERSION, "run": record})
    return folder


def _save_snapshot(memory: dict[str, Any], folder: Path) -> dict[str, Any]:
    """Copy the run's CUDA allocator snapshot (``memory=True``) into the bundle, named relative to it."""
    source = memory.get("snapshot_path")
    if not isinstance(source, str) or not Path(source).exists():
        return memory
    from workbench.capture.memory_capture import SNAPSHOT_FILE_NAME

    target = folder / SNAPSHOT_FILE_NAME
    if Path(source).resolve() != target.resolve():
        shutil.copyfile(source, target)
    return {**memory, "snapshot_path": SNAPSHOT_FILE_NAME}


def _write_json(path: Path, data: Any) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=1, default=str))
    tmp.replace(path)


def _read_json(path: Path, what: str) -> Any:
    if not path.exists():
        raise BundleError(
            f"{what} missing: {str(path)!r} does not exist; a run bundle is the folder "
            "ProfileRun.save(path) writes — save the run again"
        )
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise BundleError(f"{what} {str(path)!r} is not readable JSON ({exc}); save the run again") from exc


def read_bundle(path: str | Path) -> BundleContents:
    """The record and the parsed trace of the bundle folder ``path``; a ``BundleError`` saying what
    is wrong for a folder that is not a readable bundle."""
    folder = Path(path)
    if not folder.is_dir():
        raise BundleError(
            f"no run bundle at {str(folder)!r}: not a folder. Pass the folder that "
            "run.save(path) / %%gpuprofile's run.save wrote"
        )
    doc = _read_json(folder / RUN_FILE, "run record")
    _check_version(doc, folder)
    record = dict(doc["run"])
    _check_fields(record, folder)
    record["environment"] = _read_json(folder / ENVIRONMENT_FILE, "environment record")
    trace, note = None, record.get("trace_note", "")
    if record.get("trace_path"):
        trace_file = _inside(folder, record["trace_path"], "trace")
        if not trace_file.exists():
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
        record["memory"] = {**memory, "snapshot_path": str(snapshot) if snapshot.exists() else None}
    return BundleContents(folder=folder, record=record, trace=trace)


def incomplete_record(folder: Path, exc: Exception) -> BundleError:
    """The error for a bundle whose record lacks or mistypes a field."""
    return BundleError(f"run record in {str(folder)!r} is incomplete ({type(exc).__name__}: {exc}); save the run again")


def _check_fields(record: dict[str, Any], folder: Path) -> None:
    """Fields a report shows as text must be text: a clear error here, not a template crash."""
    for key in ("name", "device", "created_at"):
        if key in record and not isinstance(record[key], str):
            raise BundleError(
                f"run record in {str(folder)!r} has a {key} of type "
                f"{type(record[key]).__name__} ({record[key]!r:.60}); it must be a string. "
                "The bundle was edited or written by something else: save the run again"
            )
    if not isinstance(record.get("trace_path") or "", str):
        raise BundleError(
            f"run record in {str(folder)!r} names a trace_path of type "
            f"{type(record['trace_path']).__name__}; it must be a file name inside the bundle"
        )


def _inside(folder: Path, name: str, what: str) -> Path:
    """``folder / name``, refused unless it resolves (links followed) to a file inside ``folder``:
    a bundle may only name its own files."""
    root = folder.resolve()
    target = (folder / name).resolve()
    if Path(name).is_absolute() or not target.is_relative_to(root) or target == root:
        raise BundleError(
            f"the bundle {str(folder)!r} names {what} file {name!r}, which is outside the "
            "bundle; a bundle may only name files inside its own folder (as ProfileRun.save "
            "writes it). Refused: copy the file into the bundle and name it relative to it"
        )
    return folder / name


def _check_version(doc: Any, folder: Path) -> None:
    if not isinstance(doc, dict) or doc.get("format") != BUNDLE_FORMAT or "run" not in doc:
        raise BundleError(
            f"{str(folder / RUN_FILE)!r} is not a workbench run record (expected format {BUNDLE_FORMAT!r})"
        )
    version = doc.get("format_version")
    if version != BUNDLE_FORMAT_VERSION:
        raise BundleError(
            f"run bundle {str(folder)!r} has format version {version!r}; this workbench reads version "
            f"{BUNDLE_FORMAT_VERSION}. Load it with the workbench version that wrote it, or profile "
            "again and save a new bundle"
        )
