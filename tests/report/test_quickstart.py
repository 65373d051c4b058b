"""The quickstart notebook a new user opens first runs top to bottom without an error output."""

import ast
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from workbench.report.kernel import current_interpreter_kernel, ipc_kernel_manager_class

pytestmark = pytest.mark.slow
NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "quickstart.ipynb"


def test_quickstart_executes_without_errors(tmp_path):
    nb = nbformat.read(NOTEBOOK, as_version=4)
    with current_interpreter_kernel() as kernel_name:
        NotebookClient(
            nb,
            timeout=300,
            kernel_name=kernel_name,
            kernel_manager_class=ipc_kernel_manager_class(),
            resources={"metadata": {"path": str(tmp_path)}},
        ).execute()
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    errors = [o for o in outputs if o.output_type == "error"]
    assert errors == [], errors[0].get("evalue") if errors else ""
    chart_outputs = [
        h for h in (o.get("data", {}).get("text/html", "") for o in outputs) if 'class="workbench-chart"' in h
    ]
    assert sum(h.count('class="workbench-chart"') for h in chart_outputs) >= 2
    # the vega libraries travel once per notebook, in the first chart's output (the saved file stays
    # small; tests/browser/test_saved_notebook.py shows every chart drawing after a reload)
    assert sum(h.count("if (!window.vegaEmbed) { (function") for h in chart_outputs) == 1
    assert "median" in "".join(o.get("text", "") for o in outputs)
    printed = "".join(o.get("text", "") for o in outputs)
    assert "# Decision: `" in printed and "compiled" in printed  # the experiment ran to a record
    saved = [
        ast.literal_eval(o["data"]["text/plain"])
        for o in outputs
        if o.output_type == "execute_result" and "workbench-figs-" in o.get("data", {}).get("text/plain", "")
    ]
    assert saved, "the save_charts cell shows where it wrote"
    svgs = [Path(p) for p in saved[0] if p.endswith(".svg")]
    assert len(svgs) >= 4 and all(p.read_text().lstrip().startswith("<svg") for p in svgs)
    assert all(not p.is_relative_to(NOTEBOOK.parents[1]) for p in svgs)  # nothing into the repository
    assert not (tmp_path / "figs").exists()
