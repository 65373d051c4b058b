"""The layer table of DESIGN.md, held against every import in ``workbench/``.

An ast walk reads every import: at module level, inside functions, and the module names given to
``importlib.import_module("...")``, ``__import__("...")`` and ``require_package("...")``; imports
under ``if TYPE_CHECKING:`` are annotations only and are excepted from the table (not from the
circles between packages, below). Each import is checked against
the table below (a package may import the packages its row names, and what those may import in
turn: data flows one way, so reaching further down never closes a circle; ``workbench.errors`` and
``workbench.units`` and ``workbench.measurement``, leaves of the standard library (and numpy for
the measurement), and ``workbench._moved``, the old module paths, may be imported by every module) and
against the third-party rules (``trace``, ``analysis`` and ``hypotheses`` import neither torch,
IPython nor altair; ``trace`` reads with numpy, pandas, msgspec and a columnar format only;
``devices`` imports torch lazily, inside functions). Circles are counted over the module graph of
module-level and function-level imports together (a function-level import still makes the two
modules know each other), and the ``TYPE_CHECKING`` imports from one package into another (an
annotation still ties the packages together; inside one package it is how Python breaks a circle),
one report per strongly connected group of modules, with one path round it.
"""

from __future__ import annotations

import ast
import sys
import textwrap
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

PACKAGE_ROOT = Path(__file__).resolve().parents[1] / "workbench"

# DESIGN.md's layer table: package -> the workbench packages its row says it may import.
# "face" is the public objects (workbench/api), magics, widgets, the CLI package (workbench/cli) and
# the package root (``workbench/__init__.py``, whose lazy names reach every layer); it may import every
# package above it in the table, as ``report`` may.
LAYER_TABLE: dict[str, frozenset[str]] = {
    "trace": frozenset(),
    "analysis": frozenset({"trace", "devices"}),
    "devices": frozenset(),
    "hypotheses": frozenset({"analysis", "devices"}),
    "capture": frozenset({"trace"}),
    "variants": frozenset({"capture", "kernels"}),  # workbench.fixes (the catalog) is part of this layer
    "study": frozenset({"capture", "variants", "hypotheses"}),
    "render": frozenset({"charts", "analysis", "hypotheses"}),  # capture, variants, study: type-only
    "charts": frozenset({"analysis"}),
    "workloads": frozenset(),  # workbench/workloads: the built-in demo workload (torch only)
    "kernels": frozenset(),  # the project's own fused Triton kernels (torch, triton): no other layer
    "report": frozenset(
        {"trace", "analysis", "devices", "hypotheses", "capture", "variants", "study", "render", "charts", "workloads"}
    ),
    "face": frozenset(
        {
            "trace",
            "analysis",
            "devices",
            "hypotheses",
            "capture",
            "variants",
            "study",
            "render",
            "charts",
            "workloads",
            "report",
        }
    ),
}
# Leaves every layer may import: the one error hierarchy (workbench.errors), the one time
# formatter of every view (workbench.units), the timing value (workbench.measurement) and the one
# reader/writer discipline of the files workbench reads again (workbench.records). A leaf imports
# the standard library only (and LEAF_THIRD_PARTY below).
EVERYWHERE = "leaf"

