"""The study's renderings (``workbench.render.study``), called directly, and a Study displayed as
HTML in a fresh IPython shell after ``import workbench``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import workbench.render.study as render_study
from tests.study.conftest import FAKE, _timer, hypothesis

ROOT = Path(__file__).resolve().parents[2]


def test_a_study_renders_its_baseline_top_hypotheses_last_round_and_ledger(after_round):
    study, base, mod, rnd = after_round
    page = render_study.html(study)
    assert base.baseline_id in page
    assert "Top hypotheses of the current baseline" in page and "memory_bound" in page
    assert "Round 1 against baseline" in page
    for variant, decision in (("fused", "keep"), ("other", "need_more_evidence"), ("wrong", "reject")):
        assert f"<td>{variant}</td><td><span class='" in page and f">{decision}</span>" in page
    assert "Ledger" in page and "reopen when" in page and "supported" in page and "rejected" in page
    text = render_study.text(study)
    assert base.baseline_id in text and "last round 1:" in text and "fused: keep" in text
    assert "launch_overhead" in text and "reopen when" in text
    md = render_study.markdown(study)
    assert md.startswith("## Study `chain`") and "| fused | keep |" in md and "**Ledger**" in md


def test_a_round_and_its_summary_render_alike_in_the_methods_terms(after_round):
    _, base, _, rnd = after_round
    page = render_study.html(rnd)
    assert page == render_study.html(rnd.summary)
    for section in (
        "Reset procedure",
        "Hypotheses and discriminators",
        "Baseline check per variant",
        "Confidence updates",
        "Residuals",
        "Disposition",
        "Next",
    ):
        assert section in page, section
    assert "study.accept(&#x27;fused&#x27;)" in page  # the next step, escaped
    assert render_study.text(rnd) == rnd.summary.to_text()
    assert "| wrong | reject | ✗ |" in render_study.markdown(rnd)


def test_names_from_the_study_are_escaped(lab, workload_module, tmp_path):
    lab.hypotheses["base"] = [hypothesis("memory_bound", suggested=("fused",))]
    from workbench.study import Study

    study = Study("<script>alert(1)</script>", folder=tmp_path / "hostile")
    study.set_baseline(workload_module.base, workload_module.make_inputs)
    study.run_round({"<b>x</b>": workload_module.fused}, timer=_timer(**{"<b>x</b>": 1.0}), **FAKE)
    page = render_study.html(study)
    assert "<script>" not in page and "&lt;script&gt;" in page
    assert "<b>x</b>" not in page and "&lt;b&gt;x&lt;/b&gt;" in page


def test_an_empty_study_says_what_to_do(tmp_path):
    from workbench.study import Study

    study = Study("empty", folder=tmp_path / "empty")
    assert "study.set_baseline(fn, make_inputs)" in render_study.html(study)
    assert "no baseline yet" in render_study.text(study)


def test_a_study_displays_as_html_in_a_fresh_ipython_shell_after_import_workbench(after_round):
    study, base, _, _ = after_round
    code = (
        "import json, sys\n"
        "from IPython.core.interactiveshell import InteractiveShell\n"
        "shell = InteractiveShell.instance()\n"
        "result = shell.run_cell('import workbench as wb\\nstudy = wb.Study.open(' + repr(sys.argv[1]) + ')')\n"
        "assert result.success, result.error_in_exec\n"
        "data, _ = shell.display_formatter.format(shell.user_ns['study'])\n"
        "print(json.dumps({'mimes': sorted(data), 'html': data.get('text/html', '')}))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run(
        [sys.executable, "-c", code, str(study.folder)],
        capture_output=True,
        text=True,
        env=env,
        timeout=240,
        cwd=str(ROOT),
    )
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert "text/html" in got["mimes"], got["mimes"]
    assert base.baseline_id in got["html"] and "Top hypotheses" in got["html"] and "Ledger" in got["html"]
