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