# module (or package) name inside workbench -> its layer, where the name is not itself a package
# of the table
MODULE_LAYERS = {
    "workbench": "face",
    "workbench.cli": "face",
    "workbench.commands": "face",  # the old path of the subcommands (now workbench.cli.*): deprecated
    "workbench.magics": "face",
    "workbench.widgets": "face",
    "workbench.api": "face",  # the public objects: api.trace (Trace, load_trace), api.run (ProfileRun,
    # load_run), api.profiling (wb.profile), api.rank_folder (a folder of rank
    # traces behind load_trace), api.distributed (wb.profile_distributed, step)
    # the old paths of the public objects: deprecated re-exports of workbench.api for one release
    "workbench.facade": "face",
    "workbench.profile_run": "face",
    "workbench.profiling": "face",
    "workbench.rank_folder": "face",
    "workbench.distributed": "face",
    "workbench.demo": "workloads",  # the old path of workbench.workloads.demo: deprecated
    # the catalog of fixes is the variant registry: the same layer (it builds Variants, the engine
    # resolves names through it); it may swap in the project's kernels
    "workbench.fixes": "variants",
    "workbench.errors": EVERYWHERE,
    "workbench.units": EVERYWHERE,
    "workbench.measurement": EVERYWHERE,
    "workbench._moved": EVERYWHERE,  # the old module paths' table and their DeprecationWarning (stdlib only)
    # the one reader/writer discipline of the files workbench writes and reads again (bounded
    # regular-file reads, locks, atomic writes, the write check): study, run bundles, the trace cache
    "workbench.records": EVERYWHERE,
}
# A leaf imports the standard library only, except these value leaves, which may also import the
# numeric library the bottom layer (trace) itself reads with: Measurement (raw timing samples and
# their statistics) is a value every layer holds, from capture up to the charts.
LEAF_THIRD_PARTY: dict[str, frozenset[str]] = {
    "workbench.measurement": frozenset({"numpy"}),
}

# ROOT_NOTE: every import of a submodule imports the package root first, so naming the bare root
# (``import workbench`` for ``__file__``, ``from workbench import __version__``) adds no dependency
# and no edge. Its lazy public names are another matter: ``from workbench import compare`` is read
# as an import of the module the root's ``_LAZY`` table loads it from (workbench.variants).

NOT_TORCH_IPYTHON_ALTAIR = frozenset({"torch", "IPython", "altair"})
FORBIDDEN_THIRD_PARTY: dict[str, frozenset[str]] = {
    "trace": NOT_TORCH_IPYTHON_ALTAIR,
    "analysis": NOT_TORCH_IPYTHON_ALTAIR,
    "hypotheses": NOT_TORCH_IPYTHON_ALTAIR,
}
ONLY_THIRD_PARTY: dict[str, frozenset[str]] = {
    "trace": frozenset({"numpy", "pandas", "msgspec", "pyarrow"}),
}
ONLY_LAZILY: dict[str, frozenset[str]] = {
    "devices": frozenset({"torch"}),
}

# Edges not cut yet (importer -> imported module), each with why and who cuts it. The test fails on
# any forbidden edge or circle not listed here AND on any entry here that is no longer forbidden nor
# on a circle, so this table can only shrink; issue 13 emptied it. A circle is listed by one of its
# edges: the circles are counted with the listed edges left out.
KNOWN_VIOLATIONS: dict[str, str] = {}


# --- the checker ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Import:
    importer: str  # the importing module, dotted
    target: str  # a module inside the package (dotted, resolved), or a top-level third-party name
    line: int
    in_function: bool
    via: str  # "import", "from", "import_module"
    type_only: bool = False  # under ``if TYPE_CHECKING:``: annotations only


def module_names(root: Path) -> dict[str, Path]:
    """Dotted module name -> file, for every ``.py`` under ``root`` (a package folder)."""
    names = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        names[".".join(parts)] = path
    return names


