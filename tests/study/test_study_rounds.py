"""The study's bookkeeping on recorded profiles and a seeded fake clock: baselines and their IDs,
predictions written before a round, residuals and confidence after it, the ledger, accept, reopen,
and the bad inputs (newer format, a corrupt line, a callable gone, accepting what was not kept)."""

import json
import warnings

import pytest
import torch

import workbench as wb
from tests.study.conftest import FAKE, _timer, hypothesis
from workbench.errors import InvalidArgumentError, StudyError
from workbench.study import Study, StudyWarning
from workbench.study.summary import RoundSummary


def test_baseline_has_an_id_a_reset_procedure_and_ranked_hypotheses(started, lab):
    study, base, mod = started
    assert wb.Study is Study
    assert base.baseline_id.startswith("b-") and len(base.baseline_id) == 14
    assert base.inputs["seed"] == 7 and base.inputs["signature"] == [
        {"shape": [64], "dtype": "float32", "device": "cpu", "requires_grad": False}
    ]
    assert base.callable_ref["qualname"] == "base" and base.callable_ref["importable"]
    assert any("seed python, numpy and torch with 7" in s for s in base.reset_procedure)
    assert any("num_threads=1" in s for s in base.reset_procedure)
    assert [h.category for h in study.hypotheses] == ["memory_bound", "launch_overhead"]
    assert all(h.status == "proposed" for h in study.hypotheses)
    assert (study.folder / base.run_path / "run.json").exists()
    # the same callable, inputs and environment give the same ID: a rerun cell attaches, adds nothing
    again = study.set_baseline(mod.base, mod.make_inputs, seed=7)
    assert again.baseline_id == base.baseline_id and len(study.baselines) == 1
    # another seed is another baseline
    other = study.set_baseline(mod.base, mod.make_inputs, seed=8)
    assert other.baseline_id != base.baseline_id and len(study.baselines) == 2


def test_a_round_decides_each_variant_and_classifies_each_residual(after_round):
    study, base, mod, rnd = after_round
    assert {k: v.decision for k, v in rnd.decisions.items()} == {
        "fused": "keep",
        "other": "need_more_evidence",
        "wrong": "reject",
    }
    assert rnd.decisions["wrong"].variant == "wrong" and "incorrect" in rnd.decisions["wrong"].reason
    updates = {u["key"].split(":")[0]: u for u in rnd.summary.confidence_updates}
    assert updates["memory_bound"]["residual"] == "supported"
    assert updates["memory_bound"]["confidence_before"] == "medium"
    assert updates["memory_bound"]["confidence_after"] == "high"
    # "other" is no faster and the interval rules out a 3% gain: the falsifier fired
    assert updates["launch_overhead"]["residual"] == "rejected"
    assert updates["launch_overhead"]["confidence_after"] == "low"
    ledger = {e.category: e for e in study.ledger}
    assert ledger["memory_bound"].status == "supported" and ledger["memory_bound"].round == 1
    assert ledger["launch_overhead"].status == "rejected" and ledger["launch_overhead"].reopen_when
    assert ledger["launch_overhead"].evidence_scope["variants"][0]["name"] == "other"
    statuses = {h.category: h.status for h in study.hypotheses}
    assert statuses == {"memory_bound": "supported", "launch_overhead": "rejected"}
    checks = {c["variant"]: c for c in rnd.summary.baseline_checks}
    assert checks["fused"]["pairs"] >= 10 and checks["fused"]["status"] in ("ok", "drifted")
    assert "not timed against the baseline" in checks["wrong"]["text"]


