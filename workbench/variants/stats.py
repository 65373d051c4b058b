"""The speedup of a candidate over the baseline, with intervals that respect the pairing.

Samples are paired by round (both variants ran in the same round, in random order), which
cancels drift that affects a whole round.  The speedup is the Hodges-Lehmann estimate of the
per-round log ratios baseline/candidate with its Wilcoxon signed-rank interval (robust to the
interference spikes of a shared machine, and more efficient than the sign test); under ten
pairs, the median ratio with its order-statistic (binomial) interval.  The bootstrap interval of the
ratio of medians (``ratio_ci`` from workbench.measurement) is kept beside it as a cross-check.
Interference on a shared machine comes in bursts that last many rounds, so neighbouring pairs
are not independent and the signed-rank interval alone is too narrow (identical variants were
called different in 7.5% of trials under load). From 30 pairs on, the rounds are also cut into
about sqrt(n) consecutive blocks and the same interval is taken over the block medians (batch
means, the standard remedy for autocorrelated series); the reported interval spans both.
A speedup is "significant" when its interval excludes 1.

Several candidates against one baseline are a family: ``family_speedups`` controls the
family-wise error with Holm's step-down procedure. Each candidate gets the p-value dual to its
interval (the smallest alpha at which the interval excludes 1) and is reported with the interval
at the level Holm tested it at, so a "significant" verdict and its interval never disagree.
``min_detectable`` is the smallest change a comparison with this interval could have detected
(80% power at the same noise).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any, Mapping, Sequence

import numpy as np

from workbench.measurement import ratio_ci

CONFIDENCE = 0.95
NOISY_CI_WIDTH = 0.20  # the speedup interval spans more than 20% of the point: noisy
MIN_BLOCK_PAIRS = 30  # from this many pairs on, the interval also covers the block medians'
MIN_BLOCKS = 10
POWER = 0.80  # the power at which the smallest detectable effect is stated


def median_rank_interval(n: int, confidence: float = CONFIDENCE) -> tuple[int, int]:
    """0-based ranks (lo, hi) of the sorted sample bracketing the median at >= ``confidence``."""
    alpha = 1 - confidence
    cdf, k = 0.0, 0
    while True:
        p = math.comb(n, k) * 0.5**n
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
    block_low: float | None = None  # interval over block medians (None under MIN_BLOCK_PAIRS)
    block_high: float | None = None
    p_value: float | None = None  # dual to the interval: the smallest alpha excluding 1
    family_size: int = 1  # candidates compared against the same baseline (Holm)

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

    @property
    def min_detectable(self) -> float:
        """The smallest relative change (0.04 = 4%) this interval's noise lets one detect at
        POWER: the interval's half-width (log scale) times (z_alpha/2 + z_power) / z_alpha/2."""
        return min_detectable_effect(self.ci_low, self.ci_high, self.confidence)

    def describe(self) -> str:
        """``x1.23 [1.1, 1.4]`` and, for a candidate shown slower, how much slower in words."""
        text = f"x{self.point:.3g} [{self.ci_low:.3g}, {self.ci_high:.3g}]"
        return text + (f" ({1 / self.point:.3g}x slower)" if self.slower else "")

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Speedup":
        return cls(**{k: v for k, v in d.items() if k in cls.__dataclass_fields__})


def min_detectable_effect(ci_low: float, ci_high: float, confidence: float = CONFIDENCE, power: float = POWER) -> float:
    """Relative change detectable at ``power`` by a test whose interval is [ci_low, ci_high]."""
    if not (ci_low > 0 and ci_high > 0):
        return math.inf
    z_a = NormalDist().inv_cdf(0.5 + confidence / 2)
    z_b = NormalDist().inv_cdf(power)
    half = (math.log(ci_high) - math.log(ci_low)) / 2
    return math.exp(half * (z_a + z_b) / z_a) - 1


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


