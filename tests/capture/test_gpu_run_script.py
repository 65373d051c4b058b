"""``benchmarks/gpu/run.sh`` (the prepared GPU check) on a machine without CUDA: its plumbing.

The cheap sections run to their "no CUDA device" exits, each writing its JSON; the summary's exit
status and the wheel lists are checked without running anything heavy. The whole dry run (a Python 3.12
venv with torch 2.11 and the carried wheels) is ``benchmarks/gpu/dry_run.sh``.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]
GPU = ROOT / "benchmarks" / "gpu"
no_cuda = pytest.mark.skipif(torch.cuda.is_available(), reason="a CUDA device is present: run.sh runs for real there")


def _sections():
    spec = importlib.util.spec_from_file_location("wb_gpu_sections", GPU / "sections.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@no_cuda
def test_run_sh_sections_reach_their_first_cuda_call_and_exit_zero(tmp_path):
    out = tmp_path / "out"
    sections = ["gpu_check", "triton_kernels", "memory"]
    env = {
        **os.environ,
        "OUT": str(out),
        "PYTHON": sys.executable,
        "WB_GPU_SECTIONS": " ".join(sections),
        "WB_GPU_SKIP_IMPORTS": "1",
        "WB_GPU_REQUIRE_CUDA": "0",
        "WB_GPU_WHEEL_DIR": str(tmp_path / "no-wheels"),
        "OMP_NUM_THREADS": "1",
        "TMPDIR": str(tmp_path),
    }
    env.pop("WB_GPU_REHEARSE", None)
    done = subprocess.run(["bash", str(GPU / "run.sh")], capture_output=True, text=True, timeout=240, env=env, cwd=ROOT)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["exit_status"] == 0 and summary["failed"] == []
    assert list(summary["sections"]) == sections
    assert sorted(p.name for p in out.iterdir()) == sorted([f"{s}.json" for s in sections] + ["summary.json"])
    for name in sections:
        doc = json.loads((out / f"{name}.json").read_text())
        assert doc["status"] in ("not_applicable", "skipped"), (
            name,
            doc["status"],
            doc["reason"],
            doc.get("traceback"),
        )
        if doc["status"] == "not_applicable":
            assert "no CUDA device" in doc["reason"]
            assert doc["reached"][-1].startswith("first CUDA call"), doc["reached"]
        assert doc["versions"]["torch"] and doc["rc"] == 0 and doc["seconds"] >= 0
        assert f"[{name}]" in doc["stdout_tail"]
    # the not-yet-built workbench pieces are named, not failed
    memory = json.loads((out / "memory.json").read_text())
    assert set(memory["result"]["workbench_api"]) == {
        "profile(memory=True)",
        "load_memory_snapshot",
        "Trace.memory_timeline",
    }


@pytest.mark.parametrize("name", ["memory", "critical_path"])
def test_the_code_after_the_cuda_gate_runs_in_the_cpu_rehearsal_without_an_exception(tmp_path, name):
    """WB_GPU_REHEARSE=1 runs a section past its gate on CPU tensors: its verdict means nothing, but a
    slip in the code that only the device would reach shows here (the workbench API, once built, too)."""
    env = {
        **os.environ,
        "WB_GPU_REHEARSE": "1",
        "WB_GPU_OUT": str(tmp_path),
        "WB_GPU_WORK": str(tmp_path / "w"),
        "OMP_NUM_THREADS": "1",
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    done = subprocess.run(
        [sys.executable, str(GPU / "sections.py"), "run", name, "--limit", "200"],
        capture_output=True,
        text=True,
        timeout=240,
        env=env,
        cwd=ROOT,
    )
    doc = json.loads((tmp_path / f"{name}.json").read_text())
    assert doc.get("rehearsal") is True and "traceback" not in doc, (doc.get("traceback"), done.stdout[-2000:])
    assert doc["status"] in ("ok", "failed"), doc["reason"]
    errors = {k: v for k, v in doc["result"].items() if isinstance(v, dict) and "error" in v}
    assert not errors, errors


def _write(out: Path, name: str, status: str, reason: str = "") -> None:
    (out / f"{name}.json").write_text(
        json.dumps({"section": name, "status": status, "reason": reason, "reached": ["x"]})
    )


@pytest.mark.parametrize(
    "statuses, require_cuda, expected",
    [
        ({"a": "ok", "b": "not_applicable", "c": "skipped"}, "0", 0),
        ({"a": "ok", "b": "failed"}, "0", 1),
        ({"a": "ok", "b": "timeout"}, "0", 1),
        ({"a": "ok", "b": "crashed"}, "0", 1),
        ({"a": "ok", "b": "not_applicable"}, "1", 1),  # a GPU machine whose torch sees no CUDA
    ],
)
def test_summary_exit_status(tmp_path, monkeypatch, statuses, require_cuda, expected):
    sections = _sections()
    monkeypatch.setenv("WB_GPU_OUT", str(tmp_path))
    monkeypatch.setenv("WB_GPU_WORK", str(tmp_path / "work"))
    monkeypatch.setenv("WB_GPU_REQUIRE_CUDA", require_cuda)
    for name, status in statuses.items():
        _write(tmp_path, name, status)
    assert sections.summary("none", 1.0, list(statuses)) == expected
    doc = json.loads((tmp_path / "summary.json").read_text())
    assert doc["exit_status"] == expected
    assert {k: v["status"] for k, v in doc["sections"].items()} == statuses


def test_finalize_marks_a_killed_section_as_timeout_and_keeps_its_steps(tmp_path, monkeypatch):
    sections = _sections()
    monkeypatch.setenv("WB_GPU_OUT", str(tmp_path))
    _write(tmp_path, "memory", "running")
    log = tmp_path / "memory.log"
    log.write_text("[memory] step one\n")
    sections.finalize("memory", 124, str(log), 40.2, 40)
    doc = json.loads((tmp_path / "memory.json").read_text())
    assert doc["status"] == "timeout" and "40 s" in doc["reason"] and doc["reached"] == ["x"]
    assert doc["stdout_tail"] == "[memory] step one\n"
    sections.finalize("gpu_tests", 1, None, 1.0, 90)  # no JSON at all: the process died early
    assert json.loads((tmp_path / "gpu_tests.json").read_text())["status"] == "crashed"


def test_missing_package_is_named():
    sections = _sections()
    assert sections.missing(["json", "no_such_package_xyz"]) == ["no_such_package_xyz"]


def _pins(path: Path) -> dict[str, str]:
    specs = [re.sub(r"#.*", "", line).strip() for line in path.read_text().splitlines()]
    norm = lambda s: re.sub(r"[-_.]+", "-", s).lower()  # noqa: E731
    return {norm(s.split("==")[0]): s.split("==")[1] for s in specs if s}


def test_wheel_lists_pin_one_version_each_as_pyproject_does():
    core, report = _pins(GPU / "wheels-core.txt"), _pins(GPU / "wheels-report.txt")
    assert not set(core) & set(report)
    assert {"msgspec", "ipython"} <= set(core) and {"papermill", "nbconvert", "altair"} <= set(report)
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    declared = list(project["dependencies"]) + [r for reqs in project["optional-dependencies"].values() for r in reqs]
    pinned = {re.sub(r"[-_.]+", "-", r.split("==")[0]).lower(): r.split("==")[1] for r in declared if "==" in r}
    for name, version in {**core, **report}.items():
        if name in pinned:
            assert version == pinned[name], (name, version, pinned[name])


def test_supported_torch_range_is_stated_once_and_holds_the_pin_and_the_gpu_machines_torch():
    from packaging.specifiers import SpecifierSet

    data = tomllib.loads((ROOT / "pyproject.toml").read_text())
    supported = data["tool"]["workbench"]["supported-torch"]
    pin = next(r for r in data["project"]["optional-dependencies"]["torch"] if r.startswith("torch=="))
    spec = SpecifierSet(supported)
    assert pin.split("==")[1] in spec and "2.11.0" in spec
    assert f"`{supported}`" in (ROOT / "README.md").read_text()
    assert f"torch{supported}" in (ROOT / "environment.yml").read_text()
    assert "torch==2.11.0" in (GPU / "dry_run.sh").read_text()  # the documented check of the oldest


def test_the_import_step_imports_every_module_and_runs_no_command(tmp_path):
    """run.sh's import step walks every workbench module; a ``__main__`` module (``workbench.cli.__main__``) would
    run the CLI on the step's own arguments, so it is not imported."""
    env = {**os.environ, "OUT": str(tmp_path), "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, str(GPU / "sections.py"), "imports"],
        capture_output=True,
        text=True,
        timeout=240,
        env=env,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "usage: workbench" not in done.stdout + done.stderr