def test_predictions_are_written_before_the_round_runs(started, monkeypatch):
    study, base, mod = started
    from workbench.study import measure

    seen = {}
    real = measure.compare_variants

    def spy(*a, **kw):
        lines = [json.loads(x) for x in (study.folder / "rounds.jsonl").read_text().splitlines()]
        seen["lines"] = lines
        return real(*a, **kw)

    monkeypatch.setattr(measure, "compare_variants", spy)
    study.run_round({"fused": mod.fused}, timer=_timer(fused=1.0), **FAKE)
    planned = seen["lines"][-1]
    assert planned["event"] == "planned" and planned["round"] == 1
    [pred] = planned["predictions"]
    assert pred["category"] == "memory_bound" and pred["variants"] == ["fused"]
    assert "faster" in pred["discriminator"] and pred["speedup_bound"] == pytest.approx(2.0 / 0.8, rel=0.05)


def test_tests_mapping_and_opposite_sign(started):
    study, base, mod = started
    rnd = study.run_round({"slower": mod.slower}, tests={"slower": "memory_bound"}, timer=_timer(slower=3.0), **FAKE)
    [update] = rnd.summary.confidence_updates
    assert update["residual"] == "opposite_sign" and update["status_after"] == "proposed"
    assert rnd.decisions["slower"].decision == "reject"
    with pytest.raises(InvalidArgumentError, match="does not propose"):
        study.run_round({"slower": mod.slower}, tests={"slower": "transfer"}, timer=_timer(slower=3.0), **FAKE)
    with pytest.raises(InvalidArgumentError, match="not in this round"):
        study.run_round({"slower": mod.slower}, tests={"nope": "memory_bound"}, timer=_timer(slower=3.0), **FAKE)
    with pytest.raises(InvalidArgumentError, match="names the baseline"):
        study.run_round({"baseline": mod.slower})


def test_accept_makes_a_new_baseline_and_a_rejected_hypothesis_is_not_proposed_again(after_round, lab):
    study, base, mod, rnd = after_round
    lab.hypotheses["fused"] = [
        hypothesis("launch_overhead", rule="cpu_dispatch_overhead", suggested=("other",)),
        hypothesis("allocation_churn", rule="alloc_churn", suggested=()),
    ]
    lab.medians["fused"] = 1.0
    new = study.accept("fused")
    assert new.baseline_id != base.baseline_id and new.parent_id == base.baseline_id
    assert new.accepted_from["round"] == 1 and new.accepted_from["decision"] == "keep"
    assert [b.baseline_id for b in study.baselines] == [base.baseline_id, new.baseline_id]
    assert lab.profiled[-1] == "fused"  # re-profiled
    assert [h.category for h in study.hypotheses] == ["allocation_churn"]
    assert new.held_back[0]["key"].startswith("launch_overhead") and "not proposed again" in new.held_back[0]["reason"]
    # under another scope (other input shapes) the rejected hypothesis is proposed again: reopenable
    lab.hypotheses["base"] = [hypothesis("launch_overhead", rule="cpu_dispatch_overhead", suggested=("other",))]
    wider = study.set_baseline(mod.base, lambda: (torch.randn(128),), seed=7)
    assert [h.category for h in wider.hypotheses] == ["launch_overhead"]
    old = next(e for e in study.ledger if e.category == "launch_overhead" and e.baseline_id == base.baseline_id)
    assert old.status == "reopenable"


def test_accepting_what_was_not_kept_is_refused_and_nothing_changes(after_round):
    study, base, mod, rnd = after_round
    before = {p.name: p.read_bytes() for p in study.folder.glob("*.jsonl")}
    with pytest.raises(StudyError, match=r"'wrong' was not kept in round 1: it was decided 'reject'"):
        study.accept("wrong")
    with pytest.raises(StudyError, match="was not kept.*need_more_evidence"):
        study.accept("other")
    with pytest.raises(StudyError, match="has no variant 'nope'"):
        study.accept("nope")
    assert {p.name: p.read_bytes() for p in study.folder.glob("*.jsonl")} == before
    assert len(study.baselines) == 1


def test_accept_before_any_round_and_a_round_before_any_baseline(lab, tmp_path, workload_module):
    study = Study("empty", folder=tmp_path / "empty")
    with pytest.raises(StudyError, match="no baseline yet"):
        study.run_round({"fused": workload_module.fused})
    study.set_baseline(workload_module.base, workload_module.make_inputs)
    with pytest.raises(StudyError, match="no round yet"):
        study.accept("fused")


