from __future__ import annotations

import pytest


@pytest.fixture
def judged_as_recorded(tmp_path, monkeypatch):
    """A recorded run is judged against the CPU ceiling it was recorded with: none is recorded in the
    bundles (tests/data/record_planted_runs.py profiles with an empty cache folder), so the documented
    default. A ceiling this machine measured and cached (``workbench.devices.measure_cpu_ceiling``, in
    ~/.cache/workbench) would otherwise judge a run recorded on the same CPU model differently here."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "no-cached-ceiling"))
