"""Planted workloads (tests/workloads/planted.py): the planted category ranks first in
``wb.profile(...).hypotheses``; clean workloads get no high-confidence hypothesis.

The build machines are shared 2-core VMs: another process can preempt a timed call. When
``noisy_timing`` says the median itself is uncertain (high confidence), the test does what that
hypothesis's falsifier says, profiles again (up to ATTEMPTS times). If the machine stays that
noisy, the measurement hypothesis is right to lead, and the test then holds the planted category
as the first hypothesis after the measurement ones.
"""
from __future__ import annotations

import sys

import pytest

torch = pytest.importorskip("torch")

import workbench as wb  # noqa: E402
from workbench.hypotheses import diagnose  # noqa: E402
from tests.workloads.planted import CLEAN, PLANTED, PLANTED_COST_MIN_RATIO, fresh_buffer_cost_ratio  # noqa: E402

ATTEMPTS = 3
COMPILED = {"graph_break", "recompilation"}


def _profile(builder):
    if "torch._dynamo" in sys.modules:
        torch._dynamo.reset()   # a rebuilt workload must compile afresh (dynamo caches by code object)
    fn, options = builder()
    options = {"warmup": 3, "repeat": 20, "threads": 1, **options}
    return wb.profile(fn, **options)


def _machine_noise(run) -> bool:
    return any(h.rule == "noisy_timing" and h.confidence == "high" for h in run.hypotheses)


def _profile_quietly(builder):
    for _ in range(ATTEMPTS):
        run = _profile(builder)
        if not _machine_noise(run):
            return run, False
    return run, True


def _cases():
    for category, builders in sorted(PLANTED.items()):
        for b in builders:
            marks = [pytest.mark.slow] if category in COMPILED else []
            yield pytest.param(category, b, id=f"{category}-{b.__name__}", marks=marks)


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    yield
    if "torch._dynamo" in sys.modules:
        torch._dynamo.reset()   # compiled workloads leave no caches behind for the next test


@pytest.mark.parametrize("category, builder", list(_cases()))
def test_planted_category_ranks_first(category, builder):
    if category == "allocation_churn" and fresh_buffer_cost_ratio() < PLANTED_COST_MIN_RATIO:
        pytest.skip("not applicable: in this process a fresh 36 MB buffer costs no more than a reused one "
                    f"({fresh_buffer_cost_ratio():.2f}x), so the planted allocation cost is absent")
    run, noisy = _profile_quietly(builder)
    ranked = run.hypotheses
    assert ranked, f"{builder.__name__}: no hypothesis at all; not judged: {diagnose(run).statements()}"
    listing = [(h.category, h.rule, h.confidence, round(h.time_at_stake_ms, 4)) for h in ranked[:4]]
    if noisy and category != "measurement":
        ranked = [h for h in ranked if h.category != "measurement"]
    assert ranked[0].category == category, f"{builder.__name__}: {listing}"
    assert ranked[0].has_evidence and ranked[0].falsifier
    assert ranked[0].time_at_stake_ms <= run.cold_ms + sum(run.timing.samples_ms) + 1e-9


@pytest.mark.parametrize("builder", CLEAN, ids=[b.__name__ for b in CLEAN])
def test_clean_workload_has_no_high_confidence_hypothesis(builder):
    run, noisy = _profile_quietly(builder)
    high = [(h.category, h.rule) for h in run.hypotheses if h.confidence == "high"
            and not (noisy and h.rule == "noisy_timing")]
    assert high == [], f"{builder.__name__}: {high}"


def test_every_cpu_category_has_two_workloads_and_there_are_clean_ones():
    cpu_categories = {"launch_overhead", "host_bound", "memory_bound", "compute_bound", "allocation_churn",
                      "graph_break", "recompilation", "cold_start", "measurement"}
    assert {c for c, bs in PLANTED.items() if len(bs) >= 2} >= cpu_categories
    assert len(CLEAN) >= 2
