from __future__ import annotations

import math

import numpy as np
import pytest

from workbench.errors import InvalidArgumentError
from workbench.measurement import Measurement, ratio_ci


def test_statistics_derive_from_raw_samples():
    m = Measurement(samples_ms=(1.0, 2.0, 3.0, 4.0, 100.0), label="f")
    assert m.median_ms == 3.0
    assert m.n == 5
    assert m.iqr_ms == pytest.approx(2.0)
    assert m.max_ms == 100.0
    assert m.p95_ms == pytest.approx(np.percentile([1, 2, 3, 4, 100], 95))


def test_round_trip_keeps_every_sample():
    m = Measurement(samples_ms=(0.5, 0.25, 0.75), label="x", timer="cuda_event", metadata={"shape": [2, 3]})
    back = Measurement.from_dict(m.to_dict())
    assert back == m
    assert back.samples_ms == (0.5, 0.25, 0.75)


def test_noise_and_few_samples_are_flagged():
    rng = np.random.default_rng(0)
    noisy = Measurement(samples_ms=tuple(1.0 + rng.uniform(0, 1.0, 50)))
    quiet = Measurement(samples_ms=tuple(1.0 + rng.uniform(0, 0.01, 50)))
    assert noisy.is_noisy and not quiet.is_noisy
    assert any("samples" in w for w in Measurement(samples_ms=(1.0, 1.0)).warnings)
    assert quiet.warnings == ()


def test_median_interval_contains_median_and_narrows_with_n():
    rng = np.random.default_rng(1)
    small = Measurement(samples_ms=tuple(rng.normal(10, 1, 15)))
    large = Measurement(samples_ms=tuple(rng.normal(10, 1, 400)))
    for m in (small, large):
        lo, hi = m.median_ci_ms()
        assert lo <= m.median_ms <= hi
    assert (large.median_ci_ms()[1] - large.median_ci_ms()[0]) < (small.median_ci_ms()[1] - small.median_ci_ms()[0])


@pytest.mark.parametrize("bad", [(), (float("nan"),), (-1.0,), (math.inf,)])
def test_bad_samples_are_refused(bad):
    with pytest.raises(InvalidArgumentError):
        Measurement(samples_ms=bad)


def test_ratio_ci_detects_a_real_speedup_and_not_a_null_one():
    rng = np.random.default_rng(2)
    base = rng.normal(10, 0.3, 60)
    fast = rng.normal(8, 0.3, 60)
    point, lo, hi = ratio_ci(base, fast)
    assert point == pytest.approx(1.25, rel=0.05) and lo > 1.0
    point0, lo0, hi0 = ratio_ci(base, rng.normal(10, 0.3, 60))
    assert lo0 < 1.0 < hi0
