"""The magics in a real Jupyter kernel (nbclient + ipykernel), as `jupyter execute` runs them.

The regression: after a `%%gpuprofile` cell, a `%%gpuvariant` cell left the kernel's streams and
display publisher captured (two captures released in the wrong order); the kernel then failed
every request (`'CapturingDisplayPublisher' object has no attribute 'set_parent'`) and the next
cell hung.  Each cell here has a timeout, so a regression fails instead of hanging.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

ROOT = Path(__file__).resolve().parents[2]
CELL_TIMEOUT_S = 150
CELLS = [
    "%load_ext workbench\nimport time, torch\ntorch.set_num_threads(1)\nx = torch.randn(100_000)",
    "%%gpuprofile -T -w 1 -r 3\ny = (x.sin() * 2 + 1).relu()\ny = (y.sin() * 2 + 1).relu()\ny.sum()",
    "%%gpuvariant fused -b 0.5 -c 1\ny = (x.sin() * 2 + 1).relu()\ny = (y.sin() * 2 + 1).relu()\ny.sum()",
    "print('alive')",
    # slow enough (~2 s) for the status line to show and end with what was done
    "%%gpuprofile -T -w 1 -r 3 -q\ntime.sleep(0.35)",
    "print(_gpuprofile.name)",
    # the attribution names a cell by the prompt the user sees: cell [7], not ipykernel's file hash
    "def work(v):\n    w = v.sin() * 2\n    return (w + 1).relu()",
    "%%gpuprofile -w 1 -r 3 -q\nwork(x).sum()\nz = (x * 3).exp()",
    "print(list(_gpuprofile.attribution.sources.table['location']))",
]


def _texts(cell) -> str:
    parts = []
    for out in cell.get("outputs", []):
        parts.append(out.get("text", ""))
        for value in (out.get("data") or {}).values():
            parts.append(value if isinstance(value, str) else str(value))
    return "\n".join(parts)


@pytest.fixture(scope="module")
def executed(tmp_path_factory):
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "language": "python", "display_name": "Python 3"}
    nb.cells = [nbformat.v4.new_code_cell(c) for c in CELLS]
    env_before = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env_before) if p)
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    try:
        client = nbclient.NotebookClient(
            nb, timeout=CELL_TIMEOUT_S, kernel_name="python3", allow_errors=False, startup_timeout=120
        )
        client.execute(cwd=str(tmp_path_factory.mktemp("kernel")))
    finally:
        if env_before is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = env_before
    return nb


def test_every_cell_after_the_variant_magic_runs(executed):
    assert "alive" in _texts(executed.cells[3])


def test_the_variant_magic_shows_its_comparison_and_decision(executed):
    shown = _texts(executed.cells[2])
    assert "Comparison against profiled" in shown
    assert "fused" in shown and "Decision" in shown
    assert "USDT" not in shown and "CPUAllocator" not in shown  # the profiler's native lines held back


def test_a_slow_profile_shows_a_status_line_that_ends_done(executed):
    shown = _texts(executed.cells[4])
    assert "%gpuprofile" in shown and "done" in shown, shown


def test_the_run_is_named_after_the_prompt_the_user_sees(executed):
    profiled = executed.cells[4]
    assert _texts(executed.cells[5]).strip() == f"cell[{profiled.execution_count}]"


def test_the_attribution_names_cells_by_their_execution_count(executed):
    defined, profiled, shown = executed.cells[6], executed.cells[7], _texts(executed.cells[8])
    # the statements of work (lines 2 and 3), not its def line; the profiled cell by its own prompt
    assert f"cell [{defined.execution_count}], line 2 in work" in shown, shown
    assert f"cell [{defined.execution_count}], line 3 in work" in shown, shown
    assert f"cell [{defined.execution_count}], line 1" not in shown, shown
    assert f"cell [{profiled.execution_count}]" in shown and "notebook cell" not in shown, shown
    assert f"cell [{profiled.execution_count + 1}]" not in shown, shown  # not IPython's next count
    # the profiled cell's own statements (its body, run at top level) by their lines in the cell as the
    # user sees it: the magic's line is line 1, work(x).sum() line 2, z = ... line 3
    assert f"cell [{profiled.execution_count}], line 2 (top level)" in shown, shown
    assert f"cell [{profiled.execution_count}], line 3 (top level)" in shown, shown
