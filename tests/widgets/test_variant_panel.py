"""The variant panel driven through a real IPython shell: pick, run, table, chart, insert."""
import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("ipywidgets")
from IPython.core.interactiveshell import InteractiveShell  # noqa: E402

from workbench.widgets import VariantPanel  # noqa: E402

torch.set_num_threads(1)
FAST = dict(checks=1, budget_s=1.0, min_rounds=20, max_rounds=200, profile=False)


def slow_chain(x):
    for _ in range(3):
        y = (x.sin() * 2 + 1).relu()
    return y


def one_chain(x):
    return (x.sin() * 2 + 1).relu()


@pytest.fixture(scope="module")
def shell():
    return InteractiveShell.instance()


def test_panel_lists_suggested_and_user_variants_with_applicability(shell):
    from types import SimpleNamespace

    hypothesis = SimpleNamespace(suggested_variants=("cuda_graph", "eager"))   # duck-typed
    panel = VariantPanel(slow_chain, lambda: torch.randn(100_000), hypotheses=[hypothesis],
                         user_variants={"one_pass": one_chain}, shell=shell, compare_options=FAST)
    assert list(panel.checkboxes) == ["cuda_graph", "one_pass"]
    graph_box = panel.checkboxes["cuda_graph"]
    if not torch.cuda.is_available():
        assert graph_box.disabled and "not applicable" in graph_box.description
    assert not panel.checkboxes["one_pass"].disabled


def test_run_fills_table_chart_and_inserts_the_winner(shell):
    shell.rl_next_input = None
    panel = VariantPanel(slow_chain, lambda: torch.randn(100_000), user_variants={"one_pass": one_chain,
                         "broken": lambda x: x[:3]}, shell=shell, compare_options=FAST)
    panel.run_button.click()                     # nothing chosen
    assert "select at least one" in panel.status.value
    panel.checkboxes["one_pass"].value = True
    panel.checkboxes["broken"].value = True
    panel.run_button.click()
    assert panel.progress.value == panel.progress.max == 2
    assert set(panel.rows) == {"eager", "one_pass", "broken"}
    assert panel.rows["broken"]["decision"] == "reject" and "shape" in panel.rows["broken"]["reason"]
    assert panel.rows["one_pass"]["decision"] == "keep", panel.rows["one_pass"]
    assert "<td>one_pass</td>" in panel.table.value and "<td>keep</td>" in panel.table.value
    assert panel.chart.value.lstrip().startswith("<svg")     # the comparison chart, inline
    assert not panel.insert_button.disabled
    panel.insert_button.click()
    assert "def one_chain(x):" in shell.rl_next_input


def test_a_part_of_a_profiled_cell_is_judged_against_the_whole_run(shell):
    from types import SimpleNamespace

    run = SimpleNamespace(timing=SimpleNamespace(median_ms=50_000.0),          # the whole cell: 50 s
                          hypotheses=[SimpleNamespace(suggested_variants=("cuda_graph",))])
    panel = VariantPanel(slow_chain, lambda: torch.randn(100_000), run=run, user_variants={"one_pass": one_chain},
                         shell=shell, compare_options=FAST)
    assert list(panel.checkboxes) == ["cuda_graph", "one_pass"]               # the run's hypotheses
    panel.checkboxes["one_pass"].value = True
    panel.run()
    row = panel.rows["one_pass"]
    assert row["decision"] == "micro_only", row
    assert "5e+04 ms end-to-end" in row["reason"]
    assert panel.winner() is None and panel.insert_button.disabled             # nothing worth inserting