def test_reopened_the_study_reads_back_everything(after_round):
    study, base, mod, rnd = after_round
    again = Study.open(study.folder)
    assert again.name == "chain"
    assert again.baselines == study.baselines
    assert [e.to_dict() for e in again.ledger] == [e.to_dict() for e in study.ledger]
    [r] = again.rounds
    assert r.summary == rnd.summary
    assert RoundSummary.from_dict(json.loads(json.dumps(rnd.summary.to_dict()))) == rnd.summary
    assert {k: v.to_dict() for k, v in r.decisions.items()} == {k: v.to_dict() for k, v in rnd.decisions.items()}
    assert r.comparison["fused"].decision == "keep"
    # the baseline callable is imported again by its name; the kept variant's callable is handed back
    rnd2 = again.run_round({"fused": mod.fused}, timer=_timer(fused=1.0), **FAKE)
    assert rnd2.index == 2 and rnd2.decisions["fused"].decision == "keep"
    assert "Study 'chain'" in again.to_text() and "ledger" in again.to_text()
    md = wb.render.markdown(rnd.summary)
    assert "**Residuals**" in md and "**Disposition**" in md


def test_a_corrupt_ledger_line_is_skipped_with_a_warning_naming_it(after_round):
    study, base, mod, rnd = after_round
    path = study.folder / "ledger.jsonl"
    lines = path.read_text().splitlines()
    lines.insert(1, '{"event": "tested", "key": "memory_bound:cpu')  # a write cut short
    path.write_text("\n".join(lines) + "\n")
    before = path.read_bytes()
    with pytest.warns(StudyWarning, match=r"ledger\.jsonl', line 2: not valid JSON"):
        again = Study.open(study.folder)
    assert {e.category: e.status for e in again.ledger} == {"memory_bound": "supported", "launch_overhead": "rejected"}
    assert path.read_bytes() == before  # nothing rewritten


def test_a_folder_from_a_newer_format_is_refused_untouched(started):
    study, base, mod = started
    header = study.folder / "study.json"
    data = json.loads(header.read_text())
    header.write_text(json.dumps({**data, "version": 99}))
    before = {p.name: p.read_bytes() for p in study.folder.iterdir() if p.is_file()}
    with pytest.raises(StudyError, match=r"newer workbench \(format version 99; this one reads up to 1\)"):
        Study.open(study.folder)
    with pytest.raises(StudyError, match="newer workbench"):
        Study("chain", folder=study.folder)
    assert {p.name: p.read_bytes() for p in study.folder.iterdir() if p.is_file()} == before


def test_open_of_a_folder_without_a_study_and_a_name_mismatch(tmp_path, started):
    with pytest.raises(StudyError, match="no study in"):
        Study.open(tmp_path / "nothing")
    study, _, _ = started
    with pytest.raises(StudyError, match="holds the study 'chain', not 'other'"):
        Study("other", folder=study.folder)


def test_a_baseline_callable_that_no_longer_exists(started):
    study, base, mod = started
    delattr(mod, "base")  # renamed or deleted since the study was written
    before = {p.name: p.read_bytes() for p in study.folder.glob("*.jsonl")}
    again = Study.open(study.folder)  # the records read back all the same
    assert again.baselines == study.baselines
    with pytest.raises(StudyError, match=r"no longer exists.*has no 'base'.*study\.attach"):
        again.run_round({"fused": mod.fused}, timer=_timer(fused=1.0), **FAKE)
    with pytest.raises(StudyError, match="source differs"):
        again.attach(mod.fused)
    assert {p.name: p.read_bytes() for p in study.folder.glob("*.jsonl")} == before


