"""Which notebook cell a cell's code file is: ipykernel compiles each cell's code under a file named
for a hash of its text (``/tmp/ipykernel_<pid>/<id>.py``), which is all a trace records; the shell's
history holds each cell's text by its execution count, and its compiler names a text's file the same
way again. ``notebook_cells()`` maps the ids of the running shell's cells to their counts, so that the
attribution reads ``cell [7], line 3`` (``workbench.analysis.attribution.cell_location``).

Outside IPython (a script, a test) there is no shell and the map is empty; IPython is never imported
here, only read where it already runs.
"""

from __future__ import annotations

import re
import sys
from typing import Any

MAX_CELLS = 5000  # the most recent cells looked up (a long session's history stays cheap to hash)
_CELL_FILE = re.compile(r"(?:^|[/\\])ipykernel_\d+[/\\](\d+)\.py$")


def cell_id(filename: str) -> str | None:
    """The id of a cell's code file (``.../ipykernel_81/3855453478.py`` -> ``"3855453478"``), else None."""
    found = _CELL_FILE.search(filename or "")
    return found.group(1) if found else None


def notebook_cells(shell: Any = None) -> dict[str, int]:
    """``{cell id: execution count}`` for the cells in the running (or given) shell's history; {} where
    there is no shell or its compiler does not name cells by files (a terminal IPython's
    ``<ipython-input-7-…>`` names carry their count already)."""
    if shell is None:
        ipython = sys.modules.get("IPython")
        shell = ipython.get_ipython() if ipython is not None else None
    if shell is None:
        return {}
    try:
        history = shell.history_manager
        raw, parsed = list(history.input_hist_raw), list(history.input_hist_parsed)
        name_of = shell.compile.get_code_name
        out: dict[str, int] = {}
        for count in range(max(1, len(raw) - MAX_CELLS), len(raw)):
            found = cell_id(str(name_of(raw[count], parsed[count] if count < len(parsed) else raw[count], count)))
            if found is not None:
                out[found] = count
        return out
    except Exception:  # noqa: BLE001 - a shell without this history names no cell; the profile is fine
        return {}
