"""The speedup of a candidate over the baseline, with intervals that respect the pairing.

Samples are paired by round (both variants ran in the same round, in random order).  The
speedup's interval is the distribution-free interval of the median of the per-round ratios
baseline/candidate (order statistics of a binomial(n, 1/2)): exact coverage without assuming a
distribution, and robust to drift that affects a whole round.  The bootstrap interval of the
ratio of medians (``ratio_ci`` from capture.measurement) is kept beside it as a cross-check.
A speedup is "significant" when its interval excludes 1.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from workbench.capture.measurement import ratio_ci

CONFIDENCE = 0.95
NOISY_CI_WIDTH = 0.20       # the speedup interval spans more than 20% of the point: noisy


def median_rank_interval(n: int, confidence: float = CONFIDENCE) -> tuple[int, int]:
    """0-based ranks (lo, hi) of the sorted sample bracketing the median at >= ``confidence``."""
    alpha = 1 - confidence
    cdf, k = 0.0, 0
    while True:
        p = math.comb(n, k) * 0.5 ** n
        if cdf + p > alpha / 2:
            break
        cdf += p
        k += 1
    return max(0, k - 1), min(n - 1, n - k)


@dataclass(frozen=True)
class Speedup:
    """baseline time / candidate time: > 1 means the candidate is faster."""

    point: float
    ci_low: float
    ci_high: float
    p95_ratio: float
    bootstrap_low: float
    bootstrap_high: float
    n_pairs: int
    confidence: float = CONFIDENCE

    @property
    def significant(self) -> bool:
        return self.ci_low > 1.0 or self.ci_high < 1.0

    @property
    def faster(self) -> bool:
        return self.ci_low > 1.0

    @property
    def slower(self) -> bool:
        return self.ci_high < 1.0

    @property
    def noisy(self) -> bool:
        return (self.ci_high - self.ci_low) > NOISY_CI_WIDTH * self.point

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Speedup":
        return cls(**d)


def paired_speedup(baseline_ms: Sequence[float], candidate_ms: Sequence[float],
                   confidence: float = CONFIDENCE) -> Speedup:
    b = np.asarray(baseline_ms, dtype=np.float64)
    c = np.asarray(candidate_ms, dtype=np.float64)
    n = min(b.size, c.size)
    ratios = np.sort(b[:n] / np.maximum(c[:n], 1e-12))
    lo, hi = median_rank_interval(n, confidence)
    _, boot_lo, boot_hi = ratio_ci(b, c, confidence=confidence)
    point = float(np.median(ratios))
    p95 = float(np.percentile(b, 95) / max(np.percentile(c, 95), 1e-12))
    return Speedup(point=point, ci_low=float(ratios[lo]), ci_high=float(ratios[hi]), p95_ratio=p95,
                   bootstrap_low=boot_lo, bootstrap_high=boot_hi, n_pairs=n, confidence=confidence)
