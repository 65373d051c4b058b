"""Run a parameterised template notebook with papermill on the current interpreter."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

import nbformat

from workbench.errors import ReportError, require_package
from workbench.report.kernel import current_interpreter_kernel, ipc_kernel_manager_class

DEFAULT_TIMEOUT_S = 600


def check_template(path: Path) -> None:
    """A template must exist, be a notebook, have a ``parameters`` cell and a kernel language."""
    if not path.is_file():
        raise ReportError(f"report template {str(path)!r} does not exist; pass --template PATH.ipynb")
    try:
        nb = nbformat.read(path, as_version=4)
    except Exception as exc:  # nbformat raises several unrelated types
        raise ReportError(f"report template {str(path)!r} is not a readable notebook: {exc}") from exc
    if not nb.metadata.get("kernelspec", {}).get("language"):
        raise ReportError(
            f"report template {str(path)!r} lacks metadata.kernelspec.language, which papermill needs; "
            'add "kernelspec": {"name": "python3", "language": "python", "display_name": "Python 3"}'
        )
    if not any("parameters" in c.get("metadata", {}).get("tags", []) for c in nb.cells):
        raise ReportError(f"report template {str(path)!r} has no cell tagged 'parameters'")


def execute_template(
    template: Path,
    output: Path,
    parameters: Mapping[str, Any],
    *,
    cwd: Path | None = None,
    timeout_s: int = DEFAULT_TIMEOUT_S,
) -> Path:
    """Execute ``template`` into ``output``; a failing cell becomes a ReportError naming it."""
    require_package("papermill", extra="report", feature="executing a report notebook")
    import papermill as pm

    check_template(template)
    output.parent.mkdir(parents=True, exist_ok=True)
    with current_interpreter_kernel() as kernel_name:
        try:
            pm.execute_notebook(
                str(template),
                str(output),
                parameters=dict(parameters),
                kernel_name=kernel_name,
                progress_bar=False,
                cwd=str(cwd or output.parent),
                execution_timeout=timeout_s,
                kernel_manager_class=ipc_kernel_manager_class(),
            )
        except pm.PapermillExecutionError as exc:
            raise ReportError(
                f"report template {template.name} failed in cell {exc.exec_count}: {exc.ename}: "
                f"{exc.evalue} (the partly executed notebook is {output})"
            ) from exc
    return output
