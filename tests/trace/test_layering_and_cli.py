"""The trace layer imports neither torch, IPython nor altair; `workbench analyze` prints a diagnosis."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.trace.conftest import GPU

ROOT = Path(__file__).resolve().parents[2]


def test_trace_layer_does_not_import_heavy_packages_nor_the_layers_above():
    code = (
        "import sys, warnings; warnings.simplefilter('ignore'); from workbench.trace import read_trace; "
        f"read_trace({str(GPU / 'a100_alexnet.json.gz')!r}); "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'IPython', 'altair') "
        "or m.split('.')[:2] in (['workbench', 'analysis'], ['workbench', 'hypotheses'], "
        "['workbench', 'charts'], ['workbench', 'facade'])))"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_loading_a_trace_for_analysis_imports_neither_torch_ipython_nor_altair():
    code = (
        "import sys, warnings; warnings.simplefilter('ignore'); import workbench as wb; "
        f"t = wb.load_trace({str(GPU / 'a100_alexnet.json.gz')!r}); t.kernel_breakdown(); t.hypotheses(); "
        "print([m for m in ('torch', 'IPython', 'altair') if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def _analyze(*args):
    import argparse

    from workbench.cli import analyze

    parser = argparse.ArgumentParser()
    analyze.register(parser.add_subparsers(dest="command"))
    ns = parser.parse_args(["analyze", *args])
    return ns.handler(ns)


def test_analyze_prints_tables_and_hypotheses(capsys):
    assert _analyze(str(GPU / "a100_alexnet.json.gz"), "--top", "3") == 0
    out = capsys.readouterr().out
    assert out.startswith("Trace: 1 rank(s) [0]")
    assert "== kernel breakdown ==" in out and "Memcpy HtoD (Pageable -> Device)" in out
    assert "== hypotheses (ranked) ==" in out


def test_analyze_json_one_rank(capsys):
    assert _analyze(str(GPU / "dlrm_8rank"), "--rank", "3", "--json") == 0
    data = json.loads(capsys.readouterr().out)
    assert data["trace"]["ranks"] == [3]
    assert data["trace"]["summary"].startswith("Trace: 1 rank(s) [3]")
    assert "kernel_breakdown" in data["analyses"] and "hypotheses" in data
