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

    hypothesis = SimpleNamespace(suggested_variants=("cuda_graph", "eager"))  # duck-typed
    panel = VariantPanel(
        slow_chain,
        lambda: torch.randn(100_000),
        hypotheses=[hypothesis],
        user_variants={"one_pass": one_chain},
        shell=shell,
        compare_options=FAST,
    )
    assert list(panel.checkboxes) == ["cuda_graph", "one_pass"]
    graph_box = panel.checkboxes["cuda_graph"]
    if not torch.cuda.is_available():
        assert graph_box.disabled and "not applicable" in graph_box.description
    assert not panel.checkboxes["one_pass"].disabled


def test_run_fills_table_chart_and_inserts_the_winner(shell):
    shell.rl_next_input = None
    panel = VariantPanel(
        slow_chain,
        lambda: torch.randn(100_000),
        user_variants={"one_pass": one_chain, "broken": lambda x: x[:3]},
        shell=shell,
        compare_options=FAST,
    )
    assert panel.selected() == ["one_pass", "broken"]  # your own variants start checked
    for box in panel.checkboxes.values():
        box.value = False
    panel.run_button.click()  # nothing chosen
    assert "select at least one" in panel.status.value
    panel.checkboxes["one_pass"].value = True
    panel.checkboxes["broken"].value = True
    panel.run_button.click()
    assert panel.progress.value == panel.progress.max == len(VariantPanel.STAGES)  # moves per stage
    assert set(panel.rows) == {"eager", "one_pass", "broken"}
    assert panel.rows["broken"]["decision"] == "reject" and "shape" in panel.rows["broken"]["reason"]
    assert panel.rows["one_pass"]["decision"] == "keep", panel.rows["one_pass"]
    assert "<td>one_pass</td>" in panel.table.value and "<td>keep</td>" in panel.table.value
    assert panel.comparisons["one_pass"] is panel.comparisons["broken"] is panel.comparison  # one baseline
    assert panel.chart.value.lstrip().startswith("<svg")  # the comparison chart, inline
    assert not panel.insert_button.disabled
    panel.insert_button.click()
    assert "def one_chain(x):" in shell.rl_next_input


def test_a_part_of_a_profiled_cell_is_judged_against_the_whole_run(shell):
    from types import SimpleNamespace

    run = SimpleNamespace(
        timing=SimpleNamespace(median_ms=50_000.0),  # the whole cell: 50 s
        hypotheses=[SimpleNamespace(suggested_variants=("cuda_graph",))],
    )
    panel = VariantPanel(
        slow_chain,
        lambda: torch.randn(100_000),
        run=run,
        user_variants={"one_pass": one_chain},
        shell=shell,
        compare_options=FAST,
    )
    assert list(panel.checkboxes) == ["cuda_graph", "one_pass"]  # the run's hypotheses
    panel.checkboxes["one_pass"].value = True
    panel.run()
    row = panel.rows["one_pass"]
    assert row["decision"] == "micro_only", row
    assert "5e+04 ms end-to-end" in row["reason"]
    assert panel.winner() is None and panel.insert_button.disabled  # nothing worth inserting


def _hypothesis():
    from workbench.hypotheses.hypothesis import Evidence, Hypothesis

    fields = Hypothesis.__dataclass_fields__
    values = dict(
        category="launch_overhead",
        title="many short ops: dispatch cost dominates",
        observed="300 ops per call, median 4 µs",
        mechanism="per-op dispatch",
        evidence=(),
        time_at_stake_ms=1.0,
        predicted_effect="fewer ops: faster",
        falsifier="compile the chain",
        confounders=(),
        confidence="medium",
        status="proposed",
        suggested_variants=("one_pass",),
    )
    return Hypothesis(**{k: v for k, v in values.items() if k in fields})


def test_suggested_variants_start_checked_and_their_hypothesis_reaches_the_record(shell):
    from types import SimpleNamespace

    hyp = _hypothesis()
    run = SimpleNamespace(timing=SimpleNamespace(median_ms=None), hypotheses=[hyp])
    seen = []
    panel = VariantPanel(
        slow_chain,
        lambda: torch.randn(100_000),
        run=run,
        user_variants={"one_pass": one_chain, "other": one_chain},
        shell=shell,
        compare_options={
            **FAST,
            "progress": lambda stage, name: seen.append((stage, panel.progress.value, panel.status.value)),
        },
    )
    assert panel.selected() == ["one_pass", "other"]  # suggested by the hypothesis, and yours: checked
    assert "suggested" in panel.checkboxes["one_pass"].description
    assert "yours" in panel.checkboxes["other"].description
    assert panel.hypothesis_for("one_pass") is hyp
    panel.checkboxes["other"].value = False
    panel.run()
    record = panel.decisions["one_pass"]
    assert record is panel.comparisons["one_pass"].decision
    assert "not diagnosed" not in (record.bottleneck or ""), record.bottleneck
    assert "Decision record: one_pass" in panel.records.value and "Bottleneck" in panel.records.value
    assert [st for st, _, _ in seen][:2] == ["correctness", "timing"]
    values = [v for _, v, _ in seen]
    assert values == sorted(values) and 0 < values[0] < panel.progress.max  # moves within a variant
    assert any("correctness" in status for _, _, status in seen)


