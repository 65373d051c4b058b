"""Hostile variants through wb.compare: each isolated with its reason in the table, the rest of
the comparison kept.  Timing runs on a seeded fake clock (the variants are still called once per
sample), so what happens on which call is deterministic."""

import sys
import time

import pytest
import torch

import workbench as wb
from tests.variants.variant_workloads import FAST, chain
from workbench.variants.clock import FakeTimer

FAKE = {**FAST, "budget_s": 0.05, "max_rounds": 40}


def _row(c, name):
    return next(r for r in c.results if r.name == name)


def _counting(after, action):
    """A variant that runs ``chain`` until call ``after``, then ``action(x)`` from then on."""
    calls = {"n": 0}

    def fn(x):
        calls["n"] += 1
        if calls["n"] > after:
            return action(x)
        return chain(x)

    fn.calls = calls
    return fn


def _raise(x):
    raise RuntimeError("kernel exploded late")


def test_a_variant_that_raises_only_on_a_later_call_is_isolated():
    late = _counting(5, _raise)  # 2 checks + the repeated call pass; it fails while timed
    c = wb.compare(
        {"eager": chain, "late": late, "same": lambda x: chain(x)},
        inputs=lambda: torch.randn(512),
        timer=FakeTimer({"eager": 1.0, "late": 1.0, "same": 1.0}, seed=1),
        **FAKE,
    )
    row = _row(c, "late")
    assert row.status == "error" and "kernel exploded late" in row.reason and "later call" in row.reason
    assert row.decision == "reject" and row.timing is None
    assert _row(c, "same").timing is not None and _row(c, "same").timing.n >= FAKE["min_rounds"]


def test_sys_exit_is_the_variants_error_not_ours():
    def exits(x):
        sys.exit(3)

    late_exit = _counting(4, lambda x: sys.exit("bye"))
    c = wb.compare(
        {"eager": chain, "exits": exits, "late_exit": late_exit},
        inputs=lambda: torch.randn(256),
        timer=FakeTimer(seed=2),
        **FAKE,
    )
    assert _row(c, "exits").status == "error" and "sys.exit(3)" in _row(c, "exits").reason
    assert _row(c, "late_exit").status == "error" and "sys.exit('bye')" in _row(c, "late_exit").reason


def test_meta_and_sparse_outputs_fail_their_check_with_the_reason():
    c = wb.compare(
        {
            "eager": chain,
            "meta": lambda x: torch.empty_like(chain(x), device="meta"),
            "sparse": lambda x: chain(x).to_sparse(),
        },
        inputs=lambda: torch.randn(256),
        timer=FakeTimer(seed=3),
        **FAKE,
    )
    meta, sparse = _row(c, "meta"), _row(c, "sparse")
    assert meta.status == "incorrect" and "device meta" in meta.reason and "computed nothing" in meta.reason
    assert sparse.status == "incorrect" and "layout sparse_coo" in sparse.reason and "to_dense" in sparse.reason
    assert meta.decision == sparse.decision == "reject"


def test_a_variant_that_mutates_or_destroys_its_input_is_flagged_and_harms_no_one_after_it():
    seen = []

    def mutates(x):
        x.mul_(2)
        return chain(x / 2)

    def destroys(x):
        y = chain(x)
        x.zero_()
        return y

    def probe(x):  # runs after them: must always see the caller's values
        seen.append(float(x.abs().sum()))
        return chain(x)

    fixed = torch.randn(1024)
    c = wb.compare(
        {"eager": chain, "mutates": mutates, "destroys": destroys, "probe": probe},
        inputs=(fixed,),
        timer=FakeTimer(seed=4),
        **FAKE,
    )
    for name in ("mutates", "destroys"):
        row = _row(c, name)
        assert row.status == "incorrect" and row.decision == "reject"
        assert "input changed in place" in row.reason and "arg[0]" in row.reason
        assert not row.correctness.passed  # never passes as correct
    assert _row(c, "probe").status == "ok" and _row(c, "probe").correctness.passed
    assert set(round(v, 3) for v in seen) == {round(float(fixed.abs().sum()), 3)}


def test_a_baseline_that_updates_its_input_in_place_is_matched_not_flagged():
    def inplace(x):
        x.add_(1)
        return x.sin()

    def also_inplace(x):
        x += 1
        return torch.sin(x)

    def forgets(x):  # the same output, but leaves x as it was
        return (x + 1).sin()

    c = wb.compare(
        {"eager": inplace, "also": also_inplace, "forgets": forgets},
        inputs=lambda: torch.randn(512),
        timer=FakeTimer(seed=5),
        **FAKE,
    )
    assert _row(c, "also").status == "ok" and _row(c, "also").correctness.passed
    assert _row(c, "forgets").status == "incorrect" and "input changed in place" in _row(c, "forgets").reason
    assert any("change their inputs in place" in n for n in c.settings["notes"])


