"""Which notebook cell a cell's code file is: ipykernel compiles each cell's code under a file named
for a hash of its text (``/tmp/ipykernel_<pid>/<id>.py``), which is all a trace records; the shell's
history holds each cell's text by its execution count, and its compiler names a text's file the same
way again. ``notebook_cells()`` maps the ids of the running shell's cells to their counts, so that the
attribution reads ``cell [7], line 3`` (``workbench.analysis.attribution.cell_location``), and
``source_line(file, line)`` names a line of the user's code the same way wherever it is shown (where a
fix applies: ``workbench.fixes``).

Outside IPython (a script, a test) there is no shell and the map is empty; IPython is never imported
here, only read where it already runs.
"""

from __future__ import annotations

import linecache
import os
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
        first = max(1, len(raw) - MAX_CELLS)
        for count in range(first, len(raw)):
            found = cell_id(str(name_of(raw[count], parsed[count] if count < len(parsed) else raw[count], count)))
            if found is not None:
                out[found] = count
        out.update({k: v for k, v in _by_compiled_text(parsed, first).items() if k not in out})
        return out
    except Exception:  # noqa: BLE001 - a shell without this history names no cell; the profile is fine
        return {}


def _by_compiled_text(parsed: list[str], first: int) -> dict[str, int]:
    """Cell files the shell's compiler cached (``linecache``: each cell's code under its file's name) matched
    to the history by their text. The history keeps a cell's text without its trailing newlines, while
    ipykernel named the file for the text as typed, so a cell ending in a blank line is not found by
    naming its history text again; its compiled text still reads the same, trailing newlines aside."""
    by_text: dict[str, int] = {}
    for count in range(first, len(parsed)):
        by_text[str(parsed[count]).rstrip()] = count  # the latest run of a text wins
    out: dict[str, int] = {}
    for name, entry in list(linecache.cache.items()):
        found = cell_id(str(name))
        if found is None or not isinstance(entry, tuple) or len(entry) < 3:
            continue
        matched = by_text.get("".join(entry[2]).rstrip())
        if matched is not None:
            out[found] = matched
    return out


def source_line(filename: str, line: int | str, cells: dict[str, int] | None = None) -> str:
    """A line of the user's code as people read it: ``cell [7], line 3`` for a notebook cell's code file
    whose execution count the shell knows (``cells``: ``notebook_cells()`` when not given), else
    ``model.py:42`` (the file's name and the line)."""
    found = cell_id(filename)
    if found is not None:
        count = (notebook_cells() if cells is None else cells).get(found)
        if count is not None:
            return f"cell [{count}], line {line}"
    return f"{os.path.basename(filename)}:{line}"
