"""A notebook cell's code reads by the prompt the user sees (``cell [7], line 3 in f``), not by the file
ipykernel compiled it under (``/tmp/ipykernel_<pid>/<hash>.py``)."""

from __future__ import annotations

from types import SimpleNamespace

from workbench.analysis.attribution import cell_location
from workbench.api.cells import cell_id, notebook_cells


def test_a_cell_file_reads_as_its_execution_count_with_its_line():
    cells = {"3855453478": 7}
    assert cell_location("notebook cell 3855453478:3 in step", cells) == "cell [7], line 3 in step"
    assert cell_location("notebook cell 3855453478 (top level)", cells) == "cell [7] (top level)"
    assert cell_location("notebook cell 3855453478:2 (top level)", cells) == "cell [7], line 2 (top level)"
    assert cell_location("<ipython-input-12-0a1b2c3d>:4 in f", {}) == "cell [12], line 4 in f"  # a terminal IPython
    assert cell_location("notebook cell 99:3 in f", cells) == "notebook cell 99:3 in f"  # a cell not in the history
    assert cell_location("model.py:42 in forward", cells) == "model.py:42 in forward"


def test_the_shells_history_maps_cell_files_to_counts_and_no_shell_maps_nothing():
    texts = ["", "import torch", "def f(x):\n    return x", "%%gpuprofile\nf(1)"]
    shell = SimpleNamespace(
        history_manager=SimpleNamespace(input_hist_raw=texts, input_hist_parsed=texts),
        compile=SimpleNamespace(get_code_name=lambda raw, code, n: f"/tmp/ipykernel_81/{1000 + len(raw)}.py"),
    )
    assert notebook_cells(shell) == {"1012": 1, "1022": 2, "1017": 3}
    assert cell_id("/tmp/ipykernel_81/3855453478.py") == "3855453478" and cell_id("model.py") is None
    broken = SimpleNamespace(history_manager=None)
    assert notebook_cells(broken) == {}
    assert notebook_cells() == {}  # no IPython shell runs this test
