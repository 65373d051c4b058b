"""The quickstart notebook a new user opens first runs top to bottom without an error output."""
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
        NotebookClient(nb, timeout=300, kernel_name=kernel_name, kernel_manager_class=ipc_kernel_manager_class(),
                       resources={"metadata": {"path": str(tmp_path)}}).execute()
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    errors = [o for o in outputs if o.output_type == "error"]
    assert errors == [], errors[0].get("evalue") if errors else ""
    chart_outputs = [h for h in (o.get("data", {}).get("text/html", "") for o in outputs)
                     if 'class="workbench-chart"' in h]
    assert sum(h.count('class="workbench-chart"') for h in chart_outputs) >= 2
    # each output draws on its own (after a reload, in the saved file): one vega bundle apiece
    assert [h.count("if (!window.vegaEmbed) { (function") for h in chart_outputs] == [1] * len(chart_outputs)
    assert "median" in "".join(o.get("text", "") for o in outputs)
    printed = "".join(o.get("text", "") for o in outputs)
    assert "# Decision: `" in printed and "compiled" in printed        # the experiment ran to a record
    svgs = sorted((tmp_path / "figs").glob("*.svg"))
    assert len(svgs) >= 4 and all(p.read_text().lstrip().startswith("<svg") for p in svgs)
