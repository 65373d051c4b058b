"""The workbench command: help text, and bad input that ends in one line and exit code 2."""

import subprocess
import sys

import pytest

from workbench.cli import main


def _run(*args):
    return subprocess.run([sys.executable, "-m", "workbench.cli", *args], capture_output=True, text=True, timeout=120)


def test_report_help_explains_every_option():
    out = _run("report", "--help").stdout
    for option in (
        "--out",
        "--workload",
        "--bundle",
        "--template",
        "--repeat",
        "--warmup",
        "--compare-to",
        "--fail-on-regression",
        "--no-experiments",
        "--processes",
        "--time-limit",
        "--allow-environment-change",
    ):
        assert option in out
    assert "exit status" in out
    for code, meaning in (
        ("0", "report written"),
        ("1", "REGRESSION"),
        ("2", "bad input"),
        ("3", "the workload failed"),
        ("4", "the workload ran past --time-limit"),
    ):
        assert f"  {code}  {meaning}" in out
    assert "INCONCLUSIVE" in out and "hierarchical bootstrap" in out


def test_missing_bundle_exits_2_without_traceback(tmp_path):
    proc = _run("report", "--bundle", str(tmp_path / "nope"), "--out", str(tmp_path / "o"))
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr and "does not exist" in proc.stderr


def test_unknown_workload_exits_2_without_traceback(tmp_path):
    proc = _run("report", "--workload", "no_such_pkg_q:main", "--out", str(tmp_path / "o"))
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr and "unknown workload" in proc.stderr


@pytest.mark.parametrize("argv", [["report", "--fail-on-regression", "5"], ["report", "--repeat", "0"]])
def test_inconsistent_options_exit_2(argv, capsys):
    assert main(argv) == 2
    assert "error:" in capsys.readouterr().err


def test_no_command_prints_help(capsys):
    assert main([]) == 2
    assert "report" in capsys.readouterr().out


def test_analyze_text_cuts_long_kernel_signatures_but_keeps_every_table(capsys):
    from pathlib import Path

    trace = Path(__file__).parent / "data" / "gpu" / "a100_alexnet.json.gz"
    assert main(["analyze", str(trace), "--top", "50"]) == 0
    out = capsys.readouterr().out
    for section in ("kernel breakdown", "temporal breakdown", "idle breakdown", "launch stats", "hypotheses"):
        assert f"== {section}" in out
    kernel_lines = out.split("== kernel breakdown ==")[1].split("== temporal")[0].splitlines()
    # kernel names as every view shows them (workbench.analysis.labels): the function name, no signature
    assert any("elementwise_kernel<gpu_kernel_impl>" in line for line in kernel_lines)
    assert not any("void at::native::" in line for line in kernel_lines)
    assert "sum (total)" in kernel_lines[1] and "mean (per call)" in kernel_lines[1]
    assert max(len(line) for line in kernel_lines) < 250


def test_no_experiments_reaches_the_pipeline(monkeypatch, tmp_path):
    import workbench.report.pipeline as pipeline

    seen = {}

    def fake_build_report(request, **kw):
        seen["request"] = request  # the CLI passes one ReportRequest (and progress=)
        raise SystemExit(0)

    monkeypatch.setattr(pipeline, "build_report", fake_build_report)
    with pytest.raises(SystemExit):
        main(["report", "--out", str(tmp_path), "--no-experiments"])
    assert seen["request"].experiments is False