class _Imports(ast.NodeVisitor):
    def __init__(self, module: str, is_package: bool, known: set[str], top: str, lazy: dict[str, str]):
        self.module, self.known, self.top, self.lazy = module, known, top, lazy
        self.package = module if is_package else module.rpartition(".")[0]
        self.depth = 0
        self.type_checking = 0
        self.found: list[Import] = []

    # scopes
    def visit_FunctionDef(self, node: ast.AST) -> None:
        self.depth += 1
        self.generic_visit(node)
        self.depth -= 1

    visit_AsyncFunctionDef = visit_FunctionDef
    visit_Lambda = visit_FunctionDef

    def visit_If(self, node: ast.If) -> None:
        if _is_type_checking(node.test):
            self.type_checking += 1
            for child in node.body:
                self.visit(child)
            self.type_checking -= 1
            for child in node.orelse:
                self.visit(child)
            return
        self.generic_visit(node)

    # imports
    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._add(self._resolve_module(alias.name), node, "import")

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        base = self._absolute(node.module or "", node.level)
        for alias in node.names:
            candidate = f"{base}.{alias.name}"
            if candidate in self.known:
                self._add(candidate, node, "from")
            elif base == self.top and alias.name in self.lazy:  # a lazy public name: its module
                self._add(self._resolve_module(self.lazy[alias.name]), node, "from")
            else:
                self._add(self._resolve_module(base), node, "from")

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
        if name in ("import_module", "__import__", "require_package") and node.args:
            first = node.args[0]
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                target = first.value
                if target.startswith("."):
                    level = len(target) - len(target.lstrip("."))
                    target = self._absolute(target.lstrip("."), level)
                self._add(self._resolve_module(target), node, "import_module")
        self.generic_visit(node)

    def _absolute(self, name: str, level: int) -> str:
        if not level:
            return name
        base = self.package.split(".")
        base = base[: len(base) - (level - 1)]
        return ".".join(base + ([name] if name else []))

    def _resolve_module(self, name: str) -> str:
        """The longest known module prefix of ``name``; a third-party name by its top level."""
        if name.split(".")[0] != self.top:
            return name.split(".")[0]
        parts = name.split(".")
        while parts and ".".join(parts) not in self.known:
            parts.pop()
        return ".".join(parts) if parts else name

    def _add(self, target: str, node: ast.AST, via: str) -> None:
        self.found.append(Import(self.module, target, node.lineno, self.depth > 0, via, self.type_checking > 0))


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def imports_of(root: Path) -> list[Import]:
    """Every import of every module under the package folder ``root``."""
    names = module_names(root)
    known, top = set(names), root.name
    lazy = lazy_names(names[top]) if top in names else {}
    found: list[Import] = []
    for module, path in names.items():
        visitor = _Imports(module, path.name == "__init__.py", known, top, lazy)
        visitor.visit(ast.parse(path.read_text(encoding="utf-8"), filename=str(path)))
        found += visitor.found
    return found


def lazy_names(root_init: Path) -> dict[str, str]:
    """The package root's lazy public names (its ``_LAZY`` table): name -> the module it loads."""
    for node in ast.parse(root_init.read_text(encoding="utf-8")).body:
        target = (
            node.target
            if isinstance(node, ast.AnnAssign)
            else (node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else None)
        )
        if isinstance(target, ast.Name) and target.id == "_LAZY" and node.value is not None:
            return {name: module for name, (module, _) in ast.literal_eval(node.value).items()}
    return {}


def layer_of(module: str, top: str = "workbench") -> str | None:
    """The layer of a module inside the package: its table row, or None where none fits."""
    parts = ["workbench"] + module.split(".")[1:] if module.split(".")[0] == top else module.split(".")
    for n in range(len(parts), 1, -1):
        if ".".join(parts[:n]) in MODULE_LAYERS:
            return MODULE_LAYERS[".".join(parts[:n])]
    if len(parts) > 1:
        return parts[1] if parts[1] in LAYER_TABLE else None
    return MODULE_LAYERS.get(parts[0])


def reachable(layer: str) -> frozenset[str]:
    """The layers ``layer`` may import: its row, and what those may import in turn."""
    seen: set[str] = set()
    todo = list(LAYER_TABLE.get(layer, ()))
    while todo:
        nxt = todo.pop()
        if nxt not in seen:
            seen.add(nxt)
            todo += LAYER_TABLE.get(nxt, ())
    return frozenset(seen)


def forbidden_imports(found: Iterable[Import], top: str = "workbench") -> dict[str, str]:
    """Each import edge ``importer -> target`` the layer table forbids, with why and its lines."""
    why: dict[str, str] = {}
    lines: dict[str, list[int]] = {}
    for imp in found:
        if imp.type_only:  # annotations only: the layer table excepts them (circles count them, see import_graph)
            continue
        reason = _forbidden_because(imp, top)
        if reason is not None:
            edge = f"{imp.importer} -> {imp.target}"
            why[edge] = reason
            lines.setdefault(edge, []).append(imp.line)
    return {edge: f"{why[edge]}, line {', '.join(map(str, sorted(set(lines[edge]))))}" for edge in sorted(why)}


