"""A notebook cell's code reads by the prompt the user sees (``cell [7], line 3 in f``), not by the file
ipykernel compiled it under (``/tmp/ipykernel_<pid>/<hash>.py``)."""

from __future__ import annotations

from types import SimpleNamespace

from workbench.analysis.attribution import cell_location
from workbench.capture.cells import cell_id, notebook_cells, source_line


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


def test_a_line_of_the_users_code_reads_the_same_where_a_fix_applies():
    cells = {"3855453478": 7}
    assert source_line("/tmp/ipykernel_81/3855453478.py", 17, cells) == "cell [7], line 17"
    assert source_line("/tmp/ipykernel_81/99.py", 17, cells) == "99.py:17"  # a cell the history does not hold
    assert source_line("/home/me/proj/model.py", 42, cells) == "model.py:42"
    assert source_line("/home/me/proj/model.py", 42) == "model.py:42"  # no shell: no cells looked up


def test_a_fix_site_in_a_notebook_cell_is_named_by_its_prompt(monkeypatch):
    import workbench.capture.cells as cells_module
    from workbench.fixes._patterns import Source

    monkeypatch.setattr(cells_module, "notebook_cells", lambda shell=None: {"937455229": 1})
    source = Source(fn=len, tree=None, filename="/tmp/ipykernel_42/937455229.py", firstline=10)  # type: ignore[arg-type]
    assert source.where(SimpleNamespace(lineno=8)) == "cell [1], line 17"


def test_a_cell_that_ends_in_blank_lines_is_found_by_its_compiled_text(monkeypatch):
    import linecache

    # the history keeps "x = 1" while ipykernel named the file for "x = 1\n\n" as typed: naming the
    # history's text again gives another id, the compiler's cached text still reads the same
    texts = ["", "x = 1", "y = 2"]
    shell = SimpleNamespace(
        history_manager=SimpleNamespace(input_hist_raw=texts, input_hist_parsed=texts),
        compile=SimpleNamespace(get_code_name=lambda raw, code, n: f"/tmp/ipykernel_81/{hash(raw) % 1000}.py"),
    )
    monkeypatch.setitem(linecache.cache, "/tmp/ipykernel_81/5555.py", (8, None, ["x = 1\n", "\n"], "x"))
    monkeypatch.setitem(linecache.cache, "/tmp/ipykernel_81/6666.py", (9, None, ["z = 3\n"], "z"))  # no such cell
    cells = notebook_cells(shell)
    assert cells["5555"] == 1 and "6666" not in cells
    assert source_line("/tmp/ipykernel_81/5555.py", 1, cells) == "cell [1], line 1"