def test_registry_variants_a_hypothesis_suggests_are_checked(shell):
    from types import SimpleNamespace

    hyp = SimpleNamespace(suggested_variants=("compiled",))
    panel = VariantPanel(slow_chain, lambda: torch.randn(1000), hypotheses=[hyp], shell=shell)
    box = panel.checkboxes["compiled"]
    assert box.value is (not box.disabled) and "suggested" in box.description
    assert panel.run_button.layout.width == panel.insert_button.layout.width == "auto"  # labels not cut


class _FakeKernel:
    def __init__(self, msg_type):
        self.msg_type = msg_type

    def get_parent(self, channel=None):
        return {"header": {"msg_type": self.msg_type}}


class _FrontEndShell:
    """A shell inside a kernel: set_next_input only reaches the front end from a cell's execution."""

    def __init__(self, msg_type):
        self.kernel, self.next_inputs = _FakeKernel(msg_type), []

    def set_next_input(self, code, replace=False):
        self.next_inputs.append(code)


def test_insert_from_a_button_in_a_notebook_shows_the_code_and_says_how(shell):
    front = _FrontEndShell("comm_msg")  # a widget button's click
    panel = VariantPanel(
        slow_chain,
        lambda: torch.randn(100_000),
        user_variants={"one_pass": one_chain},
        shell=front,
        compare_options=FAST,
    )
    assert panel.insert_button.description == "Show the winner's code"
    panel.checkboxes["one_pass"].value = True
    panel.run()
    panel.insert_button.click()
    assert front.next_inputs == []  # it would show up late, under another cell
    assert "def one_chain(x):" in panel.code.value and panel.code.layout.display is None
    assert "insert_winner()" in panel.status.value
    front.kernel.msg_type = "execute_request"  # panel.insert_winner() run in a cell
    panel.insert_winner()
    assert len(front.next_inputs) == 1 and "def one_chain(x):" in front.next_inputs[0]
    assert "new cell" in panel.status.value


def test_no_shell_given_uses_the_running_one(shell):
    shell.rl_next_input = None
    panel = VariantPanel(
        slow_chain, lambda: torch.randn(100_000), user_variants={"one_pass": one_chain}, compare_options=FAST
    )
    panel.checkboxes["one_pass"].value = True
    panel.run()
    panel.insert_winner()
    assert "def one_chain(x):" in shell.rl_next_input


def test_a_failing_run_says_so_in_place(shell, monkeypatch):
    import importlib

    compare_module = importlib.import_module("workbench.variants.compare")

    def boom(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(compare_module, "compare", boom)
    panel = VariantPanel(slow_chain, lambda: torch.randn(10), user_variants={"one_pass": one_chain}, shell=shell)
    panel.checkboxes["one_pass"].value = True
    panel.run()
    assert "interrupted" in panel.status.value and not panel.run_button.disabled


def test_a_variant_of_yours_is_judged_against_the_top_finding_not_a_measurement_caveat(shell):
    from types import SimpleNamespace

    caveat = SimpleNamespace(category="measurement", suggested_variants=())
    finding = SimpleNamespace(category="launch_overhead", suggested_variants=("compiled",))
    panel = VariantPanel(
        slow_chain,
        lambda: torch.randn(10),
        hypotheses=[caveat, finding],
        user_variants={"mine": one_chain},
        shell=shell,
    )
    assert panel.hypothesis_for("mine") is finding  # the bottleneck a rewrite addresses
    assert panel.hypothesis_for("compiled") is finding  # the one that suggests it
    assert panel.hypothesis_for("cuda_graph") is None  # a registry variant nobody suggested


def test_the_table_reads_in_words_with_one_baseline_and_the_winners_code_under_its_button(shell):
    import re

    panel = VariantPanel(
        slow_chain,
        lambda: torch.randn(100_000),
        shell=shell,
        compare_options=FAST,
        user_variants={"one_pass": one_chain, "also_one": one_chain, "broken": lambda x: x[:3]},
    )
    panel.run()
    table = panel.table.value
    for header in ("correct", "median (ms)", "speed-up", "95 % interval", "setup", "decision"):
        assert f"<th>{header}</th>" in table, header
    for raw in ("median_ms", "speedup_ci_low", "setup_ms", "True", "False"):
        assert raw not in table, raw
    assert not re.search(r"\d\.\d+e[+-]\d", table)  # no scientific notation anywhere
    assert "✓" in table and "✗" in table  # booleans as marks
    assert table.count("<td>eager</td>") == 1  # one baseline row for every candidate
    assert "1× (reference)" in table
    # every candidate's speed-up is against that one baseline measurement
    cmp = panel.comparison
    base_median = cmp["eager"].timing.median_ms
    for name in ("one_pass", "also_one"):
        row = cmp[name]
        assert row.speedup.point == pytest.approx(base_median / row.timing.median_ms, rel=0.35), name
    # the records are workbench.render's, the winner's first and open
    assert "wb-decision-record" in panel.records.value and panel.records.value.startswith("<details open")
    children = list(panel.widget.children)
    buttons = next(
        i for i, c in enumerate(children) if getattr(c, "children", None) and panel.insert_button in c.children
    )
    assert children[buttons + 1] is panel.code  # the code right under its button
    panel.insert_winner()
    assert panel.code.value.startswith(f"# {panel.winner()}:")