def test_reference_below_the_absolute_tolerance_cannot_be_judged():
    tiny = lambda: torch.randn(512) * 1e-4
    c = wb.compare(
        {
            "eager": lambda x: x * 1e-3,
            "same": lambda x: x * 1e-3,
            "double": lambda x: x * 2e-3,
            "far": lambda x: x * 1e-3 + 1.0,
        },
        inputs=tiny,
        timer=FakeTimer(seed=6),
        **FAKE,
    )
    for name in ("same", "double"):  # the check cannot tell these apart: not rejected
        row = _row(c, name)
        assert row.decision == "need_more_evidence", row.decision_reason
        assert row.decision_reason.startswith("cannot judge correctness") and "tolerances=" in row.decision_reason
    assert _row(c, "far").decision == "reject" and _row(c, "far").status == "incorrect"
    assert any(n.startswith("cannot judge correctness of") and "same, double" in n for n in c.settings["notes"])


def test_threads_and_grad_changes_are_flagged_and_never_leak_into_other_timed_calls():
    seen = set()
    start = (torch.get_num_threads(), torch.is_grad_enabled())

    def sets_threads_and_grad(x):
        torch.set_num_threads(start[0] + 1)
        torch.set_grad_enabled(False)
        return chain(x)

    def probe(x):
        seen.add((torch.get_num_threads(), torch.is_grad_enabled()))
        return chain(x)

    timer = FakeTimer(seed=7)
    c = wb.compare(
        {"eager": chain, "leaky": sets_threads_and_grad, "probe": probe},
        inputs=lambda: torch.randn(256),
        timer=timer,
        **FAKE,
    )
    row = _row(c, "leaky")
    assert any("torch.get_num_threads" in f and "torch.is_grad_enabled True -> False" in f for f in row.flags)
    assert any(f.endswith("(while timed)") for f in row.flags)
    assert row.decision == "reject" and "process-wide settings" in row.decision_reason
    assert timer.calls["probe"] >= FAKE["min_rounds"] and seen == {start}
    assert (torch.get_num_threads(), torch.is_grad_enabled()) == start


def test_a_stall_while_timed_is_a_timeout_bounded_by_time_limit_s():
    def stall(x):
        time.sleep(40)
        return chain(x)

    stalls = _counting(4, stall)  # fine in the checks, stalls in the timed rounds
    t0 = time.monotonic()
    c = wb.compare(
        {"eager": chain, "stalls": stalls, "same": lambda x: chain(x)},
        inputs=lambda: torch.randn(256),
        timer=FakeTimer(seed=8),
        time_limit_s=1.0,
        **FAKE,
    )
    took = time.monotonic() - t0
    row = _row(c, "stalls")
    assert row.status == "timeout" and "did not return within 1 s" in row.reason and row.decision == "reject"
    assert "slower" not in row.decision_reason
    assert took < 15, took
    assert _row(c, "same").timing is not None


def test_keyboard_interrupt_stops_the_comparison_and_says_what_finished():
    def interrupts(x):
        raise KeyboardInterrupt

    late = _counting(4, interrupts)
    with pytest.raises(KeyboardInterrupt) as info:
        wb.compare({"eager": chain, "late": late}, inputs=lambda: torch.randn(256), timer=FakeTimer(seed=9), **FAKE)
    assert isinstance(info.value, wb.variants.ComparisonInterrupted)
    text = str(info.value)
    assert "interrupted during the timed rounds" in text and "correctness checks of eager, late" in text
    with pytest.raises(KeyboardInterrupt) as early:
        wb.compare({"eager": chain, "now": interrupts}, inputs=lambda: torch.randn(256), **FAST)
    assert "during the correctness checks" in str(early.value) and "finished: nothing yet" in str(early.value)


def test_an_nn_module_gets_a_float64_reference_without_a_note():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.GELU())
    c = wb.compare(
        {"eager": model, "same": lambda x: model(x)},
        inputs=lambda: (torch.randn(8, 16),),
        timer=FakeTimer(seed=10),
        **FAKE,
    )
    assert c.settings["reference_precision"] == "float64"
    assert not any("float64" in n for n in c.settings["notes"])
    assert next(p.dtype for p in model.parameters()) == torch.float32  # the user's module untouched
    assert _row(c, "same").correctness.passed


def test_a_function_holding_float32_weights_says_plainly_why_no_float64_reference():
    w = torch.randn(16, 16)
    c = wb.compare(
        {"eager": lambda x: x @ w, "same": lambda x: x @ w},
        inputs=lambda: torch.randn(8, 16),
        timer=FakeTimer(seed=11),
        **FAKE,
    )
    assert c.settings["reference_precision"] == "native"
    note = next(n for n in c.settings["notes"] if "float64" in n)
    assert "holds float32 tensors or parameters of its own" in note and "reference=" in note


def test_the_time_limit_holds_in_a_thread_other_than_main_too():
    import threading

    def spin(x):  # a Python-level stall (a watchdog can interrupt it)
        end = time.monotonic() + 40
        while time.monotonic() < end:
            pass
        return chain(x)

    spins = _counting(4, spin)
    box = {}
    worker = threading.Thread(
        target=lambda: box.update(
            c=wb.compare(
                {"eager": chain, "spins": spins},
                inputs=lambda: torch.randn(256),
                timer=FakeTimer(seed=12),
                time_limit_s=1.0,
                **FAKE,
            )
        )
    )
    t0 = time.monotonic()
    worker.start()
    worker.join(30)
    assert not worker.is_alive() and time.monotonic() - t0 < 20
    row = _row(box["c"], "spins")
    assert row.status == "timeout" and row.decision == "reject"
