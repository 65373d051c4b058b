"""The project's own files: pins kept in step, layers kept apart."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _pyproject_pins() -> dict[str, str]:
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())
    specs = list(data["project"]["dependencies"])
    for extra in data["project"]["optional-dependencies"].values():
        specs += [s for s in extra if not s.startswith("workbench[")]
    pins = {}
    for spec in specs:
        name, _, version = spec.partition("==")
        assert version, f"pyproject.toml: {spec!r} is not pinned with =="
        pins[name.lower()] = version
    return pins


def _environment_pins() -> dict[str, str]:
    pins = {}
    for line in (ROOT / "environment.yml").read_text().splitlines():
        m = re.match(r"\s*-\s*([A-Za-z0-9_.\-]+)==(\S+)\s*$", line)
        if m:
            pins[m.group(1).lower()] = m.group(2)
    return pins


def test_environment_yml_pins_match_pyproject():
    assert _environment_pins() == _pyproject_pins()


def test_analysis_layers_import_without_torch_ipython_altair():
    """A trace recorded on a GPU box is analysed anywhere: these layers never import torch."""
    code = (
        "import sys\n"
        "import workbench, workbench.trace, workbench.analysis, workbench.hypotheses\n"
        "bad = [m for m in ('torch', 'IPython', 'altair') if m in sys.modules]\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"imported by the analysis layers: {out.stdout.strip()}"


def test_makefile_and_ci_run_the_readme_commands():
    readme = (ROOT / "README.md").read_text()
    assert "make demo" in readme and "make test" in readme
    assert "make test" in (ROOT / ".ci" / "run").read_text()


def test_every_error_workbench_raises_on_purpose_is_a_workbench_error():
    import inspect

    from workbench import errors
    from workbench.hypotheses import NotJudged

    classes = [
        c
        for _, c in inspect.getmembers(errors, inspect.isclass)
        if c.__module__ == errors.__name__ and issubclass(c, BaseException)
    ]
    outside = [c.__name__ for c in classes if not issubclass(c, (errors.WorkbenchError, Warning))]
    assert classes and not outside, f"outside the hierarchy: {outside}"
    assert NotJudged is errors.NotJudged and issubclass(NotJudged, errors.WorkbenchError)


def test_a_missing_optional_package_names_the_extra_to_install():
    """Without altair, workbench.charts says which extra brings it (and is still an ImportError)."""
    code = (
        "import sys\n"
        "sys.modules['altair'] = None  # as if not installed\n"
        "from workbench.errors import MissingDependencyError\n"
        "try:\n"
        "    import workbench.charts\n"
        "except MissingDependencyError as exc:\n"
        "    print(type(exc).__name__, isinstance(exc, ImportError), exc.extra, '|', exc)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == (
        "MissingDependencyError True charts | drawing charts (workbench.charts) needs "
        "altair, which is not installed: pip install 'workbench[charts]'"
    )


def test_optional_packages_named_in_code_belong_to_the_extra_named():
    """Every ``require_package(package, extra=...)`` names an extra of pyproject.toml that pins it."""
    import ast

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    pip_names = {"vl_convert": "vl-convert-python"}
    calls = []
    for path in (ROOT / "workbench").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "require_package" and node.args:
                extra = next(k.value.value for k in node.keywords if k.arg == "extra")
                calls.append((path.name, node.args[0].value, extra))
    assert calls
    for where, package, extra in calls:
        pinned = {s.partition("==")[0].lower() for s in extras[extra]}
        assert pip_names.get(package, package).lower() in pinned, (where, package, extra)


def test_mypy_passes_on_the_boundaries_pyproject_names():
    """``mypy`` (dev extra) with the repository's [tool.mypy]: trace, the facade, the errors, the CLI's
    analyze command and capture's trace link."""
    import pytest

    api = pytest.importorskip("mypy.api", reason="mypy is in the dev extra: pip install -e '.[dev]'")
    stdout, stderr, status = api.run(
        ["--config-file", str(ROOT / "pyproject.toml"), "--cache-dir", str(ROOT / ".mypy_cache")]
    )
    assert status == 0, stdout + stderr


def test_the_static_mirror_of_the_lazy_public_names_is_the_lazy_table():
    """``workbench/__init__.py`` loads its public names lazily (``_LAZY``) and names them for static tools
    under ``if TYPE_CHECKING:``; the two must agree name for name and object for object."""
    import ast
    import importlib

    import workbench

    tree = ast.parse((ROOT / "workbench" / "__init__.py").read_text())
    guard = next(n for n in tree.body if isinstance(n, ast.If) and getattr(n.test, "id", "") == "TYPE_CHECKING")
    mirrored = {}
    for node in guard.body:
        assert isinstance(node, ast.ImportFrom), ast.dump(node)
        for alias in node.names:
            try:  # a submodule (``from workbench import charts``) is an attribute once imported
                value = importlib.import_module(f"{node.module}.{alias.name}")
            except ModuleNotFoundError:
                value = getattr(importlib.import_module(node.module), alias.name)
            mirrored[alias.asname or alias.name] = value
    assert set(mirrored) == set(workbench._LAZY)
    for name, value in mirrored.items():
        assert getattr(workbench, name) is value, name
