"""What the study and trace reports share: where their templates are, and the value naming the
files a report wrote."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from workbench.errors import ReportError


def find_template(name: str, what: str) -> Path:
    """``templates/<name>`` next to the package (a checkout or an editable install); ``what``
    names the report in the error when it is missing."""
    here = Path(__file__).resolve()
    for candidate in (here.parents[1] / "templates" / name, here.parents[2] / "templates" / name):
        if candidate.is_file():
            return candidate
    raise ReportError(
        f"the {what} template templates/{name} was not found next to the workbench package; pass --template PATH.ipynb"
    )


@dataclass(frozen=True)
class ReportFiles:
    """Where a report's files are (its folder, the HTML page, the executed notebook) and what it
    holds (``summary``, as written to summary.json)."""

    out_dir: str
    html_path: str
    notebook_path: str
    summary: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return {
            "out_dir": self.out_dir,
            "html_path": self.html_path,
            "notebook_path": self.notebook_path,
            "summary": self.summary,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "ReportFiles":
        return cls(
            out_dir=d["out_dir"], html_path=d["html_path"], notebook_path=d["notebook_path"], summary=dict(d["summary"])
        )
