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
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_importing_workbench_inside_a_shell_registers_the_html_display():
    result = _run("""
        import json, sys
        from IPython.core.interactiveshell import InteractiveShell
        shell = InteractiveShell.instance()
        import workbench
        altair_at_import = "altair" in sys.modules
    """, BUILD, """
        print(json.dumps({"altair_at_import": altair_at_import, "shown": shown()}))
    """)
    assert result["altair_at_import"] is False
    shown = result["shown"]
    assert "<th>speedup 95% CI</th>" in shown["Comparison"] and "&lt;script&gt;" in shown["Comparison"]
    assert "Decision record: <code>keep</code>" in shown["DecisionRecord"]
    for name in ("Diagnosis", "HypothesisList"):
        assert "wb-diagnosis" in shown[name] and "<script>alert" not in shown[name], name


def test_load_ext_registers_it_in_a_shell_started_after_the_import():
    result = _run("""
        import json
        import workbench
        from IPython.core.interactiveshell import InteractiveShell
        shell = InteractiveShell.instance()
    """, BUILD, """
        before = shown()
        shell.run_line_magic("load_ext", "workbench")
        print(json.dumps({"before": before, "after": shown()}))
    """)
    assert result["before"]["Comparison"] == "" and result["before"]["DecisionRecord"] == ""
    assert "<th>variant</th>" in result["after"]["Comparison"]
    assert "Decision record" in result["after"]["DecisionRecord"]
