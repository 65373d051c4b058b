"""Where the parity tests find real traces: ``tests/data/traces/<set>`` (small sets copied by the
reader's engineer), else the shared set at ``../shared/traces/<set>`` relative to the repository root."""
from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
HTA_DIR = REPO / "tests" / "data" / "hta"
CANDIDATES = (REPO / "tests" / "data" / "traces", REPO.parent / "shared" / "traces")
_CACHE: dict = {}


def trace_path(set_name: str) -> Path:
    for base in CANDIDATES:
        if (base / set_name).is_dir():
            return base / set_name
    pytest.skip(f"trace set {set_name!r} is neither in tests/data/traces nor in ../shared/traces")


def load_set(set_name: str):
    """Each set is loaded once per session (the loader is not what these tests measure)."""
    if set_name not in _CACHE:
        import workbench as wb

        path = trace_path(set_name)
        files = sorted(p for p in path.iterdir() if p.name.endswith((".json", ".json.gz")))
        _CACHE[set_name] = wb.load_trace([str(f) for f in files] if len(files) > 1 else str(files[0]))
    return _CACHE[set_name]