class PairedEvidence:
    """Per-round log ratios baseline/candidate, sorted once, so that the interval at any
    confidence (and the p-value dual to it) is an index look-up."""

    def __init__(self, baseline_ms: Sequence[float], candidate_ms: Sequence[float]) -> None:
        b = np.asarray(baseline_ms, dtype=np.float64)
        c = np.asarray(candidate_ms, dtype=np.float64)
        self.b, self.c = b, c
        self.n = n = min(b.size, c.size)
        self.log_ratios = d = np.log(np.maximum(b[:n], 1e-12) / np.maximum(c[:n], 1e-12))
        self.centre = 0.0
        self.walsh = self.block_walsh = None
        if n >= 10:
            i, j = np.triu_indices(n)
            self.walsh = np.sort((d[i] + d[j]) / 2)
            self.centre = float(np.median(self.walsh))
            if n >= MIN_BLOCK_PAIRS:
                n_blocks = max(MIN_BLOCKS, int(round(math.sqrt(n))))
                medians = np.array([np.median(block) for block in np.array_split(d, n_blocks)])
                bi, bj = np.triu_indices(medians.size)
                self.block_walsh = np.sort((medians[bi] + medians[bj]) / 2)
        elif n:
            self.ratios = np.sort(np.exp(d))
            self.centre = float(np.log(np.median(self.ratios)))

    @staticmethod
    def _walsh_bounds(walsh: np.ndarray, confidence: float) -> tuple[float, float]:
        m = walsh.size
        n = int(round((math.sqrt(8 * m + 1) - 1) / 2))  # m = n (n + 1) / 2
        z = NormalDist().inv_cdf(0.5 + confidence / 2)
        k = int(math.floor(n * (n + 1) / 4 - z * math.sqrt(n * (n + 1) * (2 * n + 1) / 24)))
        k = min(max(k, 0), m - 1)
        return float(walsh[k]), float(walsh[m - 1 - k])

    def log_interval(self, confidence: float) -> tuple[float, float]:
        """(lo, hi) of the centre of the log ratios at ``confidence`` (both intervals' span)."""
        if self.n == 0:
            return -math.inf, math.inf
        if self.walsh is None:
            r_lo, r_hi = median_rank_interval(self.n, confidence)
            return float(np.log(self.ratios[r_lo])), float(np.log(self.ratios[r_hi]))
        lo, hi = self._walsh_bounds(self.walsh, confidence)
        if self.block_walsh is not None:
            b_lo, b_hi = self._walsh_bounds(self.block_walsh, confidence)
            lo, hi = min(lo, b_lo), max(hi, b_hi)
        return lo, hi

    def block_log_interval(self, confidence: float) -> tuple[float, float] | None:
        return None if self.block_walsh is None else self._walsh_bounds(self.block_walsh, confidence)

    def excludes_one(self, confidence: float) -> bool:
        lo, hi = self.log_interval(confidence)
        return lo > 0 or hi < 0

    def p_value(self) -> float:
        """The smallest alpha at which the interval excludes 1 (1.0 when it never does)."""
        if self.n == 0 or not self.excludes_one(1e-9):
            return 1.0
        lo_a, hi_a = 1e-15, 1.0 - 1e-9  # alpha: excluded at hi_a, maybe not at lo_a
        if self.excludes_one(1 - lo_a):
            return lo_a
        for _ in range(60):  # bisection in log(alpha)
            mid = math.sqrt(lo_a * hi_a)
            if self.excludes_one(1 - mid):
                hi_a = mid
            else:
                lo_a = mid
        return hi_a

    def speedup(self, confidence: float = CONFIDENCE, family_size: int = 1, p_value: float | None = None) -> Speedup:
        lo_log, hi_log = self.log_interval(confidence)
        block = self.block_log_interval(confidence)
        b, c = self.b, self.c
        _, boot_lo, boot_hi = ratio_ci(b.tolist(), c.tolist(), confidence=confidence)
        p95 = float(np.percentile(b, 95) / max(np.percentile(c, 95), 1e-12))
        return Speedup(
            point=math.exp(self.centre),
            ci_low=math.exp(lo_log),
            ci_high=math.exp(hi_log),
            p95_ratio=p95,
            bootstrap_low=boot_lo,
            bootstrap_high=boot_hi,
            n_pairs=self.n,
            confidence=confidence,
            block_low=math.exp(block[0]) if block else None,
            block_high=math.exp(block[1]) if block else None,
            p_value=self.p_value() if p_value is None else p_value,
            family_size=family_size,
        )


def paired_speedup(
    baseline_ms: Sequence[float], candidate_ms: Sequence[float], confidence: float = CONFIDENCE
) -> Speedup:
    """Speedup from per-round pairs: Hodges-Lehmann / signed-rank interval on log ratios
    (n >= 10), else the median of the ratios with its order-statistic interval."""
    return PairedEvidence(baseline_ms, candidate_ms).speedup(confidence)


def holm(p_values: dict[str, float], alpha: float = 1 - CONFIDENCE) -> dict[str, tuple[bool, float]]:
    """Holm's step-down over a family: name -> (rejected, the confidence its interval is taken at).

    The j-th smallest p-value is tested at alpha / (m - j + 1) while all before it were rejected;
    the ones not rejected are reported at the Bonferroni level 1 - alpha / m, where their
    intervals include 1 (their p-values exceed alpha / m), so no verdict contradicts its interval."""
    m = len(p_values)
    out: dict[str, tuple[bool, float]] = {}
    still = True
    for j, (name, p) in enumerate(sorted(p_values.items(), key=lambda kv: kv[1])):
        level = alpha / (m - j)
        if still and p <= level:
            out[name] = (True, 1 - level)
        else:
            still = False
            out[name] = (False, 1 - alpha / m)
    return out


def family_speedups(
    baseline_ms: Sequence[float], candidates_ms: Mapping[str, Sequence[float]], confidence: float = CONFIDENCE
) -> dict[str, Speedup]:
    """Each candidate's speedup over the baseline, family-wise error controlled (Holm)."""
    evidence = {name: PairedEvidence(baseline_ms, c) for name, c in candidates_ms.items()}
    p = {name: e.p_value() for name, e in evidence.items()}
    levels = holm(p, 1 - confidence)
    return {
        name: e.speedup(levels[name][1], family_size=len(evidence), p_value=p[name]) for name, e in evidence.items()
    }
