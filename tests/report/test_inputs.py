"""Workload specs, template checks, earlier reports' summaries: the bad inputs a report can get."""

import json
import math

import nbformat
import pytest

from workbench import demo
from workbench.errors import InvalidArgumentError, ReportError
from workbench.report import SampleSet, load_samples, load_summary, resolve_workload
from workbench.report.execute import check_template
from workbench.report.kernel import kernelspec
from workbench.report.pipeline import default_template


def test_demo_workload_resolves_with_its_inputs():
    func, args = resolve_workload("workbench.workloads.demo:workload")
    assert func is demo.workload and len(args) == 2 and tuple(args[0].shape) == (demo.ROWS, demo.HIDDEN)
    func, args = resolve_workload("workbench.workloads.demo:run")
    assert func is demo.run and args == ()


@pytest.mark.parametrize(
    "spec,match",
    [
        ("workbench.workloads.demo", "module:function"),
        ("no_such_module_xyz:f", "no module named 'no_such_module_xyz'"),
        ("workbench.workloads.demo:nope", "no callable 'nope'"),
    ],
)
def test_bad_workload_specs_say_what_is_wrong(spec, match):
    with pytest.raises(InvalidArgumentError, match=match):
        resolve_workload(spec)


def test_default_template_is_valid_for_papermill():
    check_template(default_template())


def test_template_without_kernel_language_is_refused(tmp_path):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("x = 1", metadata={"tags": ["parameters"]})]
    nbformat.write(nb, tmp_path / "t.ipynb")
    with pytest.raises(ReportError, match="kernelspec.language"):
        check_template(tmp_path / "t.ipynb")
    with pytest.raises(ReportError, match="does not exist"):
        check_template(tmp_path / "missing.ipynb")


def test_kernelspec_runs_this_interpreter():
    import sys

    spec = kernelspec()
    assert spec["argv"][0] == sys.executable and spec["language"] == "python"
    assert "{connection_file}" in spec["argv"]


SAMPLES = SampleSet(processes=((10.0, 10.2, 9.9), (10.4, 10.1, 10.3)), environment={"cpu_model": "x"}).to_dict()


def test_samples_of_an_earlier_report_load(tmp_path):
    (tmp_path / "summary.json").write_text(json.dumps({"timing": {"median_ms": 10.1}, "samples": SAMPLES}))
    assert load_samples(tmp_path).n_processes == 2


def test_missing_or_broken_summary_is_a_report_error(tmp_path):
    with pytest.raises(ReportError, match="no such folder"):
        load_summary(tmp_path / "nope")
    with pytest.raises(ReportError, match="summary.json is missing"):
        load_summary(tmp_path)
    (tmp_path / "summary.json").write_text("{not json")
    with pytest.raises(ReportError, match="not a readable report summary"):
        load_summary(tmp_path)
    (tmp_path / "summary.json").write_text("[1, 2]")
    with pytest.raises(ReportError, match="not an object"):
        load_summary(tmp_path)
    (tmp_path / "summary.json").write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(ReportError, match="not a readable report summary"):
        load_summary(tmp_path)


@pytest.mark.parametrize(
    "summary,match",
    [
        ({"timing": {"median_ms": 10.0}}, "no per-process samples: it was written by an older workbench"),
        ({"timing": {"median_ms": math.nan}, "samples": SAMPLES}, "median of nan ms"),
        ({"timing": {"median_ms": 0.0}, "samples": SAMPLES}, "median of 0.0 ms"),
        ({"timing": {"median_ms": -3.0}, "samples": SAMPLES}, "median of -3.0 ms"),
        ({"timing": {"median_ms": "fast"}, "samples": SAMPLES}, "median of 'fast' ms"),
        ({"samples": {**SAMPLES, "format_version": 99}}, "version 99"),
        ({"samples": {**SAMPLES, "processes": [{"samples_ms": [math.nan]}]}}, "not times from 0 to"),
        ({"samples": {**SAMPLES, "processes": [{"samples_ms": [0.0]}]}}, "median of 0 ms"),
        ({"samples": {**SAMPLES, "processes": "many"}}, "must be a list"),
    ],
)
def test_an_unusable_baseline_says_why(tmp_path, summary, match):
    (tmp_path / "summary.json").write_text(json.dumps(summary))  # json writes NaN as NaN, as a report would
    with pytest.raises(ReportError, match=match):
        load_samples(tmp_path)
