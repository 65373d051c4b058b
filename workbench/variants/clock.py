"""Seeded fake clocks for the timed rounds, so that decision and ranking logic is tested on
known samples, not on this machine's timing (``CompareSettings(timer=FakeTimer(...))``).

``FakeTimer``: each variant's per-call time is given; a sample is that time times lognormal noise
and, optionally, a load factor shared by everything timed (an AR(1) series per sample: bursts of
interference that last several rounds, as another process on the machine makes).  By default the
variant is still called once per sample (so a variant that raises on a later call, changes global
state or stalls behaves as it would), but its duration is not what is recorded.  The clock the
timing budget is spent on is the fake one, so the number of rounds is deterministic too.

``RecordedTimer``: replays recorded samples per variant name (cycling), e.g. from a saved
comparison's ``cmp.samples_ms``.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Mapping, Sequence

import numpy as np

if TYPE_CHECKING:
    from workbench.variants.timing import Timed


class FakeTimer:
    timer = "fake"
    resolution_ms = 1e-6
    measures = False  # nothing real is timed: the rounds need no quiet (no gc pause)

    def __init__(
        self,
        per_call_ms: Mapping[str, float] | float = 1.0,
        *,
        default_ms: float = 1.0,
        noise: float = 0.02,
        load: float = 0.0,
        load_persistence: float = 0.9,
        overhead_ms: float = 0.05,
        seed: int = 0,
        call: bool = True,
    ) -> None:
        self.per_call_ms = dict(per_call_ms) if isinstance(per_call_ms, Mapping) else {}
        self.default_ms = float(per_call_ms) if not isinstance(per_call_ms, Mapping) else float(default_ms)
        self.noise, self.load, self.phi = float(noise), float(load), float(load_persistence)
        self.overhead_ms = float(overhead_ms)
        self.seed = seed
        self.rng = np.random.default_rng(seed)
        self.call = call
        self.now_s = 0.0
        self._ar = 0.0
        self.calls: dict[str, int] = {}

    def describe(self) -> str:
        return (
            f"FakeTimer(seed={self.seed}, noise={self.noise:g}, load={self.load:g}, "
            f"per_call_ms={self.per_call_ms or self.default_ms})"
        )

    def true_ms(self, name: str) -> float:
        return float(self.per_call_ms.get(name, self.default_ms))

    def clock_s(self) -> float:
        return self.now_s

    def calibrate(self, item: Timed, one_call_ms: float) -> None:
        item.calls_per_sample, item.per_call_ms = 1, self.true_ms(item.name)

    def _load_factor(self) -> float:
        if self.load <= 0:
            return 1.0
        sd = self.load * math.sqrt(1 - self.phi**2)
        self._ar = self.phi * self._ar + float(self.rng.normal(0, sd))
        return math.exp(abs(self._ar))  # interference only ever slows a sample down

    def sample_ms(self, item: Timed) -> float:
        if self.call:
            for _ in range(item.calls_per_sample):
                item.fn(*item.args)
        self.calls[item.name] = self.calls.get(item.name, 0) + 1
        ms = self.true_ms(item.name) * float(self.rng.lognormal(0.0, self.noise)) * self._load_factor()
        self.now_s += (ms * item.calls_per_sample + self.overhead_ms) / 1e3
        return ms


class RecordedTimer:
    """Replays ``samples_ms[name]`` in order (cycling); the variant is not called unless ``call``."""

    timer = "recorded"
    resolution_ms = 1e-6
    measures = False

    def __init__(self, samples_ms: Mapping[str, Sequence[float]], *, call: bool = False) -> None:
        if not samples_ms or any(len(v) == 0 for v in samples_ms.values()):
            from workbench.errors import InvalidArgumentError

            raise InvalidArgumentError("RecordedTimer needs at least one sample per variant name")
        self.samples = {k: [float(x) for x in v] for k, v in samples_ms.items()}
        self.pos = {k: 0 for k in self.samples}
        self.call = call
        self.now_s = 0.0

    def describe(self) -> str:
        return f"RecordedTimer({ {k: len(v) for k, v in self.samples.items()} } samples)"

    def clock_s(self) -> float:
        return self.now_s

    def calibrate(self, item: Timed, one_call_ms: float) -> None:
        item.calls_per_sample = 1
        item.per_call_ms = float(np.median(self.samples.get(item.name, [one_call_ms])))

    def sample_ms(self, item: Timed) -> float:
        if self.call:
            item.fn(*item.args)
        seq = self.samples.get(item.name)
        if seq is None:
            from workbench.errors import InvalidArgumentError

            raise InvalidArgumentError(f"RecordedTimer has no samples for {item.name!r}; it has {list(self.samples)}")
        i = self.pos[item.name]
        self.pos[item.name] = i + 1
        ms = seq[i % len(seq)]
        self.now_s += ms / 1e3
        return ms
