"""Workload specs, template checks, regression summaries: the bad inputs a report can get."""
import json
import math

import nbformat
import pytest

from workbench import demo
from workbench.errors import InvalidArgumentError, ReportError
from workbench.report import RegressionCheck, check_regression, load_summary, resolve_workload
from workbench.report.execute import check_template
from workbench.report.kernel import kernelspec
from workbench.report.pipeline import default_template


def test_demo_workload_resolves_with_its_inputs():
    func, args = resolve_workload("workbench.demo:workload")
    assert func is demo.workload and len(args) == 2 and tuple(args[0].shape) == (demo.ROWS, demo.HIDDEN)
    func, args = resolve_workload("workbench.demo:run")
    assert func is demo.run and args == ()


@pytest.mark.parametrize("spec,match", [("workbench.demo", "module:function"),
                                        ("no_such_module_xyz:f", "no module named 'no_such_module_xyz'"),
                                        ("workbench.demo:nope", "no callable 'nope'")])
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


def test_regression_check_round_trips_and_judges(tmp_path):
    (tmp_path / "summary.json").write_text(json.dumps({"timing": {"median_ms": 10.0}}))
    slower = check_regression(tmp_path, 11.0, 5.0)
    assert slower.regressed and slower.change_pct == pytest.approx(10.0)
    assert not check_regression(tmp_path, 10.4, 5.0).regressed
    assert not check_regression(tmp_path, 100.0, math.inf).regressed
    assert RegressionCheck.from_dict(slower.to_dict()) == slower


def test_missing_or_broken_summary_is_a_report_error(tmp_path):
    with pytest.raises(ReportError, match="summary.json is missing"):
        load_summary(tmp_path)
    (tmp_path / "summary.json").write_text("{not json")
    with pytest.raises(ReportError, match="not a readable report summary"):
        load_summary(tmp_path)
