"""Where the shared real profiles of other tools' formats are (``../shared/formats`` beside the clone, or
``$WORKBENCH_SHARED_FORMATS``); tests that need them skip, saying why, where the folder is absent."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CANDIDATES = [Path(p) for p in (os.environ.get("WORKBENCH_SHARED_FORMATS"),) if p] + [
    REPO / "shared" / "formats",
    REPO.parent / "shared" / "formats",
]
FORMATS = next((p for p in CANDIDATES if (p / "manifest.json").exists()), None)
NSYS_FILES = ("h100_2gpu_1s.sqlite", "mfu_2gpu_before.sqlite", "mfu_2gpu_after.sqlite")
ROCPROF_FILE = "908_results.json.gz"


def shared(*parts: str) -> Path:
    if FORMATS is None:
        pytest.skip(
            "the shared profiles of other tools' formats are not here (../shared/formats beside the clone, "
            "or set WORKBENCH_SHARED_FORMATS)"
        )
    path = FORMATS.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"{path} is not in the shared formats folder")
    return path