def test_a_notebook_callable_is_handed_back_with_attach(lab, tmp_path):
    def local(x):
        return x * 2

    study = Study("local", folder=tmp_path / "local")
    study.set_baseline(local, lambda: (torch.randn(8),))
    again = Study.open(study.folder)
    with pytest.raises(StudyError, match="cannot be imported again"):
        again.run_round({"v": local}, timer=_timer(v=1.0), **FAKE)
    again.attach(local, lambda: (torch.randn(8),))
    rnd = again.run_round({"v": local}, timer=_timer(v=1.0), **FAKE)
    assert rnd.decisions["v"].decision == "keep"


def test_an_interrupted_round_is_recorded_as_aborted(started, monkeypatch):
    study, base, mod = started
    from workbench.study import measure

    def boom(*a, **kw):
        raise KeyboardInterrupt

    monkeypatch.setattr(measure, "compare_variants", boom)
    with pytest.raises(KeyboardInterrupt):
        study.run_round({"fused": mod.fused})
    events = [json.loads(x)["event"] for x in (study.folder / "rounds.jsonl").read_text().splitlines()]
    assert events == ["planned", "aborted"]
    assert Study.open(study.folder).rounds == ()


def test_a_line_cut_short_at_the_end_stays_apart_from_the_next_record(after_round):
    study, base, mod, rnd = after_round
    path = study.folder / "ledger.jsonl"
    path.write_bytes(path.read_bytes() + b'{"event": "tested", "key": "mem')  # a crash mid-write, no newline
    with pytest.warns(StudyWarning, match="not valid JSON"):
        again = Study.open(study.folder)
        again.run_round({"fused": mod.fused}, timer=_timer(fused=1.0), **FAKE)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        reread = Study.open(study.folder)
    [only] = [str(w.message) for w in caught if issubclass(w.category, StudyWarning)]  # the cut line alone
    assert "line 5: not valid JSON" in only
    memory = next(e for e in reread.ledger if e.category == "memory_bound")
    assert memory.status == "supported" and memory.round == 2


def test_a_keep_wrong_only_at_a_non_power_of_two_size_gets_that_failure_case_and_a_guard(started):
    study, base, mod = started

    def pow2_only(x):
        n = x.shape[0]
        return (x * 2.0 + 1.0).relu() * 0.5 + (0.0 if n & (n - 1) == 0 else 1e-2)

    def make(shape, dtype):
        return (torch.randn(*shape, dtype=dtype),)

    rnd = study.run_round(
        {"fused": pow2_only}, sweep=make, dtypes=("float32", "float64"), timer=_timer(fused=1.0), **FAKE
    )
    record = rnd.decisions["fused"]
    assert record.decision == "keep_guarded", record.reason
    odd = [c for c in record.failure_cases if "(17,)" in c or "(65,)" in c]
    assert len(odd) == 4 and all("outside tolerance" in c for c in odd), record.failure_cases  # 2 sizes x 2 dtypes
    assert not any(c.startswith(("(64,)", "(256,)", "(8,)")) for c in record.failure_cases)
    assert record.guard.startswith("use only on the swept cases where it won") and "(64,) float32" in record.guard
    assert "none" not in record.guard
    assert rnd.summary.results[0]["decision"] == "keep_guarded"
    assert study.accept("fused").accepted_from["guard"] == record.guard


def test_a_sweep_that_finds_nothing_says_none_and_a_keep_without_one_says_not_swept(started):
    study, base, mod = started
    rnd = study.run_round(
        {"fused": mod.fused},
        sweep=lambda shape, dtype: (torch.randn(*shape, dtype=dtype),),
        timer=_timer(fused=1.0),
        **FAKE,
    )
    record = rnd.decisions["fused"]
    assert record.decision == "keep" and record.failure_cases == ()
    assert "none" in wb.render.markdown(record).split("#### Failure cases")[1].split("####")[0]
    plain = study.run_round({"fused": mod.fused}, timer=_timer(fused=1.0), **FAKE)
    assert plain.decisions["fused"].failure_cases[0].startswith("not swept")
