from __future__ import annotations

import warnings
from pathlib import Path

import pytest

DATA = Path(__file__).resolve().parents[1] / "data"
GPU = DATA / "gpu"
CPU = DATA / "cpu"
BAD = DATA / "bad"


@pytest.fixture(scope="session")
def load():
    """read_trace with results cached per (path, options) for the session."""
    from workbench.trace import read_trace

    cache = {}

    def _load(path, **options):
        key = (str(path), tuple(sorted(options.items())))
        if key not in cache:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                cache[key] = read_trace(path, **options)
        return cache[key]

    return _load
