"""Variants that cheat, each caught and rejected with the reason."""

import threading
import time

import pytest
import torch

import workbench as wb
from tests.variants.variant_workloads import FAST, chain


def _row(c, name):
    return next(r for r in c.results if r.name == name)


def _patches_timer(x):
    time.perf_counter = lambda: 0.0
    time.perf_counter_ns = lambda: 0
    return chain(x)


def _finishes_in_a_thread(x):
    out = torch.empty_like(x)
    half = x.numel() // 2
    out[:half] = chain(x[:half])

    def rest():
        time.sleep(0.02)
        out[half:] = chain(x[half:])

    threading.Thread(target=rest, name="sneaky-worker").start()
    return out


def test_patched_timers_are_caught_and_restored():
    originals = (time.perf_counter, time.perf_counter_ns)
    c = wb.compare({"eager": chain, "patch": _patches_timer}, inputs=lambda: torch.randn(1024), **FAST)
    row = _row(c, "patch")
    assert any(f.startswith("patched timer: time.perf_counter") for f in row.flags)
    assert row.decision == "reject"
    assert (time.perf_counter, time.perf_counter_ns) == originals
    assert row.timing is not None and row.timing.median_ms > 0  # our own timer still measured it


def test_work_left_running_in_a_thread_is_caught():
    c = wb.compare({"eager": chain, "threaded": _finishes_in_a_thread}, inputs=lambda: torch.randn(4096), **FAST)
    row = _row(c, "threaded")
    assert any("work moved to threads" in f and "sneaky-worker" in f for f in row.flags)
    assert any(f.startswith("output changed after return") for f in row.flags)
    assert row.decision == "reject"
    time.sleep(0.05)
    assert not [t for t in threading.enumerate() if t.name == "sneaky-worker"]


def test_lowered_output_dtype_is_named():
    c = wb.compare({"eager": chain, "half": lambda x: chain(x).half()}, inputs=lambda: torch.randn(512), **FAST)
    row = _row(c, "half")
    assert "precision lowered: out is float16, the baseline returns float32" in row.flags
    assert row.status == "incorrect" and row.decision == "reject"


def test_lowered_precision_inside_is_seen_and_judged_as_reduced_precision_never_silently():
    """A variant computing in bfloat16 inside (same dtype out) is found by what its ops compute, classed
    "reduced precision" and judged with bfloat16's tolerances; a keep says so in its reason.  A variant
    whose error looks like bfloat16 rounding but whose ops compute in float32 is still flagged."""
    bf16 = lambda x: chain(x.bfloat16()).float()  # same dtype out, bfloat16 error inside
    wrong = lambda x: chain(x) * 1.01  # wrong, but not a rounding profile
    c = wb.compare({"eager": chain, "bf16": bf16, "wrong": wrong}, inputs=lambda: torch.randn(4096), **FAST)
    row = _row(c, "bf16")
    assert row.numerical_class == "reduced precision" and "bfloat16" in row.precision
    assert any(f.startswith("reduced precision:") and "judged with bfloat16 tolerances" in f for f in row.flags)
    assert row.decision != "keep" or "reduced precision" in row.decision_reason
    assert c.settings["reduced_precision"]["bf16"]["dtype"] == "bfloat16"
    assert not any(f.startswith("precision lowered") for f in _row(c, "wrong").flags)
    assert _row(c, "wrong").decision == "reject"

    def rounded(x):  # bfloat16-like error, float32 ops only
        y = chain(x)
        return y + y * torch.where(torch.rand_like(y) < 0.5, 1.0, -1.0) * 2.0**-9

    c = wb.compare({"eager": chain, "rounded": rounded}, inputs=lambda: torch.randn(4096), **FAST)
    assert any("matches bfloat16 rounding" in f for f in _row(c, "rounded").flags)
    assert _row(c, "rounded").decision == "reject"


def test_faster_than_the_roofline_is_flagged():
    x = torch.randn(2**22)  # 16 MB in, 16 MB out
    cache = {}

    def memo(t):  # returns a stored answer: no work
        if "y" not in cache:
            cache["y"] = chain(t)
        return cache["y"]

    c = wb.compare({"eager": chain, "memo": memo}, inputs=(x,), **{**FAST, "checks": 1})
    row = _row(c, "memo")
    assert row.correctness.passed
    assert any(f.startswith("faster than the roofline allows") for f in row.flags)
    assert row.decision == "reject"
    assert not any(f.startswith("faster than the roofline") for f in _row(c, "eager").flags)


def test_unwritten_elements_show_through_poison():
    affine = lambda t: t * 2 + 1

    def forgets_last(t):  # a kernel whose last block is never written
        out = torch.empty_like(t)
        out[:-1] = affine(t[:-1])
        return out

    # fixed inputs: without poisoning, memory freed by the previous run holds the right answer
    c = wb.compare({"eager": affine, "forgets": forgets_last}, inputs=(torch.randn(4096),), **FAST)
    row = _row(c, "forgets")
    assert row.status == "incorrect"
    worst = row.correctness.outputs[0]
    assert worst.worst_index == (4095,)
    assert worst.nonfinite_mismatch == 1 and worst.worst_got != worst.worst_got  # the poison (NaN) shows


def test_noise_is_flagged():
    import random

    rnd = random.Random(0)

    def jittery(x):  # the same work plus 0-3 ms of random waiting
        time.sleep(rnd.random() * 3e-3)
        return chain(x)

    c = wb.compare(
        {"eager": jittery, "twin": lambda x: jittery(x)}, inputs=lambda: torch.randn(256), **{**FAST, "min_rounds": 12}
    )
    row = _row(c, "twin")
    assert any(f.startswith("noisy: IQR") for f in row.flags)
    assert "noisy" in c.table.set_index("variant").loc["twin", "flags"]
