"""Measurements are values: raw samples plus what was measured; statistics derive from them.

Modelled on ``torch.utils.benchmark.Measurement``: keep every sample, derive median,
spread and noise warnings on demand, format elsewhere.  No torch import here, so a saved
run can be reloaded and inspected anywhere.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from statistics import NormalDist
from typing import Any, Sequence

import numpy as np

from workbench.errors import InvalidArgumentError

# Thresholds behind the noise warnings, named so that rules and docs can cite them.
NOISY_RELATIVE_IQR = 0.10  # IQR / median above this: the spread is large against the signal
FEW_SAMPLES = 10  # fewer samples than this: the median's interval is wide
TIMER_RESOLUTION_FACTOR = 100  # median under this many timer ticks: resolution dominates


@dataclass(frozen=True)
class Measurement:
    """Raw timing samples (milliseconds, one per timed call or per ``calls_per_sample`` calls)."""

    samples_ms: tuple[float, ...]
    label: str = ""
    timer: str = "perf_counter_ns"  # or "cuda_event"
    calls_per_sample: int = 1
    timer_resolution_ms: float = 1e-6
    metadata: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        samples = tuple(float(s) for s in self.samples_ms)
        if not samples:
            raise InvalidArgumentError("a Measurement needs at least one sample; got none")
        if any(not math.isfinite(s) or s < 0 for s in samples):
            raise InvalidArgumentError(
                f"timing samples must be finite and >= 0 ms; got {[s for s in samples if not math.isfinite(s) or s < 0][:3]}"
            )
        object.__setattr__(self, "samples_ms", samples)

    # -- statistics ---------------------------------------------------------------------
    @property
    def n(self) -> int:
        return len(self.samples_ms)

    @property
    def _arr(self) -> np.ndarray:
        return np.asarray(self.samples_ms, dtype=np.float64)

    @property
    def median_ms(self) -> float:
        return float(np.median(self._arr))

    @property
    def mean_ms(self) -> float:
        return float(np.mean(self._arr))

    @property
    def min_ms(self) -> float:
        return float(np.min(self._arr))

    @property
    def max_ms(self) -> float:
        return float(np.max(self._arr))

    @property
    def p95_ms(self) -> float:
        return float(np.percentile(self._arr, 95))

    @property
    def p5_ms(self) -> float:
        return float(np.percentile(self._arr, 5))

    @property
    def iqr_ms(self) -> float:
        q75, q25 = np.percentile(self._arr, [75, 25])
        return float(q75 - q25)

    @property
    def iqr(self) -> float:  # DESIGN.md's name
        return self.iqr_ms

    @property
    def std_ms(self) -> float:
        return float(np.std(self._arr, ddof=1)) if self.n > 1 else 0.0

    @property
    def relative_iqr(self) -> float:
        med = self.median_ms
        return self.iqr_ms / med if med > 0 else float("inf")

    def median_ci_ms(self, confidence: float = 0.95) -> tuple[float, float]:
        """Distribution-free interval for the median from order statistics (binomial, normal approx.)."""
        xs = np.sort(self._arr)
        n = len(xs)
        if n < 3:
            return float(xs[0]), float(xs[-1])
        z = NormalDist().inv_cdf(0.5 + confidence / 2)
        half = z * math.sqrt(n) / 2
        lo = max(0, int(math.floor(n / 2 - half)) - 1)
        hi = min(n - 1, int(math.ceil(n / 2 + half)))
        return float(xs[lo]), float(xs[hi])

    @property
    def warnings(self) -> tuple[str, ...]:
        out = []
        if self.n < FEW_SAMPLES:
            out.append(f"only {self.n} samples (< {FEW_SAMPLES}): the median's interval is wide")
        if self.n >= 4 and self.relative_iqr > NOISY_RELATIVE_IQR:
            out.append(f"noisy: IQR is {self.relative_iqr:.0%} of the median (> {NOISY_RELATIVE_IQR:.0%})")
        per_sample_ms = self.median_ms
        if per_sample_ms < TIMER_RESOLUTION_FACTOR * self.timer_resolution_ms:
            out.append(
                f"median {per_sample_ms * 1e3:.3f} us is under {TIMER_RESOLUTION_FACTOR}x the timer "
                f"resolution; time more calls per sample"
            )
        return tuple(out)

    @property
    def is_noisy(self) -> bool:
        return any(w.startswith("noisy") for w in self.warnings)

    # -- serialisation ------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return {
            "samples_ms": list(self.samples_ms),
            "label": self.label,
            "timer": self.timer,
            "calls_per_sample": self.calls_per_sample,
            "timer_resolution_ms": self.timer_resolution_ms,
            "metadata": dict(self.metadata),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Measurement":
        return cls(
            samples_ms=tuple(d["samples_ms"]),
            label=d.get("label", ""),
            timer=d.get("timer", "perf_counter_ns"),
            calls_per_sample=int(d.get("calls_per_sample", 1)),
            timer_resolution_ms=float(d.get("timer_resolution_ms", 1e-6)),
            metadata=dict(d.get("metadata", {})),
        )

    def summary(self) -> dict[str, float]:
        lo, hi = self.median_ci_ms()
        return {
            "n": self.n,
            "median_ms": self.median_ms,
            "p95_ms": self.p95_ms,
            "iqr_ms": self.iqr_ms,
            "min_ms": self.min_ms,
            "max_ms": self.max_ms,
            "median_ci_low_ms": lo,
            "median_ci_high_ms": hi,
        }

    def __repr__(self) -> str:
        lo, hi = self.median_ci_ms()
        return (
            f"Measurement({self.label or 'unnamed'}: median {self.median_ms:.4g} ms "
            f"[95% CI {lo:.4g}-{hi:.4g}], p95 {self.p95_ms:.4g} ms, IQR {self.iqr_ms:.3g} ms, n={self.n})"
        )


def ratio_ci(
    baseline: Sequence[float],
    candidate: Sequence[float],
    *,
    confidence: float = 0.95,
    n_boot: int = 2000,
    seed: int = 0,
) -> tuple[float, float, float]:
    """Speedup (baseline median / candidate median) with a bootstrap percentile interval."""
    b = np.asarray(baseline, dtype=np.float64)
    c = np.asarray(candidate, dtype=np.float64)
    if b.size == 0 or c.size == 0:
        raise InvalidArgumentError("ratio_ci needs samples on both sides")
    point = float(np.median(b) / np.median(c))
    rng = np.random.default_rng(seed)
    bi = rng.integers(0, b.size, size=(n_boot, b.size))
    ci = rng.integers(0, c.size, size=(n_boot, c.size))
    ratios = np.median(b[bi], axis=1) / np.median(c[ci], axis=1)
    alpha = (1 - confidence) / 2
    lo, hi = np.quantile(ratios, [alpha, 1 - alpha])
    return point, float(lo), float(hi)
