"""A study of a memory-bound CPU chain, end to end through the public names, timed for real.

The chain (eight full passes, a sine and an exponential among them) is sized so that
torch.compile's fused pass is several times faster than eager (x3-x4 on one core), and far from
the copy bandwidth (its transcendental math keeps the fused pass below the roofline check even
when a loaded machine measures a slow copy). Only decisions with wide margins are asserted:
compiled kept, an identical copy undecided (its interval includes 1, at 99 % confidence; the
budget is not extended, so the copy cannot narrow its interval at length), a
subtly wrong variant (one constant off by 4e-3) rejected as incorrect before any timing."""

import json
import os
import subprocess
import sys
import types
from pathlib import Path

import pytest
import torch

import workbench as wb

# the timing budget is the timing thread's own CPU time (run-queue waits taken out): on a loaded
# shared machine its wall time is several times longer, hence the generous timeout
pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]
ROOT = Path(__file__).resolve().parents[2]


def chain(x):
    y = torch.sin(x)
    y = torch.exp(-y * y)
    y = y * 1.5 - 0.25
    y = y + 0.5 * x
    y = (y + 3.0).clamp(0.0, 6.0) * y
    y = y / 6.0
    y = y * 0.9 + 0.1
    return y - 0.5 * x


def wrong(x):
    y = torch.sin(x)
    y = torch.exp(-y * y)
    y = y * 1.5 - 0.25
    y = y + 0.5 * x
    y = (y + 3.0).clamp(0.0, 6.0) * y
    y = y / 6.0
    y = y * 0.9 + 0.104  # the subtle slip: 0.104 for 0.1
    return y - 0.5 * x


def make_inputs():
    return (torch.randn(1024, 1024),)


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    folder = tmp_path_factory.mktemp("studies") / "chain"
    saved = torch.get_num_threads()
    torch.set_num_threads(1)  # one thread: the same conditions for every variant and the copy roof
    try:
        s = wb.Study("chain", folder=folder)
        first = s.set_baseline(chain, make_inputs, warmup=2, repeat=15)
        copy = types.FunctionType(chain.__code__, chain.__globals__, "chain_copy")
        rnd = s.run_round(
            {"compiled": wb.variants.compiled(chain), "copy": copy, "wrong": wrong},
            checks=2,
            budget_s=1.5,
            max_budget_s=1.5,
            confidence=0.99,
        )
        second = s.accept("compiled")
        yield s, first, rnd, second
    finally:
        torch.set_num_threads(saved)


def test_memory_bound_is_proposed_for_the_eager_chain(study):
    s, first, _, _ = study
    assert first.baseline_id.startswith("b-")
    memory = [h for h in first.hypotheses if h.category == "memory_bound"]
    assert memory and "compiled" in memory[0].suggested_variants
    assert first.reset_procedure and "seed" in first.reset_procedure[0]


def test_the_round_decides_keep_need_more_evidence_and_reject(study):
    _, first, rnd, _ = study
    d = rnd.decisions
    assert d["compiled"].decision == "keep", d["compiled"].reason
    assert d["copy"].decision == "need_more_evidence", d["copy"].reason
    assert d["wrong"].decision == "reject" and "incorrect" in d["wrong"].reason
    summary = rnd.summary
    assert summary.baseline_id == first.baseline_id
    assert [c["variant"] for c in summary.baseline_checks] == ["compiled", "copy", "wrong"]
    memory = next(u for u in summary.confidence_updates if u["key"].startswith("memory_bound"))
    assert memory["status_after"] == "supported" and memory["residual"] == "supported"
    assert any(r["variant"] == "compiled" and r["residual"] == "supported" for r in summary.residuals)
    text = summary.to_text()
    for section in (
        "Reset procedure",
        "Hypotheses and discriminators",
        "Baseline check per variant",
        "Confidence updates",
        "Residuals",
        "Disposition",
        "Next",
    ):
        assert section in text
    assert "study.accept('compiled')" in summary.next_step
    json.dumps(summary.to_dict())


def test_accept_gives_a_new_baseline_reprofiled(study):
    s, first, _, second = study
    assert second.baseline_id != first.baseline_id
    assert second.parent_id == first.baseline_id and second.accepted_from["variant"] == "compiled"
    assert second.variant["kind"] == "compiled"
    assert [b.baseline_id for b in s.baselines] == [first.baseline_id, second.baseline_id]
    assert (s.folder / second.run_path / "run.json").exists()
    assert second.median_ms < first.median_ms


def test_reopened_in_a_fresh_process_both_baselines_and_the_ledger_are_there(study):
    s, first, _, second = study
    code = (
        "import json, sys, workbench as wb\n"
        "s = wb.Study.open(sys.argv[1])\n"
        "print(json.dumps({'baselines': [b.baseline_id for b in s.baselines],\n"
        "  'ledger': [[e.category, e.status, e.round, e.reopen_when] for e in s.ledger],\n"
        "  'rounds': [r.index for r in s.rounds], 'decisions': {k: v.decision for k, v in s.rounds[-1].decisions.items()}}))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run(
        [sys.executable, "-c", code, str(s.folder)], capture_output=True, text=True, env=env, timeout=240, cwd=str(ROOT)
    )
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["baselines"] == [first.baseline_id, second.baseline_id]
    assert ["memory_bound", "supported", 1] in [row[:3] for row in got["ledger"]]
    assert all(row[3] for row in got["ledger"])  # every entry says when to reopen it
    assert got["rounds"] == [1]
    assert got["decisions"] == {"compiled": "keep", "copy": "need_more_evidence", "wrong": "reject"}


def test_workbench_report_study_writes_the_whole_study_as_offline_html(study, tmp_path):
    from workbench.cli import main
    from workbench.report import external_sources

    s, first, _, second = study
    out = tmp_path / "report"
    assert main(["report", "--study", str(s.folder), "--out", str(out)]) == 0
    page = (out / "report.html").read_text(encoding="utf-8")
    assert first.baseline_id in page and second.baseline_id in page
    assert "memory_bound" in page and "after accepting compiled (round 1)" in page
    assert "Decision record: <code>keep</code> for compiled" in page
    assert external_sources(page) == []
