"""In a fresh IPython shell, a Comparison, a DecisionRecord, a Diagnosis and ``run.hypotheses``
display as their HTML rendering: their layers may not import ``workbench.render``, so the HTML is
registered with IPython's display formatter by type name, when ``workbench`` is imported inside
the shell and by ``%load_ext workbench``, without importing altair."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("IPython")

ROOT = Path(__file__).resolve().parents[2]

BUILD = """
    from tests.render.conftest import decision_record, make_comparison, make_diagnosis
    from workbench.hypotheses import HypothesisList
    values = {"Comparison": make_comparison(), "DecisionRecord": decision_record(),
              "Diagnosis": make_diagnosis(), "HypothesisList": HypothesisList.from_diagnosis(make_diagnosis())}
    def shown():
        out = {}
        for name, value in values.items():
            data, _ = shell.display_formatter.format(value)
            out[name] = data.get("text/html", "")
        return out
"""


def _run(*parts: str) -> dict:
    script = "\n".join(textwrap.dedent(part) for part in parts)
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_importing_workbench_inside_a_shell_registers_the_html_display():
    result = _run(
        """
        import json, sys
        from IPython.core.interactiveshell import InteractiveShell
        shell = InteractiveShell.instance()
        import workbench
        altair_at_import = "altair" in sys.modules
    """,
        BUILD,
        """
        print(json.dumps({"altair_at_import": altair_at_import, "shown": shown()}))
    """,
    )
    assert result["altair_at_import"] is False
    shown = result["shown"]
    assert "<th>95 % interval</th>" in shown["Comparison"] and "&lt;script&gt;" in shown["Comparison"]
    assert "Decision record: <code>keep</code>" in shown["DecisionRecord"]
    for name in ("Diagnosis", "HypothesisList"):
        assert "wb-diagnosis" in shown[name] and "<script>alert" not in shown[name], name


def test_load_ext_registers_it_in_a_shell_started_after_the_import():
    result = _run(
        """
        import json
        import workbench
        from IPython.core.interactiveshell import InteractiveShell
        shell = InteractiveShell.instance()
    """,
        BUILD,
        """
        before = shown()
        shell.run_line_magic("load_ext", "workbench")
        print(json.dumps({"before": before, "after": shown()}))
    """,
    )
    assert result["before"]["Comparison"] == "" and result["before"]["DecisionRecord"] == ""
    assert "<th>variant</th>" in result["after"]["Comparison"]
    assert "Decision record" in result["after"]["DecisionRecord"]


def test_run_attribution_and_history_as_a_cells_last_line_show_their_tables_not_a_dataclass_repr():
    result = _run("""
        import json, sys, tempfile
        from pathlib import Path
        from IPython.core.interactiveshell import InteractiveShell
        shell = InteractiveShell.instance()
        import workbench
        from tests.render.conftest import make_run, write_python_trace
        from workbench.study.history import History, HistoryEntry
        run = make_run(write_python_trace(Path(tempfile.mkdtemp()) / "t.json"), name="attributed")
        history = History("k", tuple(HistoryEntry("k", f"2026-01-0{i + 1}", m, 0.01, n=20)
                                     for i, m in enumerate((2.0, 2.0, 2.8, 2.8))), (2,))
        out = {}
        for name, value in {"attribution": run.attribution, "modules": run.attribution.modules,
                            "sources": run.attribution.sources, "history": history}.items():
            data, _ = shell.display_formatter.format(value)
            out[name] = {"html": data.get("text/html", ""), "plain": data.get("text/plain", "")}
        out["altair"] = "altair" in sys.modules
        print(json.dumps(out))
    """)
    attribution = result["attribution"]
    assert "<h5>Time by nn.Module</h5>" in attribution["html"] and "<h5>Time by source line</h5>" in attribution["html"]
    assert '<table class="wb-attribution">' in attribution["html"] and "<script" not in attribution["html"]
    assert attribution["plain"].startswith("Time by nn.Module") and "Attribution(" not in attribution["plain"]
    assert "model.py:40 in forward" in attribution["plain"]
    assert "Time by nn.Module" in result["modules"]["html"] and "Time by source line" not in result["modules"]["html"]
    assert (
        "ModuleBreakdown(" not in result["modules"]["plain"]
        and "<b>ModuleBreakdown</b>" not in result["modules"]["html"]
    )
    assert result["sources"]["plain"].startswith("Time by source line")
    history = result["history"]
    assert (
        "run 2 (2026-01-03): 2 ms → 2.8 ms (+40%)" in history["html"] and 'class="workbench-chart"' in history["html"]
    )
    assert history["plain"].startswith("  runs recorded  4") and "History(" not in history["plain"]
