"""The old import paths of the modules moved out of the package root (workbench.facade, ...,
workbench.demo) still import the same objects for one release, each with one DeprecationWarning
that names the user's import line and where the names live now; the public ``wb.`` names and
the new paths warn about nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from workbench._moved import MOVED_MODULES, current_module

REPO = Path(__file__).resolve().parents[1]

# old path -> (a name it exported, the path the warning tells the user to import from)
OLD_PATHS = {
    "workbench.facade": ("Trace", "workbench.api (or use wb.load_trace)"),
    "workbench.profile_run": ("ProfileRun", "workbench.api (or use wb.load_run)"),
    "workbench.profiling": ("profile", "workbench.api (or use wb.profile)"),
    "workbench.rank_folder": ("RankFolder", "workbench.api.rank_folder"),
    "workbench.distributed": (
        "step",
        "workbench.api.distributed (or use wb.profile_distributed; in a script, workbench.api.distributed.step())",
    ),
    "workbench.demo": ("workload", "workbench.workloads.demo (or use wb.demo)"),
    "workbench.commands": ("analyze", "workbench.cli (the command modules: workbench.cli.analyze, ...)"),
}


def _run(code: str) -> dict:
    """Run ``code`` in a fresh interpreter (an import warns once per process) with every warning
    recorded; it prints one JSON line."""
    env = dict(
        os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""), OMP_WAIT_POLICY="PASSIVE"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=240, cwd=str(REPO)
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


PROBE = """\
import importlib, json, warnings
warnings.simplefilter("always")
with warnings.catch_warnings(record=True) as seen:
    warnings.simplefilter("always")
    old = importlib.import_module({old!r})
new = importlib.import_module({new!r})
print(json.dumps({{"same": getattr(old, {name!r}) is getattr(new, {name!r}),
                   "warnings": [[w.category.__name__, str(w.message), w.filename, w.lineno] for w in seen
                                if issubclass(w.category, DeprecationWarning)]}}))
"""


@pytest.mark.parametrize("old", sorted(OLD_PATHS))
def test_an_old_path_imports_the_same_objects_and_warns_once_naming_the_new_path(old: str) -> None:
    name, told = OLD_PATHS[old]
    out = _run(PROBE.format(old=old, new=MOVED_MODULES[old], name=name))
    assert out["same"]
    assert [w[:2] for w in out["warnings"]] == [
        ["DeprecationWarning", f"{old} is deprecated: import from {told}; the old path goes in the next release"]
    ]


def test_the_warning_names_the_users_import_line(tmp_path: Path) -> None:
    script = tmp_path / "old_script.py"
    script.write_text(
        "import warnings\nwarnings.simplefilter('always')\n"
        "import workbench.facade\n"  # line 3
        "from workbench.distributed import step\n"  # line 4
        "step()\n",
        encoding="utf-8",
    )
    env = dict(os.environ, PYTHONPATH=str(REPO), OMP_WAIT_POLICY="PASSIVE")
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=240)
    assert done.returncode == 0, done.stderr
    assert f"{script}:3: DeprecationWarning: workbench.facade is deprecated" in done.stderr, done.stderr
    assert f"{script}:4: DeprecationWarning: workbench.distributed is deprecated" in done.stderr, done.stderr


def test_the_public_names_and_the_new_paths_warn_nothing() -> None:
    out = _run("""\
import json, warnings
with warnings.catch_warnings(record=True) as seen:
    warnings.simplefilter("always")
    import workbench as wb
    from workbench import demo
    names = [wb.Trace, wb.load_trace, wb.ProfileRun, wb.load_run, wb.profile, wb.profile_distributed, wb.demo]
    import workbench.api as api
    import workbench.workloads.demo, workbench.cli
    names += [api.Trace, api.load_trace, api.ProfileRun, api.load_run, api.profile, api.RankFolder,
              api.profile_distributed, api.DistributedTrace, api.step]
print(json.dumps({"same": wb.Trace is api.Trace and wb.demo is demo is workbench.workloads.demo,
                  "warnings": [str(w.message) for w in seen if issubclass(w.category, DeprecationWarning)
                               and "workbench" in str(w.message)]}))
""")
    assert out == {"same": True, "warnings": []}


def test_an_old_module_path_in_a_saved_artefact_reads_as_the_new_one() -> None:
    assert current_module("workbench.demo") == "workbench.workloads.demo"
    assert current_module("workbench.facade") == "workbench.api.trace"
    assert current_module("workbench.commands.analyze") == "workbench.cli.analyze"
    assert current_module("workbench.demolition") == "workbench.demolition"
    assert current_module("mypackage.model") == "mypackage.model"


def test_a_report_of_the_old_demo_workload_string_is_the_same_workload() -> None:
    """Reports written before the move record ``workbench.demo:workload``: it resolves (without the
    shim's warning) and a gate does not call it another workload."""
    pytest.importorskip("torch")
    import warnings

    from workbench.report.regression import workload_difference
    from workbench.report.workload import DEFAULT_WORKLOAD, resolve_workload
    from workbench.workloads import demo

    assert DEFAULT_WORKLOAD == "workbench.workloads.demo:workload"
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        func, args = resolve_workload("workbench.demo:workload")
    assert func is demo.workload and len(args) == 2
    assert workload_difference("workbench.demo:workload", DEFAULT_WORKLOAD) == ()
    assert workload_difference("workbench.demo:workload", "workbench.workloads.demo:run") == (
        "workload: 'workbench.demo:workload' vs 'workbench.workloads.demo:run'",
    )


def test_a_study_baseline_recorded_at_an_old_module_path_resolves_to_the_moved_callable() -> None:
    from workbench.study.identity import resolve_ref
    from workbench.workloads import demo

    ref = {"module": "workbench.demo", "qualname": "workload", "importable": True}
    assert resolve_ref(ref, "baseline callable") is demo.workload
