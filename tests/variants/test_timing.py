import time

import pytest
import torch

from workbench.variants.timing import CpuTimer, Timed, calibrate, run_interleaved, shared_calls_per_sample


def _work(n):
    """A fixed amount of CPU work (not a wall-clock spin: time taken by other processes is taken
    out of a sample, so a spin until a deadline would look shorter under load)."""

    def fn():
        return sum(range(n))

    return fn


def _sleeper(ms):
    def fn():
        time.sleep(ms / 1e3)  # voluntary: stays in the sample

    return fn


def test_rounds_interleave_in_random_order_and_keep_raw_samples():
    items = [Timed("a", _work(4000), ()), Timed("b", _work(16000), ()), Timed("c", lambda: None, ())]
    res = run_interleaved(items, CpuTimer(), min_rounds=12, max_rounds=12, budget_s=0.0, seed=3)
    assert res.rounds == 12 and all(m.n == 12 for m in res.measurements.values())
    assert len(set(res.orders)) > 1 and all(sorted(o) == ["a", "b", "c"] for o in res.orders)
    assert res.measurements["b"].median_ms > 1.5 * res.measurements["a"].median_ms  # 4x the work
    assert res.measurements["a"].timer.startswith("perf_counter_ns")


def test_time_taken_by_other_processes_is_taken_out_of_a_sample():
    from workbench.variants.timing import RunQueueWait

    if RunQueueWait().fd is None:
        pytest.skip("not applicable: this system does not report run-queue wait (/proc/self/task/*/schedstat)")
    timer = CpuTimer()
    item = Timed("w", _work(20000), ())
    samples = [timer.sample_ms(item) for _ in range(20)]
    assert all(s > 0 for s in samples) and 0.0 <= timer.waited_share() < 1.0
    assert CpuTimer(subtract_waits=False).timer == "perf_counter_ns"


def test_calibration_is_shared_and_bounded_by_the_slowest():
    fast, slow = Timed("fast", lambda: None, ()), Timed("slow", _sleeper(5.0), ())
    calibrate(fast, CpuTimer(), 0.001)
    calibrate(slow, CpuTimer(), 5.0)
    assert fast.calls_per_sample > 100 and slow.calls_per_sample == 1
    k = shared_calls_per_sample([fast, slow])
    assert 1 <= k <= 5  # 25 ms cap / 5 ms per slow call


def test_a_patched_timer_does_not_change_our_measurement(monkeypatch):
    monkeypatch.setattr(time, "perf_counter_ns", lambda: 0)
    item = Timed("x", lambda: torch.ones(10).sum(), ())
    res = run_interleaved([item], CpuTimer(), min_rounds=5, max_rounds=5, budget_s=0.0)
    assert res.measurements["x"].median_ms > 0


@pytest.mark.gpu
@pytest.mark.skipif(
    not torch.cuda.is_available(), reason="not applicable: no CUDA device (torch.cuda.is_available() is False)"
)
def test_cuda_timer_flushes_l2_between_samples():
    from workbench.variants.timing import CudaTimer, Timed

    timer = CudaTimer()
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    assert timer.flush_buf.numel() * 4 >= 2 * l2  # the write evicts the whole L2
    x = torch.randn(max(1, l2 // 8), device="cuda")  # half the L2: hot if not flushed
    item = Timed("small", lambda t: t * 2.0, (x,))
    flushed = sorted(timer.sample_ms(item) for _ in range(30))[15]
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    warm = []
    for _ in range(30):
        start.record()
        item.fn(x)
        end.record()
        end.synchronize()
        warm.append(start.elapsed_time(end))
    assert flushed >= 0.8 * sorted(warm)[15]  # never faster than a warm cache