def _forbidden_because(imp: Import, top: str) -> str | None:
    source = layer_of(imp.importer, top)
    if source is None:
        return "the importer has no row in the layer table"
    if imp.target == top:  # the bare root (``__version__``, ``__file__``): see ROOT_NOTE
        return None
    if imp.target == top or imp.target.startswith(top + "."):
        target = layer_of(imp.target, top)
        if target == EVERYWHERE or (target == source != EVERYWHERE) or target in reachable(source):
            return None
        return f"{source} may not import {target}"
    if imp.target in sys.stdlib_module_names or imp.target == "__future__":
        return None
    if source == EVERYWHERE and imp.target in LEAF_THIRD_PARTY.get(imp.importer, ()):
        return None
    if source == EVERYWHERE:
        return f"{imp.importer} is imported by every layer: the standard library only"
    if imp.target in FORBIDDEN_THIRD_PARTY.get(source, ()):
        return f"{source} imports no {imp.target}"
    if source in ONLY_THIRD_PARTY and imp.target not in ONLY_THIRD_PARTY[source]:
        return f"{source} reads with {', '.join(sorted(ONLY_THIRD_PARTY[source]))} only"
    if imp.target in ONLY_LAZILY.get(source, ()) and not imp.in_function:
        return f"{source} imports {imp.target} only inside functions"
    return None


def package_of(module: str) -> str:
    """The package a module belongs to: ``workbench.render.run`` -> ``workbench.render``; a module at
    the package root is its own (``workbench.errors``)."""
    return ".".join(module.split(".")[:2])


def import_graph(found: Iterable[Import], top: str = "workbench") -> dict[str, set[str]]:
    """Module -> the package's modules it imports (module level and inside functions, and the
    ``TYPE_CHECKING`` imports of another package: a circle between packages is one even where an
    annotation closes it; inside one package annotation-only imports are how Python breaks a
    circle, and are left out); an edge to the bare root is no edge (see ROOT_NOTE)."""
    graph: dict[str, set[str]] = {}
    for imp in found:
        if imp.type_only and package_of(imp.importer) == package_of(imp.target):
            continue
        if imp.target.startswith(top + "."):
            graph.setdefault(imp.importer, set()).add(imp.target)
            graph.setdefault(imp.target, set())
    return graph


def import_circles(
    graph: dict[str, set[str]],
    without: Iterable[str] = (),
    in_functions: Iterable[str] = (),
    type_only: Iterable[str] = (),
) -> list[str]:
    """One line per circle (a strongly connected group of two or more modules, or a module that
    imports itself), its modules and one path round it, ``~>`` marking an edge made only by imports
    inside functions (the edges ``in_functions``), ``:>`` one made only by ``TYPE_CHECKING`` imports
    (the edges ``type_only``); the edges ``without`` left out."""
    cut, lazy, typed = set(without), set(in_functions), set(type_only)
    graph = {node: {c for c in children if f"{node} -> {c}" not in cut} for node, children in graph.items()}
    out = []
    for group in _strongly_connected(graph):
        if len(group) > 1 or group[0] in graph[group[0]]:
            path = _cycle_through(graph, group)
            shown = path[0] + "".join(
                f" {':>' if f'{a} -> {b}' in typed else '~>' if f'{a} -> {b}' in lazy else '->'} {b}"
                for a, b in zip(path, path[1:])
            )
            out.append(f"circle of {len(group)} module(s): {shown} (all: {', '.join(group)})")
    return sorted(out)


def function_level_edges(found: Iterable[Import]) -> set[str]:
    """The edges ``a -> b`` every import of which is inside a function."""
    kinds: dict[str, set[bool]] = {}
    for imp in found:
        if not imp.type_only:
            kinds.setdefault(f"{imp.importer} -> {imp.target}", set()).add(imp.in_function)
    return {edge for edge, seen in kinds.items() if seen == {True}}


def type_only_edges(found: Iterable[Import]) -> set[str]:
    """The edges ``a -> b`` every import of which is under ``if TYPE_CHECKING:``."""
    kinds: dict[str, set[bool]] = {}
    for imp in found:
        kinds.setdefault(f"{imp.importer} -> {imp.target}", set()).add(imp.type_only)
    return {edge for edge, seen in kinds.items() if seen == {True}}


