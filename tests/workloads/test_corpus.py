"""The tuning half of the planted CPU corpus (tests/workloads/corpus.py), at each workload's own settings:
the planted category is within the top ``TOP_K`` hypotheses, and a clean workload gets no
high-confidence one. The held-out half is scored by benchmarks/diagnosis_accuracy.py and is never
tested (nor tuned on) here.

Only workloads whose margin is wide are held here (``NOT_HELD`` names the others and why). The build
machines are shared 2-core VMs: when ``noisy_timing`` says the median itself is uncertain (high
confidence), the test does what that hypothesis's falsifier says and profiles again (up to
``ATTEMPTS`` times); if the machine stays that noisy, the measurement caveat is right, and for a
workload planted with another category the test holds that category's rank among the findings
after the measurement caveats are set aside.
"""
from __future__ import annotations

import sys

import pytest

torch = pytest.importorskip("torch")

import workbench as wb  # noqa: E402
from tests.workloads.corpus import workloads  # noqa: E402
from tests.workloads.planted import PLANTED_COST_MIN_RATIO, fresh_buffer_cost_ratio  # noqa: E402

TOP_K = 2
ATTEMPTS = 2
# tuning workloads left out of the test, with the reason (a narrow margin is a bug to fix, not to hide:
# each is listed in the notes as a miss)
NOT_HELD = {
    # 48 MiB of fresh zeros costs 2-17 ms depending on whether the kernel hands out huge pages, and the
    # default CPU ceiling (10 GB/s) underestimates the excess: allocation vs memory-bound is a narrow call
    "fresh_zeros_scratch": "allocation excess depends on transparent huge pages; margin to memory_bound is narrow",
}


def _profile(w):
    if "torch._dynamo" in sys.modules:
        torch._dynamo.reset()   # a rebuilt workload compiles afresh (dynamo caches by code object)
    fn, options = w.build()
    return wb.profile(fn, **options)


def _noisy(run) -> bool:
    return any(h.rule == "noisy_timing" and h.confidence == "high" for h in run.hypotheses)


def _profile_quietly(w):
    for _ in range(ATTEMPTS):
        run = _profile(w)
        if not _noisy(run):
            return run, False
    return run, True


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    yield
    if "torch._dynamo" in sys.modules:
        torch._dynamo.reset()


PLANTED = [w for w in workloads("tuning") if w.category is not None and w.name not in NOT_HELD]
CLEAN = [w for w in workloads("tuning") if w.category is None]


@pytest.mark.slow
@pytest.mark.parametrize("w", PLANTED, ids=[f"{w.category}-{w.name}" for w in PLANTED])
def test_planted_category_within_top_k(w):
    if w.category == "allocation_churn" and fresh_buffer_cost_ratio() < PLANTED_COST_MIN_RATIO:
        pytest.skip("not applicable: in this process a fresh 36 MB buffer costs no more than a reused one "
                    f"({fresh_buffer_cost_ratio():.2f}x), so the planted allocation cost is absent")
    run, noisy = _profile_quietly(w)
    ranked = list(run.hypotheses)
    listing = [(h.category, h.rule, h.confidence, round(h.time_at_stake_ms, 4)) for h in ranked[:4]]
    if noisy and w.category != "measurement":
        ranked = [h for h in ranked if h.category != "measurement"]
    top = [h.category for h in ranked[:TOP_K]]
    assert w.category in top, f"{w.name}: planted {w.category}, top {listing}"
    h = next(h for h in ranked if h.category == w.category)
    assert h.has_evidence and h.falsifier


@pytest.mark.slow
@pytest.mark.parametrize("w", CLEAN, ids=[w.name for w in CLEAN])
def test_clean_workload_has_no_high_confidence_hypothesis(w):
    run, noisy = _profile_quietly(w)
    high = [(h.category, h.rule) for h in run.hypotheses
            if h.confidence == "high" and not (noisy and h.rule == "noisy_timing")]
    assert high == [], f"{w.name}: {high}"


def test_the_split_alternates_in_definition_order_and_covers_every_cpu_category():
    from tests.workloads.corpus import CORPUS, HALVES

    assert [w.half for w in CORPUS] == [HALVES[i % 2] for i in range(len(CORPUS))]
    cpu_categories = {"launch_overhead", "host_bound", "memory_bound", "compute_bound", "allocation_churn",
                      "graph_break", "recompilation", "cold_start", "measurement"}
    for c in cpu_categories:
        assert len(workloads(category=c)) >= 5, c
    assert len(workloads(category=None)) >= 5
    assert {w.kind for w in CORPUS} == {"inference", "training"}
    assert set(NOT_HELD) <= {w.name for w in workloads("tuning")}
