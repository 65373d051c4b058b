"""``workbench report --study``: a small real study (two real profiles, one round on a seeded fake
clock, an accepted change) made by the test, reported through the CLI with papermill; the page
draws offline, holds every section and leaves the study folder as it was; bad input is refused
before anything runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

import workbench as wb  # noqa: E402
from workbench.cli import main  # noqa: E402
from workbench.report import external_sources  # noqa: E402
from workbench.variants.clock import FakeTimer  # noqa: E402


def chain(x):
    return (x * 2.0 + 1.0).relu() * 0.5


def rewritten(x):
    return (x * 2.0 + 1.0).relu() * 0.5


def wrong(x):
    return (x * 2.0 + 1.01).relu() * 0.5


def make_inputs():
    return (torch.randn(256),)


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def study_folder(tmp_path_factory):
    folder = tmp_path_factory.mktemp("studies") / "tiny"
    study = wb.Study("tiny", folder=folder)
    study.set_baseline(chain, make_inputs, warmup=1, repeat=5, trace=False)
    timer = FakeTimer({"baseline": 2.0, "rewritten": 1.0}, seed=0, call=False)
    rnd = study.run_round(
        {"rewritten": rewritten, "wrong": wrong}, timer=timer, checks=1, profile=False, budget_s=0.3, min_rounds=10
    )
    assert {k: v.decision for k, v in rnd.decisions.items()} == {"rewritten": "keep", "wrong": "reject"}
    study.accept("rewritten")
    return folder


@pytest.fixture(scope="module")
def report(study_folder, tmp_path_factory):
    out = tmp_path_factory.mktemp("study_report") / "tiny"
    before = _snapshot(study_folder)
    assert main(["report", "--study", str(study_folder), "--out", str(out)]) == 0
    assert _snapshot(study_folder) == before  # nothing in the study was written
    return out


@pytest.mark.timeout(180)
def test_the_study_report_holds_every_section_and_draws_offline(report, study_folder):
    nb = json.loads((report / "report.ipynb").read_text(encoding="utf-8"))
    assert not [o for c in nb["cells"] for o in c.get("outputs", []) if o.get("output_type") == "error"]
    page = (report / "report.html").read_text(encoding="utf-8")
    for heading in (
        "The study now",
        "Baselines",
        "The bottleneck after each accepted change",
        "Rounds",
        "Decisions",
        "Ledger",
    ):
        assert f">{heading}<" in page, heading
    study = wb.Study.open(study_folder)
    first, second = study.baselines
    assert first.baseline_id in page and second.baseline_id in page
    assert "after accepting rewritten (round 1)" in page
    assert "Round 1 against baseline" in page and "Baseline check per variant" in page
    assert "Decision record: <code>keep</code> for rewritten" in page
    assert "Decision record: <code>reject</code> for wrong" in page
    assert external_sources(page) == []
    assert page.count('class="workbench-chart"') >= 1  # the baselines' medians, drawn offline
    summary = json.loads((report / "summary.json").read_text())
    assert [b["baseline_id"] for b in summary["baselines"]] == [first.baseline_id, second.baseline_id]
    assert summary["rounds"] == [
        {"round": 1, "baseline_id": first.baseline_id, "decisions": {"rewritten": "keep", "wrong": "reject"}}
    ]
    assert summary["warnings"] == []


def test_a_folder_that_is_not_a_study_or_is_newer_is_refused_before_anything_runs(tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["report", "--study", str(tmp_path / "nothing"), "--out", str(out)]) == 2
    assert "no study in" in capsys.readouterr().err and not out.exists()
    newer = tmp_path / "newer"
    newer.mkdir()
    (newer / "study.json").write_text(json.dumps({"format": "workbench-study", "version": 9, "name": "n"}))
    assert main(["report", "--study", str(newer), "--out", str(out)]) == 2
    assert "newer workbench" in capsys.readouterr().err and not out.exists()
    assert main(["report", "--study", str(newer), "--compare-to", str(tmp_path), "--out", str(out)]) == 2


def test_a_corrupt_ledger_line_is_reported_as_a_warning_and_the_rest_is_shown(study_folder, tmp_path, capsys):
    import shutil

    damaged = tmp_path / "damaged"
    shutil.copytree(study_folder, damaged)
    with open(damaged / "ledger.jsonl", "a") as fh:
        fh.write('{"event": "tested", "key": \n')
    from workbench.report.study_report import open_study, study_summary

    study, warned = open_study(damaged)
    assert len(warned) == 1 and "ledger" in warned[0] and "skipped" in warned[0]
    assert study_summary(study)["ledger"]  # the readable entries are all there
