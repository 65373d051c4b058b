"""``CompareSettings``: everything that decides how a comparison is run, frozen, in one value.

Like ``torch.utils.benchmark``'s ``TaskSpec``: ``wb.compare(variants, inputs, settings=s)``, or the
keyword arguments of ``wb.compare`` (a convenience that builds the same object).  The settings are
written into the comparison (``cmp.settings``) and its DecisionRecord, so a reader knows what was
run: how many checks, the tolerances, the timing budget and how far it may be extended, the
confidence, the smallest effect worth deciding on, the timer.

Timing: interleaved rounds for ``budget_s`` (at least ``min_rounds``); then, while some
candidate's speedup interval is too wide to decide, more rounds, until every candidate is decided
or ``max_budget_s`` of timing (default 3 x ``budget_s``) or ``max_rounds`` is spent.  A candidate is
decided when its interval is narrower than ``min_effect`` (half-width on the log scale: precise
enough that a change of ``min_effect`` could not hide in it) or when it excludes 1 at the strict
interim level ``INTERIM_CONFIDENCE`` (a Haybittle-Peto boundary: the final verdict keeps its
nominal error rate however many times the rounds were extended).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields, replace
from typing import TYPE_CHECKING, Any

from workbench.errors import InvalidArgumentError

if TYPE_CHECKING:
    from workbench.variants.timing import Timer

INTERIM_CONFIDENCE = 0.999  # an interim look stops early only at this level (Haybittle-Peto)
EXTEND_FACTOR = 3.0  # default max_budget_s = this x budget_s


@dataclass(frozen=True)
class CompareSettings:
    """How ``wb.compare`` runs; see the module docstring.  ``timer``: a zero-argument factory of
    the timer used for the timed rounds (default: ``perf_counter_ns`` blocks on CPU, CUDA events on
    a GPU); tests pass a seeded fake clock (``wb.variants.clock.FakeTimer``)."""

    checks: int = 3
    time_limit_s: float = 120.0
    budget_s: float = 5.0
    max_budget_s: float | None = None
    min_rounds: int = 10
    max_rounds: int = 1000
    confidence: float = 0.95
    min_effect: float = 0.03
    tolerances: tuple[tuple[str, tuple[float, float]], ...] = ()
    profile: bool = True
    end_to_end_ms: float | None = None
    seed: int = 0
    problem: str = ""
    timer: Any = field(default=None, compare=False)
    memory_budget: int | None = None  # bytes: a faster variant whose peak memory is above it is keep_guarded

    def __post_init__(self) -> None:
        tol = self.tolerances
        if isinstance(tol, dict):
            object.__setattr__(
                self, "tolerances", tuple(sorted((str(k), (float(v[0]), float(v[1]))) for k, v in tol.items()))
            )
        elif tol is None:
            object.__setattr__(self, "tolerances", ())
        problems = []
        if not isinstance(self.checks, int) or self.checks < 1:
            problems.append(f"checks must be an int >= 1, got {self.checks!r}")
        for name in ("time_limit_s", "budget_s"):
            v = getattr(self, name)
            if not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
                problems.append(f"{name} must be a finite number >= 0, got {v!r}")
        if self.time_limit_s == 0:
            problems.append("time_limit_s must be > 0")
        if self.max_budget_s is not None and (not math.isfinite(self.max_budget_s) or self.max_budget_s < 0):
            problems.append(f"max_budget_s must be a finite number >= 0 or None, got {self.max_budget_s!r}")
        if not isinstance(self.min_rounds, int) or self.min_rounds < 1:
            problems.append(f"min_rounds must be an int >= 1, got {self.min_rounds!r}")
        if not isinstance(self.max_rounds, int) or self.max_rounds < 1:
            problems.append(f"max_rounds must be an int >= 1, got {self.max_rounds!r}")
        if not 0.5 < self.confidence < 1:
            problems.append(f"confidence must be between 0.5 and 1, got {self.confidence!r}")
        if not 0 < self.min_effect < 1:
            problems.append(f"min_effect must be between 0 and 1 (0.03 = 3%), got {self.min_effect!r}")
        if self.end_to_end_ms is not None and not (self.end_to_end_ms > 0 and math.isfinite(self.end_to_end_ms)):
            problems.append(f"end_to_end_ms must be a positive number or None, got {self.end_to_end_ms!r}")
        if self.memory_budget is not None and (
            isinstance(self.memory_budget, bool)
            or not isinstance(self.memory_budget, (int, float))
            or not math.isfinite(self.memory_budget)
            or self.memory_budget <= 0
        ):
            problems.append(f"memory_budget must be a number of bytes > 0 or None, got {self.memory_budget!r}")
        if self.timer is not None and not (callable(self.timer) or hasattr(self.timer, "sample_ms")):
            problems.append("timer must be a timer (with sample_ms) or a zero-argument factory of one")
        if problems:
            raise InvalidArgumentError("compare settings: " + "; ".join(problems))

    # -- derived -------------------------------------------------------------------------
    @property
    def timing_cap_s(self) -> float:
        """The most seconds of timed rounds: ``max_budget_s`` or EXTEND_FACTOR x ``budget_s``."""
        cap = EXTEND_FACTOR * self.budget_s if self.max_budget_s is None else self.max_budget_s
        return max(cap, self.budget_s)

    def make_timer(self) -> Timer | None:
        """The timer object for the rounds (None: the default for the device)."""
        if self.timer is None or hasattr(self.timer, "sample_ms"):
            return self.timer
        return self.timer()

    @property
    def round_cap(self) -> int:
        return max(self.max_rounds, self.min_rounds)

    @property
    def tolerance_overrides(self) -> dict[str, tuple[float, float]] | None:
        return dict(self.tolerances) or None

    def with_(self, **kw: Any) -> "CompareSettings":
        return replace(self, **kw)

    def to_dict(self) -> dict[str, Any]:
        d = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "timer"}
        d["tolerances"] = {k: list(v) for k, v in self.tolerances}
        d["timer"] = _timer_name(self.timer)
        d["timing_cap_s"] = self.timing_cap_s
        d["interim_confidence"] = INTERIM_CONFIDENCE
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "CompareSettings":
        names = {f.name for f in fields(cls)} - {"timer"}
        kw = {k: v for k, v in d.items() if k in names}
        if isinstance(kw.get("tolerances"), dict):
            kw["tolerances"] = {k: tuple(v) for k, v in kw["tolerances"].items()}
        return cls(**kw)


def _timer_name(timer: Any) -> str:
    if timer is None:
        return "default (perf_counter_ns blocks on CPU, CUDA events on a GPU)"
    name = getattr(timer, "describe", None)
    if callable(name):
        try:
            return str(name())
        except Exception:  # noqa: BLE001
            pass
    return getattr(timer, "__name__", None) or type(timer).__name__


KEYWORDS = tuple(f.name for f in fields(CompareSettings))


def settings_from(settings: CompareSettings | None, overrides: dict[str, Any]) -> CompareSettings:
    """``settings`` (or the defaults) with the given keyword arguments applied."""
    unknown = set(overrides) - set(KEYWORDS)
    if unknown:
        raise InvalidArgumentError(f"compare() got unknown settings {sorted(unknown)}; known: {list(KEYWORDS)}")
    if settings is not None and not isinstance(settings, CompareSettings):
        raise InvalidArgumentError("settings= takes a wb.variants.CompareSettings(...)")
    base = settings or CompareSettings()
    return replace(base, **overrides) if overrides else base
