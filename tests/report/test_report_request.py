"""``ReportRequest``: what ``build_report`` is asked for, checked once when made; the keyword form
``build_report(out_dir, **options)`` makes the same request; the workload string is resolved once."""

import dataclasses
import math
import sys
from pathlib import Path

import pytest

import workbench.report.request as request_module
import workbench.report.workload as workload_module
from workbench.errors import InvalidArgumentError
from workbench.report import ReportRequest, build_report, pipeline
from workbench.report.request import DEFAULT_PROCESSES, ResolvedWorkload
from workbench.report.workload import DEFAULT_WORKLOAD

TINY_WORKLOAD = """\
def fine():
    return sum(range(100))
"""


@pytest.mark.parametrize(
    "options,match",
    [
        ({"repeat": 0}, r"repeat must be an integer >= 1 \(the timed calls; --repeat"),
        ({"repeat": 2.5}, "repeat must be an integer >= 1"),
        ({"repeat": True}, "repeat must be an integer >= 1"),
        ({"warmup": -1}, "warmup must be an integer >= 0"),
        ({"processes": -1}, "processes must be an integer >= 0"),
        ({"processes": "3"}, "processes must be an integer >= 0"),
        ({"fail_on_regression_pct": -5}, "percentage >= 0"),
        ({"fail_on_regression_pct": math.nan, "compare_to": "old"}, "percentage >= 0"),
        ({"fail_on_regression_pct": 5}, "--fail-on-regression needs --compare-to OLD_REPORT_DIR"),
        ({"gate_quantile": 1.0}, r"--gate-quantile takes a number in \[0, 1\)"),
        ({"gate_quantile": -0.1}, r"--gate-quantile takes a number in \[0, 1\)"),
        ({"gate_quantile": math.nan}, r"--gate-quantile takes a number in \[0, 1\)"),
        ({"gate_quantile": "p10"}, r"--gate-quantile takes a number in \[0, 1\)"),
        ({"time_limit_s": 0}, "--time-limit takes a number of seconds > 0"),
        ({"time_limit_s": -3}, "--time-limit takes a number of seconds > 0"),
        ({"time_limit_s": math.nan}, "--time-limit takes a number of seconds > 0"),
        ({"time_limit_s": "10"}, "--time-limit takes a number of seconds > 0"),
        ({"allocator_mode": "fast"}, "allocator mode must be one of steady, default; got 'fast'"),
        ({"allow_environment_change": True}, "--allow-environment-change needs --compare-to"),
        ({"compare_to": "old", "bundle": "run"}, "a --bundle report has none"),
        ({"compare_to": "old", "processes": 1}, "--compare-to needs --processes >= 2"),
        ({"experiments": "no"}, "experiments must be True or False"),
        ({"workload": 3}, "workload must be a string module:function"),
        ({"title": 3}, "title must be a string or None"),
        ({"bundle": 3}, "bundle must be a path"),
    ],
)
def test_a_bad_option_is_refused_when_the_request_is_made(options, match):
    with pytest.raises(InvalidArgumentError, match=match):
        ReportRequest("reports/r", **options)


def test_a_bad_allocator_environment_variable_is_refused_when_the_request_is_made(monkeypatch):
    monkeypatch.setenv("WORKBENCH_ALLOCATOR", "fast")
    with pytest.raises(InvalidArgumentError, match="WORKBENCH_ALLOCATOR must be one of steady, default"):
        ReportRequest("reports/r")


def test_a_request_holds_typed_values_and_cannot_change(monkeypatch):
    monkeypatch.delenv("WORKBENCH_ALLOCATOR", raising=False)
    r = ReportRequest("reports/r", compare_to="reports/old", fail_on_regression_pct=5, time_limit_s=30)
    assert r.out_dir == Path("reports/r") and r.compare_to == Path("reports/old") and r.bundle is None
    assert r.workload == DEFAULT_WORKLOAD and r.processes == DEFAULT_PROCESSES and r.repeat == 20
    assert r.fail_on_regression_pct == 5.0 and isinstance(r.fail_on_regression_pct, float)
    assert r.time_limit_s == 30.0 and isinstance(r.time_limit_s, float)
    assert r.allocator_mode == "steady"  # None: $WORKBENCH_ALLOCATOR, read when the request is made
    monkeypatch.setenv("WORKBENCH_ALLOCATOR", "default")
    assert ReportRequest("reports/r").allocator_mode == "default"
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.repeat = 5  # type: ignore[misc]
    assert ReportRequest("reports/r", time_limit_s=math.inf).time_limit_s == math.inf  # inf: no limit


