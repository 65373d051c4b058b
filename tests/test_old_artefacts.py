"""A run bundle and a study folder written before the layout move (workbench 0.1.0 at commit
71863f9, by tests/data/old_layout/make_old_layout.py: the public objects in workbench/facade.py and
profile_run.py, the demo in workbench/demo.py) load after it. Nothing in them is pickled: they are JSON
and trace files, and the one module path they record, the study baseline's ``workbench.demo``, is read
as ``workbench.workloads.demo``."""

from __future__ import annotations

import shutil
import warnings
from pathlib import Path

import pytest

import workbench as wb

OLD = Path(__file__).resolve().parent / "data" / "old_layout"


def test_an_old_run_bundle_loads(tmp_path: Path) -> None:
    folder = shutil.copytree(OLD / "run_bundle", tmp_path / "run")
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        run = wb.load_run(folder)
    assert type(run).__module__ == "workbench.api.run"
    assert run.timing.n == 3 and run.timing.median_ms > 0
    assert len(run.trace.cpu_ops) > 0
    assert wb.render.text(run)


def test_an_old_study_opens_and_its_baseline_callable_at_the_old_module_path_resolves(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    from workbench.workloads import demo

    folder = shutil.copytree(OLD / "study", tmp_path / "study")
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        study = wb.Study.open(folder)
        base = study.baselines[-1]
        assert base.callable_ref["module"] == "workbench.demo"  # as written before the move
        fn, make_inputs = study._callables(base)
    assert fn is demo.workload and make_inputs is demo.make_inputs
    assert study.hypotheses is not None
