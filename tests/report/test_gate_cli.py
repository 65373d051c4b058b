"""``workbench report`` on bad input: exit 2 before anything is profiled or written; a failing
workload exits 3 (4 past --time-limit) with a clear message; phase lines on stderr."""

import json
import math
import os
import sys

import pytest

from workbench.cli import main
from workbench.report import pipeline, sampler
from workbench.report.regression import SampleSet
from workbench.report.workload import resolve_workload

BAD_WORKLOADS = """\
import os
import signal
import sys
import time


def boom():
    raise ValueError("planted failure")


def leave():
    sys.exit(3)


def stall():
    time.sleep(60)


def fine():
    return sum(range(100))


def die():
    os.kill(os.getpid(), signal.SIGKILL)


def vanish():
    os._exit(0)


def slow():
    time.sleep(0.25)
"""


@pytest.fixture
def no_profiling(monkeypatch):
    """Fail the test if the workload is timed or profiled: bad input must be found first."""

    def refuse(*args, **kwargs):
        raise AssertionError("the workload was run before the input was checked")

    monkeypatch.setattr(sampler, "sample_processes", refuse)
    monkeypatch.setattr(pipeline, "profile_workload", refuse)


def _write_summary(folder, doc):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "summary.json").write_text(json.dumps(doc), encoding="utf-8")
    return folder


def _samples(environment):
    return SampleSet(
        processes=((5.0, 5.1, 4.9), (5.2, 5.0, 5.1), (4.8, 5.0, 5.0)),
        environment=environment,
        workload="workbench.workloads.demo:workload",
    ).to_dict()


@pytest.fixture(scope="module")
def here_env():
    return sampler.fresh_gate_environment()  # what a fresh worker process records


@pytest.mark.parametrize(
    "doc,match",
    [
        (None, "no such folder"),
        ("{broken", "not a readable report summary"),
        ({"timing": {"median_ms": 7.3}}, "no per-process samples"),
        ({"timing": {"median_ms": math.nan}}, "median of nan ms"),
        ({"timing": {"median_ms": 0}}, "median of 0 ms"),
        ({"timing": {"median_ms": -1.5}}, "median of -1.5 ms"),
        ({"timing": {"median_ms": 1e308}}, "median of 1e+308 ms"),
    ],
)
def test_an_unusable_earlier_report_exits_2_before_profiling(tmp_path, capsys, no_profiling, doc, match):
    old = tmp_path / "old"
    if isinstance(doc, str):
        old.mkdir()
        (old / "summary.json").write_text(doc)
    elif doc is not None:
        _write_summary(old, doc)
    out = tmp_path / "new"
    assert main(["report", "--out", str(out), "--compare-to", str(old), "--fail-on-regression", "5"]) == 2
    err = capsys.readouterr().err
    assert match in err and "Traceback" not in err
    assert not out.exists()


@pytest.mark.parametrize("pct", ["-5", "nan", "-inf"])
def test_a_negative_or_nan_threshold_exits_2(tmp_path, capsys, no_profiling, here_env, pct):
    old = _write_summary(tmp_path / "old", {"samples": _samples(here_env)})
    assert (
        main(["report", "--out", str(tmp_path / "new"), "--compare-to", str(old), f"--fail-on-regression={pct}"]) == 2
    )
    assert "percentage >= 0" in capsys.readouterr().err
    assert not (tmp_path / "new").exists()


def test_a_report_from_another_environment_is_refused_before_profiling(tmp_path, capsys, no_profiling, here_env):
    faster = dict(here_env, cpu_model="A Machine Ten Times Faster", threads=64)
    old = _write_summary(tmp_path / "old", {"timing": {"median_ms": 0.5}, "samples": _samples(faster)})
    assert main(["report", "--out", str(tmp_path / "new"), "--compare-to", str(old), "--fail-on-regression", "5"]) == 2
    err = capsys.readouterr().err
    assert "another environment" in err and "A Machine Ten Times Faster" in err and "threads:" in err
    assert "--allow-environment-change" in err


def test_a_report_of_another_workload_is_refused_before_profiling(tmp_path, capsys, no_profiling, here_env):
    old = _write_summary(tmp_path / "old", {"samples": _samples(here_env)})  # of workbench.workloads.demo:workload
    assert (
        main(
            [
                "report",
                "--workload",
                "workbench.workloads.demo:run",
                "--out",
                str(tmp_path / "new"),
                "--compare-to",
                str(old),
            ]
        )
        == 2
    )
    assert "workload: 'workbench.workloads.demo:workload' vs 'workbench.workloads.demo:run'" in capsys.readouterr().err


def test_the_new_report_may_not_overwrite_the_old(tmp_path, capsys, no_profiling, here_env):
    old = _write_summary(tmp_path / "old", {"samples": _samples(here_env)})
    before = (old / "summary.json").read_bytes()
    assert main(["report", "--out", str(old), "--compare-to", str(old), "--fail-on-regression", "5"]) == 2
    assert "would overwrite" in capsys.readouterr().err
    assert (old / "summary.json").read_bytes() == before and sorted(p.name for p in old.iterdir()) == ["summary.json"]


@pytest.mark.parametrize(
    "extra,match",
    [(["--processes", "1"], "--processes >= 2"), (["--bundle", "somewhere"], "a --bundle report has none")],
)
def test_a_gate_without_samples_from_processes_exits_2(tmp_path, capsys, no_profiling, here_env, extra, match):
    old = _write_summary(tmp_path / "old", {"samples": _samples(here_env)})
    assert main(["report", "--out", str(tmp_path / "new"), "--compare-to", str(old), *extra]) == 2
    assert match in capsys.readouterr().err


