"""A training step written the ordinary way, in a real Jupyter kernel (nbclient + ipykernel, as
`jupyter execute` runs a notebook): a tiny GPT-style model with a hand-written attention, an
AdamW(foreach=False), ``def step(): opt.zero_grad(); loss = loss_fn(model, x, y); loss.backward();
opt.step(); return loss.detach()`` and a cell ``loss = step()`` profiled with ``%%gpuprofile``.

``%%gpuvariant`` then compares cells that end in an assignment on the name both bind (``loss``),
in training mode (outputs, every parameter gradient, the optimizer's updated state):
- the same step with a foreach=True AdamW (same state) is kept or undecided, never rejected;
- ``loss = step_foreach() * 2`` is rejected;
- the model with its softmax detached (same forward, wrong gradients) is rejected;
- a cell that binds nothing and has no last value is refused in one line;
- the variant panel rejects the doubled loss too;
- the record is shown once and says the cells take no inputs; the names the cells bind get back
  the values they had before.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.magics.training_cells import FAST, PROFILE, SETUP, VARIANTS

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipywidgets")

ROOT = Path(__file__).resolve().parents[2]
CELL_TIMEOUT_S = 240


def _summary(name: str) -> str:
    return (
        f"print('SUMMARY ' + json.dumps({{'decision': _gpuvariant[{name!r}].decision, "
        f"'reason': _gpuvariant[{name!r}].decision_reason, 'mode': _gpuvariant.decision.mode, "
        f"'status': _gpuvariant[{name!r}].status}}))"
    )


CELLS = [
    SETUP,  # 0
    PROFILE,  # 1
    VARIANTS,  # 2
    f"%%gpuvariant foreach {FAST}\nloss = step_foreach()",  # 3
    _summary("foreach"),  # 4
    f"%%gpuvariant doubled {FAST}\nloss = step_foreach() * 2",  # 5
    _summary("doubled"),  # 6
    f"%%gpuvariant detached {FAST}\nloss = step_detached()",  # 7
    _summary("detached"),  # 8
    f"%%gpuvariant nothing {FAST}\nfor _ in range(1):\n    step_foreach()",  # 9
    "print('SAME', loss is loss_before, torch.equal(model.head.weight, weight_before))",  # 10
    # the panel on the same step: the doubled loss is rejected there too
    "from workbench.widgets import VariantPanel\n"
    "panel = VariantPanel(step, None, user_variants={'doubled': lambda: step_foreach() * 2},\n"
    "                     compare_options=dict(budget_s=0.5, checks=2, mode='training'))\n"
    "panel.run()\n"
    "print('PANEL ' + json.dumps({n: r['decision'] for n, r in panel.rows.items()}))\n"
    "print('STATUS ' + panel.status.value)",  # 11
]


def _texts(cell) -> str:
    parts = []
    for out in cell.get("outputs", []):
        parts.append(out.get("text", ""))
        parts.append(out.get("evalue", "") or "")
        for value in (out.get("data") or {}).values():
            parts.append(value if isinstance(value, str) else str(value))
    return "\n".join(parts)


def _html(cell) -> str:
    return "\n".join((out.get("data") or {}).get("text/html", "") for out in cell.get("outputs", []))


def _summary_of(cell) -> dict:
    line = next(ln for ln in _texts(cell).splitlines() if ln.startswith("SUMMARY "))
    return json.loads(line[len("SUMMARY ") :])


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
            nb, timeout=CELL_TIMEOUT_S, kernel_name="python3", allow_errors=True, startup_timeout=120
        )
        client.execute(cwd=str(tmp_path_factory.mktemp("training")))
    finally:
        if env_before is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = env_before
    if os.environ.get("WORKBENCH_KEEP_NOTEBOOK"):
        nbformat.write(nb, os.environ["WORKBENCH_KEEP_NOTEBOOK"])
    return nb


def _no_error(cell) -> None:
    errors = [
        o
        for o in cell.get("outputs", [])
        if o.get("output_type") == "error" or (o.get("name") == "stderr" and "Error" in o.get("text", ""))
    ]
    assert not errors, _texts(cell)[-3000:]


def test_the_setup_and_the_profile_run(executed):
    for i in (0, 1, 2):
        _no_error(executed.cells[i])


def test_a_foreach_optimizer_is_kept_or_undecided_never_rejected(executed):
    _no_error(executed.cells[3])
    summary = _summary_of(executed.cells[4])
    assert summary["mode"] == "training", summary
    assert summary["decision"] in ("keep", "need_more_evidence", "micro_only"), summary
    assert not summary["reason"].startswith("cannot judge"), summary  # it was checked, not waved through


def test_the_record_is_shown_once_and_states_the_cell_takes_no_inputs(executed):
    page = _html(executed.cells[3])
    assert page.count("Decision record:") == 1, page.count("Decision record:")
    assert "training" in page and "takes no inputs" in page
    assert "fresh random inputs" not in page
    assert "compared on `loss`" in page  # what the cells were compared on


def test_a_doubled_loss_is_rejected(executed):
    _no_error(executed.cells[5])
    summary = _summary_of(executed.cells[6])
    assert summary["decision"] == "reject", summary
    assert "loss" in summary["reason"], summary


def test_the_model_with_its_softmax_detached_is_rejected_for_its_gradients(executed):
    _no_error(executed.cells[7])
    summary = _summary_of(executed.cells[8])
    assert summary["decision"] == "reject", summary
    assert "grad" in summary["reason"], summary


def test_a_cell_that_binds_nothing_is_refused_in_one_line(executed):
    shown = _texts(executed.cells[9]).strip()
    assert "UsageError" in shown and "nothing to compare" in shown, shown
    assert "Traceback" not in shown and len([ln for ln in shown.splitlines() if ln.strip()]) == 1, shown


def test_the_names_the_cells_bind_get_their_values_back(executed):
    line = next(ln for ln in _texts(executed.cells[10]).splitlines() if ln.startswith("SAME"))
    assert line.split()[1] == "True", line  # loss is the profiled cell's again


def test_the_model_is_left_as_the_comparisons_found_it(executed):
    line = next(ln for ln in _texts(executed.cells[10]).splitlines() if ln.startswith("SAME"))
    assert line.split()[2] == "True", line  # the engine's state restore


def test_the_panel_rejects_the_doubled_loss_too(executed):
    _no_error(executed.cells[11])
    line = next(ln for ln in _texts(executed.cells[11]).splitlines() if ln.startswith("PANEL "))
    decisions = json.loads(line[len("PANEL ") :])
    assert decisions.get("doubled") == "reject", line
