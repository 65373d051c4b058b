"""Recorded runs of the planted workloads: the cases, where their bundles lie, and loading them back.

``tests/data/record_planted_runs.py`` profiles every case once, on a quiet machine, and saves the run
(``run.save``) under ``tests/data/planted_runs/<case>/`` (tests/workloads/planted.py) or
``tests/data/corpus_runs/<case>/`` (corpus.py's tuning half). A diagnosis test loads the bundle
(``wb.load_run``: the hypotheses are recomputed from the saved clean samples, cold call, traced pass,
compile diagnostics, health check and trace) and judges the ranking: the same on a busy laptop, a
shared CI runner and the machine that recorded it. The ``judged_as_recorded`` fixture
(tests/workloads/conftest.py) keeps this machine's cached CPU ceiling out of the judgement, as the
recorder did.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable

DATA = Path(__file__).resolve().parents[1] / "data"
PLANTED_RUNS = DATA / "planted_runs"
CORPUS_RUNS = DATA / "corpus_runs"

# what tests/workloads/test_planted.py profiled live: the builder's own options override these
PLANTED_OPTIONS = {"warmup": 3, "repeat": 20, "threads": 1}


def case_id(category: str | None, name: str) -> str:
    return f"{category or 'clean'}-{name}"


@dataclass(frozen=True)
class Case:
    category: str | None  # None: a clean workload
    name: str
    build: Callable[[], tuple[Callable[[], Any], dict]] = field(repr=False, compare=False)
    options: dict = field(default_factory=dict, compare=False)

    @property
    def id(self) -> str:
        return case_id(self.category, self.name)


def planted_cases() -> list[Case]:
    """tests/workloads/planted.py in the order test_planted profiled it live: planted by category, then clean."""
    from tests.workloads.planted import CLEAN, PLANTED

    out = [
        Case(category, b.__name__, b, dict(PLANTED_OPTIONS))
        for category, builders in sorted(PLANTED.items())
        for b in builders
    ]
    return out + [Case(None, b.__name__, b, dict(PLANTED_OPTIONS)) for b in CLEAN]


def corpus_cases() -> list[Case]:
    """corpus.py's tuning half at each workload's own settings (as test_corpus profiled it live)."""
    from tests.workloads.corpus import workloads

    return [Case(w.category, w.name, w.build, {}) for w in workloads("tuning")]


def load_recorded(folder: Path, case: Case):
    """The recorded run of ``case`` (a ``ProfileRun``), loaded from its bundle under ``folder``."""
    import workbench as wb

    path = folder / case.id
    if not path.is_dir():
        raise AssertionError(
            f"no recorded run for {case.id} in {folder}: record it with "
            f"`.venv/bin/python tests/data/record_planted_runs.py --only {case.name}`"
        )
    return wb.load_run(path)


@lru_cache(maxsize=None)
def manifest(folder: Path) -> dict[str, Any]:
    """What the recorder noted per case (attempts, machine noise, fresh-buffer cost ratio, live ranking)."""
    path = folder / "manifest.json"
    return json.loads(path.read_text()) if path.exists() else {}
