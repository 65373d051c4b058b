"""Where the analysis tests find real traces.

``LOCAL`` maps a shared trace set to its copy in ``tests/data/gpu`` (same bytes once decompressed; checked
against ``../shared/traces/manifest.json``'s sha256). Sets not copied there are read from the shared folder
(``../shared/traces/<set>`` from the repository root, or ``$WORKBENCH_SHARED_TRACES``) and skipped, with the
reason, when it is absent: CI is only sure to have ``tests/data``.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
HTA_DIR = REPO / "tests" / "data" / "hta"
GPU_DIR = REPO / "tests" / "data" / "gpu"
SHARED = Path(os.environ.get("WORKBENCH_SHARED_TRACES", REPO.parent / "shared" / "traces"))

LOCAL = {
    "hta_a100_alexnet": GPU_DIR / "a100_alexnet.json.gz",
    "hta_v100_ddp_resnet_1rank": GPU_DIR / "v100_ns_resolution.json.gz",
    "kineto_v100_resnet50_2021": GPU_DIR / "v100_resnet50_2021.json.gz",
    "param_v100_dlrm_8rank": GPU_DIR / "dlrm_8rank",
    "tracelens_h100_bert_small": GPU_DIR / "h100_bert_small.json.gz",
    "tracelens_mi300x_sglang_prefilldecode": GPU_DIR / "mi300x_sglang.json.gz",
}
_CACHE: dict = {}


def trace_files(set_name: str) -> list[Path]:
    """The trace files of one set: the local copy, else the shared folder's; skips when neither exists."""
    local = LOCAL.get(set_name)
    if local is not None and local.exists():
        return sorted(local.glob("*.json*")) if local.is_dir() else [local]
    shared = SHARED / set_name
    if shared.is_dir():
        return sorted(p for p in shared.iterdir() if p.name.endswith((".json", ".json.gz")))
    pytest.skip(f"trace set {set_name!r} has no copy in tests/data/gpu and {SHARED} is absent")


def load_set(set_name: str):
    """Each set is loaded once per session (the loader is not what these tests measure)."""
    if set_name not in _CACHE:
        import workbench as wb

        files = trace_files(set_name)
        _CACHE[set_name] = wb.load_trace([str(f) for f in files] if len(files) > 1 else str(files[0]))
    return _CACHE[set_name]
