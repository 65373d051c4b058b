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


def test_a_run_pickled_when_profile_run_was_the_records_subclass_unpickles_holding_its_record() -> None:
    """0.1's ProfileRun subclassed the capture RunRecord, so its pickle holds the fields themselves
    (written at 82212e5: ``wb.profile(torch.mm, x, x, trace=False)``); it unpickles as today's run,
    which holds a RunRecord."""
    import pickle

    from workbench.capture.run import RunRecord

    old = pickle.loads((OLD / "profile_run_subclass_of_record.pkl").read_bytes())
    assert type(old) is wb.ProfileRun and type(old.record) is RunRecord
    assert old.name == "mm" and old.timing.n == 5 and old.cold_ms > 0 and old.trace is None
    assert old.memory == dict(old.record.memory)  # the memory analyses over the record's facts
    assert old.code is None and old.history is None
    assert [h.rule for h in old.hypotheses] == [h.rule for h in wb.ProfileRun(old.record).hypotheses]


def test_a_run_pickles_without_its_live_code_and_a_damaged_pickle_state_says_so() -> None:
    import pickle

    from workbench.errors import BundleError

    old = pickle.loads((OLD / "profile_run_subclass_of_record.pkl").read_bytes())
    live = wb.ProfileRun(old.record, code=lambda: None)  # a lambda cannot be pickled; it is not saved
    again = pickle.loads(pickle.dumps(live))
    assert again == live and again.code is None and again.timing == live.timing
    damaged = wb.ProfileRun.__new__(wb.ProfileRun)
    with pytest.raises(BundleError, match="lacks .*timing"):
        damaged.__setstate__({"name": "mm"})
