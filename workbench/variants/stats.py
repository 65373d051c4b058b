"""The speedup of a candidate over the baseline, with intervals that respect the pairing.

Samples are paired by round (both variants ran in the same round, in random order), which
cancels drift that affects a whole round.  The speedup is the Hodges-Lehmann estimate of the
per-round log ratios baseline/candidate with its Wilcoxon signed-rank interval (robust to the
interference spikes of a shared machine, and more efficient than the sign test); under ten
pairs, the median ratio with its order-statistic (binomial) interval.  The bootstrap interval of the
ratio of medians (``ratio_ci`` from capture.measurement) is kept beside it as a cross-check.
Interference on a shared machine comes in bursts that last many rounds, so neighbouring pairs
are not independent and the signed-rank interval alone is too narrow (identical variants were
called different in 7.5% of trials under load). From 30 pairs on, the rounds are also cut into
about sqrt(n) consecutive blocks and the same interval is taken over the block medians (batch
means, the standard remedy for autocorrelated series); the reported interval spans both.
A speedup is "significant" when its interval excludes 1.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any, Sequence

import numpy as np

from workbench.capture.measurement import ratio_ci

CONFIDENCE = 0.95
NOISY_CI_WIDTH = 0.20       # the speedup interval spans more than 20% of the point: noisy
MIN_BLOCK_PAIRS = 30        # from this many pairs on, the interval also covers the block medians'
MIN_BLOCKS = 10


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
    block_low: float | None = None       # interval over block medians (None under MIN_BLOCK_PAIRS)
    block_high: float | None = None

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


def walsh_interval(d: np.ndarray, confidence: float = CONFIDENCE) -> tuple[float, float, float]:
    """Hodges-Lehmann estimate and Wilcoxon signed-rank interval of the centre of ``d``.

    Exact in the null case that matters here: two variants that do the same work, run in random
    order within each round, give a log-ratio distribution symmetric about 0.  Normal
    approximation of the signed-rank statistic (n >= 10).
    """
    n = d.size
    i, j = np.triu_indices(n)
    walsh = np.sort((d[i] + d[j]) / 2)
    m = walsh.size
    z = NormalDist().inv_cdf(0.5 + confidence / 2)
    k = int(math.floor(n * (n + 1) / 4 - z * math.sqrt(n * (n + 1) * (2 * n + 1) / 24)))
    k = min(max(k, 0), m - 1)
    return float(np.median(walsh)), float(walsh[k]), float(walsh[m - 1 - k])


def block_interval(d: np.ndarray, confidence: float = CONFIDENCE) -> tuple[float, float] | None:
    """Signed-rank interval of the medians of about sqrt(n) consecutive blocks of ``d`` (at
    least MIN_BLOCKS), or None under MIN_BLOCK_PAIRS values."""
    if d.size < MIN_BLOCK_PAIRS:
        return None
    n_blocks = max(MIN_BLOCKS, int(round(math.sqrt(d.size))))
    medians = np.array([np.median(block) for block in np.array_split(d, n_blocks)])
    _, lo, hi = walsh_interval(medians, confidence)
    return lo, hi


def paired_speedup(baseline_ms: Sequence[float], candidate_ms: Sequence[float],
                   confidence: float = CONFIDENCE) -> Speedup:
    """Speedup from per-round pairs: Hodges-Lehmann / signed-rank interval on log ratios
    (n >= 10), else the median of the ratios with its order-statistic interval."""
    b = np.asarray(baseline_ms, dtype=np.float64)
    c = np.asarray(candidate_ms, dtype=np.float64)
    n = min(b.size, c.size)
    log_ratios = np.log(np.maximum(b[:n], 1e-12) / np.maximum(c[:n], 1e-12))
    block = block_interval(log_ratios, confidence)
    if n >= 10:
        centre, lo_log, hi_log = walsh_interval(log_ratios, confidence)
        if block is not None:
            lo_log, hi_log = min(lo_log, block[0]), max(hi_log, block[1])
        point, lo, hi = math.exp(centre), math.exp(lo_log), math.exp(hi_log)
    else:
        ratios = np.sort(np.exp(log_ratios))
        r_lo, r_hi = median_rank_interval(n, confidence)
        point, lo, hi = float(np.median(ratios)), float(ratios[r_lo]), float(ratios[r_hi])
    _, boot_lo, boot_hi = ratio_ci(b, c, confidence=confidence)
    p95 = float(np.percentile(b, 95) / max(np.percentile(c, 95), 1e-12))
    return Speedup(point=point, ci_low=lo, ci_high=hi, p95_ratio=p95, bootstrap_low=boot_lo,
                   bootstrap_high=boot_hi, n_pairs=n, confidence=confidence,
                   block_low=math.exp(block[0]) if block else None,
                   block_high=math.exp(block[1]) if block else None)