def circle_edges(graph: dict[str, set[str]]) -> set[str]:
    """The edges ``a -> b`` that lie on some circle (both ends in one strongly connected group)."""
    edges = set()
    for group in _strongly_connected(graph):
        members = set(group)
        edges |= {f"{a} -> {b}" for a in group for b in graph[a] & members}
    return edges


def _strongly_connected(graph: dict[str, set[str]]) -> Iterator[list[str]]:
    """Tarjan's algorithm, iteratively (no recursion limit on long chains)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                yield sorted(group)


def _cycle_through(graph: dict[str, set[str]], group: list[str]) -> list[str]:
    """A shortest path from the group's first module back to itself, inside the group."""
    members, start = set(group), group[0]
    previous: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for child in sorted(graph[node] & members):
                if child == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(previous[path[-1]])
                    return [start] + path[::-1][1:] + [start] if len(path) > 1 or node != start else [start, start]
                if child not in previous:
                    previous[child] = node
                    following.append(child)
        frontier = following
    return group


def violations(root: Path = PACKAGE_ROOT, known: Iterable[str] = frozenset()) -> list[str]:
    """Every forbidden edge and circle under the package folder ``root``, less the ``known`` edges;
    and each ``known`` edge that is neither forbidden nor on a circle any more."""
    known = frozenset(known)
    found = imports_of(root)
    forbidden = forbidden_imports(found, root.name)
    graph = import_graph(found, root.name)
    out = [f"{edge} ({why})" for edge, why in forbidden.items() if edge not in known]
    out += import_circles(
        graph, without=known, in_functions=function_level_edges(found), type_only=type_only_edges(found)
    )
    live = set(forbidden) | circle_edges(graph)
    out += [
        f"{edge}: in KNOWN_VIOLATIONS, but no longer forbidden nor on a circle: delete it"
        for edge in sorted(known - live)
    ]
    return out


# --- the tests -----------------------------------------------------------------------------------


def test_every_import_follows_the_layer_table_and_no_module_circles() -> None:
    found = violations(PACKAGE_ROOT, KNOWN_VIOLATIONS)
    assert not found, (
        "imports DESIGN.md's layer table forbids, import circles, and stale "
        "KNOWN_VIOLATIONS entries:\n  " + "\n  ".join(found)
    )


def test_the_table_names_every_package_of_workbench() -> None:
    names = module_names(PACKAGE_ROOT)
    unplaced = sorted(m for m in names if layer_of(m) is None)
    assert not unplaced, f"modules with no row in the layer table: {unplaced}"


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "workbench"
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text), encoding="utf-8")
    return root


CLEAN_TREE = {
    "__init__.py": "",
    "errors.py": "class WorkbenchError(Exception): ...\n",
    "trace/__init__.py": "from workbench.trace.tables import TraceData\n",
    "trace/tables.py": "import numpy\nfrom workbench.errors import WorkbenchError\nclass TraceData: ...\n",
    "analysis/__init__.py": "from workbench.analysis.kernels import kernel_breakdown\n",
    "analysis/kernels.py": """\
        from typing import TYPE_CHECKING
        from workbench.trace.tables import TraceData
        if TYPE_CHECKING:
            from workbench.charts.breakdowns import chart  # annotations only: excepted
        def kernel_breakdown(data: TraceData): ...
        """,
    "charts/__init__.py": "",
    # (not the analysis: the annotation of analysis/kernels.py above would close a circle between packages)
    "charts/breakdowns.py": "import altair\nfrom workbench.trace.tables import TraceData\ndef chart(): ...\n",
    "facade.py": "from workbench.analysis import kernel_breakdown\nfrom workbench.trace import TraceData\n",
}


def test_a_clean_tree_passes(tmp_path: Path) -> None:
    assert violations(_tree(tmp_path, CLEAN_TREE)) == []