@pytest.fixture
def seen(monkeypatch):
    """The request ``build_report`` builds the report from (nothing is run)."""
    got = []
    monkeypatch.setattr(pipeline, "_build", lambda req, say: got.append(req))
    return got


def test_the_keyword_form_and_the_request_form_make_the_same_request(seen, tmp_path):
    options = dict(workload="bench:step", repeat=5, warmup=1, processes=4, title="mine", experiments=False)
    build_report(tmp_path / "r", **options)
    build_report(str(tmp_path / "r"), **options)  # a str and a Path are the same folder
    build_report(out_dir=tmp_path / "r", **options)
    build_report(ReportRequest(tmp_path / "r", **options))
    assert len(seen) == 4 and all(req == seen[0] for req in seen)
    assert seen[0].repeat == 5 and seen[0].workload == "bench:step" and seen[0].experiments is False


def test_a_request_and_options_together_or_an_unknown_option_are_a_type_error(seen, tmp_path):
    with pytest.raises(TypeError, match="not both"):
        build_report(ReportRequest(tmp_path / "r"), repeat=5)
    with pytest.raises(TypeError, match="repeats"):
        build_report(tmp_path / "r", repeats=5)
    with pytest.raises(TypeError, match="out_dir twice"):
        build_report(tmp_path / "r", out_dir=tmp_path / "s")
    with pytest.raises(TypeError, match="out_dir"):
        build_report()
    assert seen == []


@pytest.fixture
def resolutions(monkeypatch):
    """Every resolution of a workload string in this process (the request's resolver, and the
    module's own, which other steps call), in order."""
    calls = []
    real = workload_module.resolve_workload

    def counting(spec):
        calls.append(spec)
        return real(spec)

    monkeypatch.setattr(request_module, "resolve_workload", counting)
    monkeypatch.setattr(workload_module, "resolve_workload", counting)
    return calls


def test_bad_input_is_refused_before_the_workload_is_resolved_or_anything_written(tmp_path, resolutions):
    with pytest.raises(InvalidArgumentError, match="repeat must be"):
        build_report(tmp_path / "r", repeat=0)
    with pytest.raises(InvalidArgumentError, match="unknown workload"):
        build_report(tmp_path / "r", workload="no_such_module_rq:f", processes=0)
    assert resolutions == ["no_such_module_rq:f"] and not (tmp_path / "r").exists()


def test_the_pipeline_hands_its_one_resolution_to_the_traced_run(tmp_path, resolutions, monkeypatch):
    given = []

    def stop(workload, **kwargs):
        given.append(workload)
        raise KeyboardInterrupt  # stop before the notebook: only the hand-over is under test

    monkeypatch.setattr(pipeline, "profile_workload", stop)
    with pytest.raises(KeyboardInterrupt):
        build_report(tmp_path / "r", workload="workbench.workloads.demo:run", processes=0)
    assert resolutions == ["workbench.workloads.demo:run"]
    assert isinstance(given[0], ResolvedWorkload) and given[0].spec == "workbench.workloads.demo:run"
    assert callable(given[0].function) and given[0].args == ()


@pytest.fixture
def tiny_workload(tmp_path, monkeypatch):
    name = f"rq_{tmp_path.name.replace('-', '_')}"
    (tmp_path / f"{name}.py").write_text(TINY_WORKLOAD)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))  # the resolver puts the current folder on it
    yield f"{name}:fine"
    sys.modules.pop(name, None)


@pytest.mark.slow
def test_a_real_report_resolves_its_workload_once_in_this_process(tiny_workload, tmp_path, resolutions):
    # the gate's two worker processes resolve it too, each in its own interpreter (not counted here);
    # this tiny workload suggests no variant, so the experiments step has nothing to resolve
    result = build_report(ReportRequest(tmp_path / "r", workload=tiny_workload, repeat=3, warmup=1, processes=2))
    assert resolutions == [tiny_workload]
    assert Path(result.html_path).is_file() and result.summary["workload"] == tiny_workload
    assert len(result.summary["samples"]["processes"]) == 2