def test_an_old_report_from_one_process_exits_2(tmp_path, capsys, no_profiling, here_env):
    one = SampleSet(processes=((5.0, 5.1),), environment=here_env).to_dict()
    old = _write_summary(tmp_path / "old", {"samples": one})
    assert main(["report", "--out", str(tmp_path / "new"), "--compare-to", str(old)]) == 2
    assert "samples from 1 process" in capsys.readouterr().err


@pytest.fixture
def workload_folder(tmp_path, monkeypatch):
    """A folder holding a workload module, made the current folder and NOT on sys.path."""
    name = f"wl_{tmp_path.name.replace('-', '_')}"
    (tmp_path / f"{name}.py").write_text(BAD_WORKLOADS)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", ".", str(tmp_path))])
    monkeypatch.delenv("PYTHONPATH", raising=False)
    yield name
    sys.modules.pop(name, None)


def test_the_environment_checked_first_is_the_one_the_samples_record(workload_folder, here_env):
    samples = sampler.sample_processes(f"{workload_folder}:fine", processes=1, warmup=0, repeat=3)
    assert samples.environment == here_env and samples.n_processes == 1 and len(samples.processes[0]) == 3


def test_a_workload_in_the_current_folder_imports_without_pythonpath(workload_folder):
    func, args = resolve_workload(f"{workload_folder}:fine")
    assert func() == 4950 and args == ()
    assert os.getcwd() in sys.path


@pytest.mark.parametrize(
    "fn,code,match",
    [
        ("boom", 3, "raised ValueError: planted failure in process 1/1"),
        ("leave", 3, "called sys.exit(3) in process 1/1"),
        ("die", 3, "was killed by signal 9 (process 1/1)"),
        ("vanish", 3, "exited with status 0 without a result (process 1/1)"),
    ],
)
def test_a_failing_workload_exits_3_with_the_reason(workload_folder, capsys, fn, code, match):
    assert main(["report", "--workload", f"{workload_folder}:{fn}", "--out", "r", "--processes", "1"]) == code
    err = capsys.readouterr().err
    assert match in err and "workbench report: timing the workload in a fresh process (1/1)..." in err
    if fn == "boom":
        assert f"{workload_folder}.py" in err and 'raise ValueError("planted failure")' in err
    assert not os.path.exists("r")


def test_a_workload_module_that_raises_on_import_exits_3(workload_folder, capsys):
    with open(f"{workload_folder}_broken.py", "w") as f:
        f.write("x = 1 / 0\n")
    try:
        assert main(["report", "--workload", f"{workload_folder}_broken:f", "--out", "r"]) == 3
    finally:
        sys.modules.pop(f"{workload_folder}_broken", None)
    err = capsys.readouterr().err
    assert f"importing the workload module '{workload_folder}_broken' raised ZeroDivisionError" in err
    assert not os.path.exists("r")


def test_a_failing_workload_in_this_process_exits_3(workload_folder, capsys):
    assert main(["report", "--workload", f"{workload_folder}:leave", "--out", "r", "--processes", "0"]) == 3
    err = capsys.readouterr().err
    assert "profiling the workload with the trace..." in err and "called sys.exit(3)" in err


def test_a_workload_past_the_time_limit_exits_4(workload_folder, capsys):
    assert (
        main(
            ["report", "--workload", f"{workload_folder}:stall", "--out", "r", "--processes", "1", "--time-limit", "2"]
        )
        == 4
    )
    assert "ran past the time limit of 2 s in process 1/1" in capsys.readouterr().err
    assert (
        main(
            ["report", "--workload", f"{workload_folder}:stall", "--out", "r", "--processes", "0", "--time-limit", "1"]
        )
        == 4
    )
    assert "ran past the time limit of 1 s" in capsys.readouterr().err


@pytest.mark.parametrize("limit", ["0", "-3", "nan"])
def test_a_bad_time_limit_exits_2(tmp_path, capsys, no_profiling, limit):
    assert main(["report", "--out", str(tmp_path / "r"), f"--time-limit={limit}"]) == 2
    assert "--time-limit" in capsys.readouterr().err


def test_samples_beyond_any_timing_are_refused_not_turned_into_nan(tmp_path, capsys, no_profiling, here_env):
    doc = _samples(here_env)
    doc["processes"] = [{"samples_ms": [1e308, 1e308, 1e308]} if i == 0 else p for i, p in enumerate(doc["processes"])]
    old = _write_summary(tmp_path / "old", {"samples": doc})
    assert main(["report", "--out", str(tmp_path / "new"), "--compare-to", str(old), "--fail-on-regression", "5"]) == 2
    err = capsys.readouterr().err
    assert "unusable samples" in err and "1e+308" in err and "nan" not in err and "Traceback" not in err


def test_a_slow_workload_says_it_is_still_running(workload_folder, capsys, monkeypatch):
    monkeypatch.setattr(sampler, "HEARTBEAT_S", 0.5)
    lines = []
    samples = sampler.sample_processes(
        f"{workload_folder}:slow", processes=1, warmup=2, repeat=6, progress=lines.append
    )
    assert samples.n_processes == 1
    assert any("process 1/1 still timing the workload" in line and "no --time-limit" in line for line in lines), lines


def test_ctrl_c_ends_in_one_line_saying_where_and_what_was_kept(tmp_path, capsys, monkeypatch):
    from workbench.report import pipeline

    def interrupted(*args, **kwargs):
        progress = kwargs["progress"]
        progress("timing the workload in a fresh process (1/3)...")
        raise KeyboardInterrupt

    monkeypatch.setattr(pipeline, "build_report", interrupted)
    out = tmp_path / "r"
    assert main(["report", "--out", str(out)]) == 130
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == (
        f"workbench report: interrupted while timing the workload in a fresh process (1/3); "
        f"nothing was written to {out}"
    )
    assert not any("Traceback" in line for line in err)