@pytest.mark.parametrize(
    "module, text, expected",
    [
        (
            "trace/tables.py",
            "import workbench.analysis.kernels\n",
            "workbench.trace.tables -> workbench.analysis.kernels (trace may not import analysis, line 1)",
        ),
        (
            "trace/tables.py",
            "def f():\n    from workbench import charts\n",
            "workbench.trace.tables -> workbench.charts (trace may not import charts, line 2)",
        ),
        (
            "trace/tables.py",
            "import importlib\ndef f():\n    return importlib.import_module('workbench.facade')\n",
            "workbench.trace.tables -> workbench.facade (trace may not import face, line 3)",
        ),
        (
            "analysis/kernels.py",
            "def f():\n    import torch\n",
            "workbench.analysis.kernels -> torch (analysis imports no torch, line 2)",
        ),
        (
            "trace/tables.py",
            "import scipy\n",
            "workbench.trace.tables -> scipy (trace reads with msgspec, numpy, pandas, pyarrow only, line 1)",
        ),
        (
            "charts/breakdowns.py",
            "from ..facade import x\n",
            "workbench.charts.breakdowns -> workbench.facade (charts may not import face, line 1)",
        ),
    ],
)
def test_an_added_forbidden_import_fails(tmp_path: Path, module: str, text: str, expected: str) -> None:
    files = dict(CLEAN_TREE)
    files[module] = text + textwrap.dedent(files[module])  # added first: the line numbers above hold
    found = violations(_tree(tmp_path, files))
    assert expected in found, found


def test_an_added_circle_fails_at_module_and_at_function_level(tmp_path: Path) -> None:
    files = dict(CLEAN_TREE)
    files["trace/build.py"] = "from workbench.trace import tables\n"
    files["trace/tables.py"] = "def f():\n    from workbench.trace import build\n"
    found = violations(_tree(tmp_path, files))
    assert (
        "circle of 2 module(s): workbench.trace.build -> workbench.trace.tables ~> workbench.trace.build "
        "(all: workbench.trace.build, workbench.trace.tables)"
    ) in found


def test_the_real_tree_fails_on_an_added_forbidden_import_and_an_added_circle(tmp_path: Path) -> None:
    """The package as it is, copied, with one forbidden edge (capture drawing a chart) and one
    circle (the bundle importing the run record that imports it) added: both are reported."""
    root = tmp_path / "workbench"
    for path in PACKAGE_ROOT.rglob("*.py"):
        target = root / path.relative_to(PACKAGE_ROOT)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(path.read_text(encoding="utf-8"), encoding="utf-8")
    assert violations(root, KNOWN_VIOLATIONS) == violations(PACKAGE_ROOT, KNOWN_VIOLATIONS)
    with open(root / "capture" / "run.py", "a", encoding="utf-8") as run_module:
        run_module.write("\ndef _chart():\n    from workbench.charts.export import save_charts\n")
    with open(root / "capture" / "bundle.py", "a", encoding="utf-8") as bundle_module:
        bundle_module.write("\nfrom workbench.capture.run import RunRecord\n")
    found = "\n".join(violations(root, KNOWN_VIOLATIONS))
    assert "workbench.capture.run -> workbench.charts.export (capture may not import charts" in found
    assert "circle of 2 module(s): workbench.capture.bundle -> workbench.capture.run" in found


@pytest.mark.parametrize(
    "module, text, expected",
    [
        (
            "units.py",
            "import numpy\n",
            "workbench.units -> numpy (workbench.units is imported by every layer: the standard library only, line 1)",
        ),
        (
            "measurement.py",
            "import pandas\n",
            "workbench.measurement -> pandas (workbench.measurement is imported by every layer: the standard library "
            "only, line 1)",
        ),
    ],
)
def test_a_leaf_imports_the_standard_library_only_and_the_measurement_numpy(
    tmp_path: Path, module: str, text: str, expected: str
) -> None:
    files = dict(CLEAN_TREE, **{"units.py": "import math\n", "measurement.py": "import numpy\n"})
    assert violations(_tree(tmp_path, files)) == []
    files[module] += text.replace("line 1", "")
    found = violations(_tree(tmp_path / "b", files))
    assert found == [expected.replace("line 1", "line 2")]


