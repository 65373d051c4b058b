"""``workbench history [PATH] [--key K]``: list a history file's cells (keys), or one cell's runs
and change points, and write its trend chart (an offline HTML page, or .svg / .png / .json)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from workbench.errors import InvalidArgumentError

DESCRIPTION = """\
Read a per-cell history (written by %%gpuprofile and wb.profile: one entry per run, keyed by the
cell's source hash, the environment fingerprint and the notebook) and print it.

Without --key: every key in the file, shown by the cell's first line (the callable's for wb.profile),
with its number of runs and its change points; a file with one key shows that key's runs too. With --key (a key or a unique prefix of one):
that cell's runs (time, median, IQR) and its change points (where a significant shift begins, by a
step fit with a noise model), and a trend chart with the changes marked.

PATH: a history file, a notebook (the history beside it), or a folder holding
workbench-history.jsonl; default: $WORKBENCH_HISTORY, else workbench-history.jsonl here: the file
%%gpuprofile writes beside the notebook (and wb.profile in the current folder). A history written
by an older workbench to .workbench/history.jsonl is still read where no workbench-history.jsonl is.
"""

EPILOG = """\
examples:
  workbench history
  workbench history notebooks/workbench-history.jsonl --key 3fa9
  workbench history --key 3fa9 --chart trend.svg
"""


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser(
        "history",
        help="list a cell's runs and change points, and chart the trend",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "path",
        nargs="?",
        default=None,
        help="a history file, a notebook (its history beside it) or a folder holding one",
    )
    p.add_argument("--key", default=None, help="one cell's key (or a unique prefix of it)")
    p.add_argument(
        "--chart",
        metavar="FILE",
        default=None,
        help="where the trend chart goes (.html, .svg, .png or .json; default: "
        "history-<key prefix>.html beside the history file)",
    )
    p.add_argument("--no-chart", action="store_true", help="print only; write no chart")
    p.set_defaults(handler=run)


def resolve_path(path: str | None) -> Path:
    """The history file PATH names (a file, a notebook, or a folder holding one), or the default one
    (``default_history_path()``: workbench-history.jsonl here, what %%gpuprofile writes)."""
    from workbench.study.history import LEGACY_FILE, LEGACY_FOLDER, NOTEBOOK_FILE, default_history_path
    from workbench.study.records import check_regular

    if path is None:
        found = default_history_path()
        legacy = Path.cwd() / LEGACY_FOLDER / LEGACY_FILE
        if not found.exists() and legacy.is_file():
            found = legacy  # written by an older workbench
    elif path.endswith(".ipynb"):
        found = default_history_path(path)  # the history beside that notebook
    else:
        found = Path(path)
        if found.is_dir():
            candidates = [found / NOTEBOOK_FILE, found / LEGACY_FOLDER / LEGACY_FILE, found / LEGACY_FILE]
            found = next((c for c in candidates if c.is_file()), candidates[0])
    if os.path.lexists(found):
        check_regular(found, "history file")  # a FIFO, device or folder: said, never opened
    if not found.is_file():
        raise InvalidArgumentError(
            f"no history file at {str(found)!r}: profile a cell with %%gpuprofile (or a "
            f"callable with wb.profile) first, or pass the path of a history file"
        )
    return found


def _pick_key(keys: list[tuple[str, int, str]], wanted: str, path: Path) -> str:
    exact = [k for k, _, _ in keys if k == wanted]
    if exact:
        return exact[0]
    matches = [k for k, _, _ in keys if k.startswith(wanted)]
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise InvalidArgumentError(
            f"no key {wanted!r} in {str(path)!r}; its keys are {[k for k, _, _ in keys] or 'none'}"
        )
    raise InvalidArgumentError(
        f"{wanted!r} is the start of {len(matches)} keys in {str(path)!r} ({matches}): give more of the key"
    )


def run(args: argparse.Namespace) -> int:
    import warnings

    from workbench.study.history import history_keys, load_history

    path = resolve_path(args.path)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        keys = history_keys(path)
        if args.key is None and len(keys) != 1:
            print(f"{path}: {len(keys)} key(s)")
            for key, n, label in keys:
                h = load_history(path, key)
                changes = ", ".join(str(i) for i in h.change_points) or "none"
                print(f"  {label or '(no first line recorded)'}\n      key {key}  {n} run(s)  change points: {changes}")
            if keys:
                print("show one with --key KEY (a unique prefix is enough)")
            history = None
        else:
            key = keys[0][0] if args.key is None else _pick_key(keys, args.key, path)
            history = load_history(path, key)
    for w in caught:
        print(f"workbench history: warning: {w.message}", file=sys.stderr)
    if history is None:
        return 0
    print(history.to_text())
    if not args.no_chart:
        from workbench.charts.history import history_chart
        from workbench.charts.offline import save

        target = Path(args.chart) if args.chart else path.parent / f"history-{history.key[:8]}.html"
        if target.suffix.lower() not in (".html", ".svg", ".png", ".json"):
            raise InvalidArgumentError(f"--chart takes a .html, .svg, .png or .json file; got {str(target)!r}")
        save(history_chart(history), target)
        print(f"chart: {target}")
    return 0
