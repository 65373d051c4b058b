"""The workbench command: help text, and bad input that ends in one line and exit code 2."""
import subprocess
import sys

import pytest

from workbench.cli import main


def _run(*args):
    return subprocess.run([sys.executable, "-m", "workbench.cli", *args], capture_output=True, text=True,
                          timeout=120)


def test_report_help_explains_every_option():
    out = _run("report", "--help").stdout
    for option in ("--out", "--workload", "--bundle", "--template", "--repeat", "--warmup", "--compare-to",
                   "--fail-on-regression"):
        assert option in out
    assert "exit status" in out


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