def test_known_violations_excuse_only_what_still_occurs(tmp_path: Path) -> None:
    files = dict(CLEAN_TREE)
    files["trace/tables.py"] = "import altair\n"
    root = _tree(tmp_path, files)
    edge = "workbench.trace.tables -> altair"
    assert violations(root) == [f"{edge} (trace imports no altair, line 1)"]
    assert violations(root, frozenset({edge})) == []
    files["trace/tables.py"] = "import numpy\n"  # fixed: the entry must go
    assert violations(_tree(tmp_path, files), frozenset({edge})) == [
        f"{edge}: in KNOWN_VIOLATIONS, but no longer forbidden nor on a circle: delete it"
    ]


def test_a_lazy_public_name_of_the_root_is_read_as_its_module(tmp_path: Path) -> None:
    files = dict(CLEAN_TREE)
    files["__init__.py"] = '_LAZY = {"Trace": ("workbench.facade", "Trace")}\n__version__ = "1"\n'
    files["analysis/kernels.py"] = "from workbench import __version__\nfrom workbench import Trace\n" + textwrap.dedent(
        CLEAN_TREE["analysis/kernels.py"]
    )
    found = violations(_tree(tmp_path, files))
    assert "workbench.analysis.kernels -> workbench.facade (analysis may not import face, line 2)" in found
    assert not [v for v in found if v.startswith("workbench.analysis.kernels -> workbench ")], found


def test_type_checking_imports_are_excepted_from_the_table(tmp_path: Path) -> None:
    files = dict(CLEAN_TREE)
    files["trace/build.py"] = (
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from workbench.facade import Trace\n"
    )
    assert violations(_tree(tmp_path, files)) == []


def test_a_type_checking_import_that_closes_a_circle_between_packages_is_a_circle(tmp_path: Path) -> None:
    """The face imports the trace package (whose __init__ imports trace.tables); trace.tables naming the
    facade's Trace in an annotation closes a circle between the packages: reported, ``:>`` marking it."""
    files = dict(CLEAN_TREE)
    files["trace/tables.py"] = (
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from workbench.facade import Trace\n"
    )
    found = violations(_tree(tmp_path, files))
    assert len(found) == 1 and found[0].startswith("circle of "), found
    assert "workbench.trace.tables :> workbench.facade" in found[0], found


def test_a_type_checking_import_inside_one_package_closes_no_circle(tmp_path: Path) -> None:
    files = dict(CLEAN_TREE)
    files["trace/build.py"] = "from workbench.trace import tables\n"
    files["trace/tables.py"] = (
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from workbench.trace.build import x\n"
    )
    assert violations(_tree(tmp_path, files)) == []


def test_no_circle_is_excused_any_more() -> None:
    """Issue 23 cut the last one (the charts annotated the face's ProfileRun; they read a structural
    ``ChartedRun`` now): the package has no forbidden edge and no circle, type-only imports counted."""
    assert KNOWN_VIOLATIONS == {}
    assert violations(PACKAGE_ROOT) == []


# test modules importing another test module, not moved yet (same rule: this set can only shrink)
KNOWN_TEST_IMPORTS: frozenset[str] = frozenset(
    {
        # notebook work: the `lab` fixture and its helpers belong in tests/browser/conftest.py
    }
)


def test_no_test_module_imports_another_test_module() -> None:
    """Shared builders live in a conftest.py or a support module (tests/hypotheses/builders.py,
    tests/variants/variant_workloads.py), not in another test module."""
    tests = Path(__file__).resolve().parent
    found: list[str] = []
    for path in sorted(tests.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            found += [
                f"{path.relative_to(tests.parent)} imports {n}"
                for n in names
                if n.startswith("tests.") and n.rsplit(".", 1)[-1].startswith("test_")
            ]
    new = sorted(set(found) - KNOWN_TEST_IMPORTS)
    gone = sorted(KNOWN_TEST_IMPORTS - set(found))
    assert not new and not gone, "\n".join(
        new + [f"{g}: in KNOWN_TEST_IMPORTS, no longer true: delete it" for g in gone]
    )
