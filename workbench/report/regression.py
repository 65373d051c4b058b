"""The CI gate: is a report slower than an earlier one, judged from samples of several processes?

A report records clean per-call samples from several fresh interpreter processes
(``workbench.report.sampler``), like pyperf's worker processes: most of what differs between two
CI runs of the same code is between processes (memory layout, frequency, neighbours), which two
medians cannot see. ``gate(old, new, threshold_pct)`` compares two such sample sets:

* the statistic of a report is the mean over its processes of each process's 10th percentile
  of its per-call times (``GATE_QUANTILE``). Other work on the machine only ever adds time to a
  call (time slices lost, caches evicted), so a low quantile is what the code itself costs, and
  it barely moves under load, where a median doubles: on a 2-core machine at load average 7,
  the process medians of one unchanged workload ranged 1.76-14.0 ms while their 10th
  percentiles stayed within 1.71-2.02 ms (``benchmarks/gate_power.py``, 120 processes). The price: a change that slows only the slowest
  tenth of the calls goes unseen (``quantile=0.5`` judges medians instead);
* the ratio new / old gets an interval from a seeded hierarchical bootstrap (processes with
  replacement, then samples within each chosen process), widened for the few processes it
  resamples (a bootstrap over k values sees (k-1)/k of their variance and has normal tails; the
  interval is scaled to Student's t with Welch's degrees of freedom over the process statistics);
* REGRESSION only when the whole interval lies beyond ``1 + threshold``; "ok" when the whole
  interval lies within it; "inconclusive" (not a failure) when it straddles the threshold;
* a busy machine is said: a process whose threads waited for a CPU (Linux
  ``/proc/self/task/*/schedstat`` run-queue delay) more than ``LOADED_WAIT_PCT`` of its wall
  time shares the machine with other work, and the verdict notes it;
* "refused" when the two reports come from different environments (CPU/GPU model, torch,
  threads, ...) or either has samples from fewer than ``MIN_PROCESSES`` processes;
* every verdict states the smallest change the pair could have detected.

``gate`` is a pure function of the two sample sets (seeded); it never times anything.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from statistics import NormalDist
from typing import Any, Mapping, Sequence

import numpy as np

from workbench._moved import current_spec
from workbench.errors import InvalidArgumentError, ReportError

SUMMARY_FILE = "summary.json"
SAMPLES_FORMAT = "workbench.samples"
SAMPLES_FORMAT_VERSION = 1
MIN_PROCESSES = 2  # between-process spread cannot be estimated from one process
CONFIDENCE = 0.95  # two-sided; the regression test is one-sided at (1 + CONFIDENCE) / 2
RESAMPLES = 4000
SEED = 0
LOADED_WAIT_PCT = 10.0  # run-queue wait of a process's threads, % of its wall time: a busy machine
GATE_QUANTILE = 0.10  # each process is represented by this quantile of its per-call times
# What a timing depends on, compared between the two reports (recorded by each worker process).
GATE_ENVIRONMENT_KEYS = (
    "cpu_model",
    "logical_cpus",
    "gpu",
    "device",
    "torch",
    "cuda",
    "threads",
    "python",
    "omp_wait_policy",
    "allocator",
)

REGRESSION, INCONCLUSIVE, OK, REFUSED = "regression", "inconclusive", "ok", "refused"
EXIT_CODES = {OK: 0, INCONCLUSIVE: 0, REGRESSION: 1, REFUSED: 2}


# -- reading a report's summary --------------------------------------------------------------
MAX_SAMPLE_MS = 1e9  # 11.6 days per call: beyond it a "sample" is no timing, and its logs overflow the statistics


def load_summary(report_dir: str | Path) -> dict[str, Any]:
    """The ``summary.json`` a report wrote into its folder (a JSON object, else ReportError)."""
    path = Path(report_dir) / SUMMARY_FILE
    if not Path(report_dir).is_dir():
        raise ReportError(
            f"{str(report_dir)!r} is not a workbench report folder (no such folder); "
            "pass the --out folder of an earlier `workbench report`"
        )
    if not path.is_file():
        raise ReportError(
            f"{str(report_dir)!r} is not a workbench report folder: {SUMMARY_FILE} is missing; "
            "pass the --out folder of an earlier `workbench report`"
        )
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise ReportError(f"{path} is not a readable report summary ({exc}); re-run that report") from exc
    if not isinstance(doc, dict):
        raise ReportError(
            f"{path} is not a readable report summary (a JSON {type(doc).__name__}, not an object); re-run that report"
        )
    return doc


def load_samples(report_dir: str | Path) -> "SampleSet":
    """The per-process samples an earlier report recorded, checked for use as a baseline."""
    doc = load_summary(report_dir)
    path = Path(report_dir) / SUMMARY_FILE
    timing = doc.get("timing")
    if isinstance(timing, dict) and "median_ms" in timing:
        median = timing["median_ms"]
        if (
            isinstance(median, bool)
            or not isinstance(median, (int, float))
            or not math.isfinite(median)
            or median <= 0
            or median > MAX_SAMPLE_MS
        ):
            raise ReportError(
                f"{path} records a median of {median!r} ms, which no timing can have "
                f"(it must be a finite number > 0 and at most {MAX_SAMPLE_MS:g}): it is not a usable baseline; "
                "re-run that report"
            )
    samples = doc.get("samples")
    if not samples:
        raise ReportError(
            f"{path} has no per-process samples: it was written by an older workbench, from a --bundle, "
            "or with --processes 0, and the gate compares samples from several processes, not two medians. "
            "Re-run that report with this workbench (workbench report --workload ... --out "
            f"{report_dir}) to make it a baseline"
        )
    try:
        return SampleSet.from_dict(samples)
    except (InvalidArgumentError, KeyError, TypeError, ValueError) as exc:
        raise ReportError(f"{path} has unusable samples ({exc}); re-run that report") from exc


# -- the evidence ----------------------------------------------------------------------------
@dataclass(frozen=True)
class SampleSet:
    """Clean per-call samples (ms) of one workload, grouped by the process that took them."""

    processes: tuple[tuple[float, ...], ...]
    environment: Mapping[str, Any] = field(default_factory=dict)
    workload: str = ""
    warmup: int = 0
    repeat: int = 0
    cold_ms: tuple[float, ...] = ()
    cpu_wait_pct: tuple[float | None, ...] = ()  # per process: run-queue wait, % of wall time (nan: unknown)

    def __post_init__(self) -> None:
        if isinstance(self.processes, (str, bytes)) or not isinstance(self.processes, Sequence):
            raise InvalidArgumentError(
                f"processes must be a list of per-process sample lists; got {type(self.processes).__name__}"
            )
        groups = []
        for index, group in enumerate(self.processes):
            if isinstance(group, (str, bytes)) or not isinstance(group, Sequence) or not group:
                raise InvalidArgumentError(f"process {index + 1} has no samples (a non-empty list of ms)")
            values = []
            for s in group:
                if isinstance(s, bool) or not isinstance(s, (int, float, np.floating, np.integer)):
                    raise InvalidArgumentError(f"process {index + 1} has a sample {s!r} that is not a number")
                values.append(float(s))
            if any(not math.isfinite(v) or v < 0 or v > MAX_SAMPLE_MS for v in values):
                bad = [v for v in values if not math.isfinite(v) or v < 0 or v > MAX_SAMPLE_MS][:3]
                raise InvalidArgumentError(
                    f"process {index + 1} has samples that are not times from 0 to "
                    f"{MAX_SAMPLE_MS:g} ms (a call of over 11 days): {bad}"
                )
            if float(np.median(values)) <= 0:
                raise InvalidArgumentError(f"process {index + 1} has a median of 0 ms: not a timing")
            groups.append(tuple(values))
        if not groups:
            raise InvalidArgumentError("a sample set needs samples from at least one process; got none")
        if not isinstance(self.environment, Mapping):
            raise InvalidArgumentError(f"environment must be a mapping; got {type(self.environment).__name__}")
        object.__setattr__(self, "processes", tuple(groups))
        object.__setattr__(self, "environment", dict(self.environment))
        object.__setattr__(self, "cold_ms", tuple(float(c) for c in self.cold_ms))
        object.__setattr__(self, "cpu_wait_pct", tuple(math.nan if w is None else float(w) for w in self.cpu_wait_pct))

    @property
    def max_cpu_wait_pct(self) -> float:
        """The most any process waited for a CPU (% of its wall time); nan when not recorded."""
        known = [w for w in self.cpu_wait_pct if w is not None and math.isfinite(w)]
        return max(known) if known else math.nan

    @property
    def n_processes(self) -> int:
        return len(self.processes)

    @property
    def n_samples(self) -> int:
        return sum(len(g) for g in self.processes)

    def process_medians_ms(self) -> np.ndarray:
        return self.process_levels_ms(0.5)

    def process_levels_ms(self, quantile: float = 0.5) -> np.ndarray:
        """Each process's ``quantile`` of its samples (0.5: its median)."""
        return np.array([np.quantile(g, quantile) for g in self.processes], dtype=np.float64)

    def center_at(self, quantile: float) -> float:
        """The mean over processes of each process's ``quantile``."""
        return float(np.mean(self.process_levels_ms(quantile)))

    def spread_at(self, quantile: float) -> float:
        """Between-process spread of the ``quantile``: the standard deviation of their logs, in %."""
        logs = np.log(self.process_levels_ms(quantile))
        return 100.0 * float(np.std(logs, ddof=1)) if len(logs) > 1 else 0.0

    @property
    def center_ms(self) -> float:
        """The report's statistic: the mean of its processes' medians."""
        return float(np.mean(self.process_medians_ms()))

    @property
    def spread_pct(self) -> float:
        """Between-process spread: the standard deviation of the log process medians, in %
        (0 with one process)."""
        logs = np.log(self.process_medians_ms())
        return 100.0 * float(np.std(logs, ddof=1)) if len(logs) > 1 else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": SAMPLES_FORMAT,
            "format_version": SAMPLES_FORMAT_VERSION,
            "unit": "ms",
            "workload": self.workload,
            "warmup": self.warmup,
            "repeat": self.repeat,
            "environment": dict(self.environment),
            "cold_ms": list(self.cold_ms),
            "cpu_wait_pct": [None if w is None or math.isnan(w) else w for w in self.cpu_wait_pct],
            "processes": [{"samples_ms": list(g), "median_ms": float(np.median(g))} for g in self.processes],
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "SampleSet":
        if not isinstance(d, Mapping):
            raise InvalidArgumentError(f"samples must be a JSON object; got {type(d).__name__}")
        if d.get("format") != SAMPLES_FORMAT or d.get("format_version") != SAMPLES_FORMAT_VERSION:
            raise InvalidArgumentError(
                f"samples have format {d.get('format')!r} version "
                f"{d.get('format_version')!r}; this workbench reads "
                f"{SAMPLES_FORMAT!r} version {SAMPLES_FORMAT_VERSION}"
            )
        procs = d["processes"]
        if not isinstance(procs, list):
            raise InvalidArgumentError("samples.processes must be a list")
        groups = [p["samples_ms"] if isinstance(p, Mapping) else p for p in procs]
        return cls(
            processes=tuple(groups),
            environment=d.get("environment") or {},
            workload=str(d.get("workload", "")),
            warmup=int(d.get("warmup", 0)),
            repeat=int(d.get("repeat", 0)),
            cold_ms=tuple(d.get("cold_ms") or ()),
            cpu_wait_pct=tuple(d.get("cpu_wait_pct") or ()),
        )


def environment_differences(
    old: Mapping[str, Any], new: Mapping[str, Any], keys: Sequence[str] = GATE_ENVIRONMENT_KEYS
) -> tuple[str, ...]:
    """``"key: old vs new"`` for every compared key whose value differs (absent on both: same)."""
    out = []
    for key in keys:
        a, b = old.get(key), new.get(key)
        if a != b:
            out.append(
                f"{key}: {'(not recorded)' if a is None else repr(a)} vs {'(not recorded)' if b is None else repr(b)}"
            )
    return tuple(out)


def workload_difference(old: str, new: str) -> tuple[str, ...]:
    """``("workload: 'a:f' vs 'b:g'",)`` when both reports name their workload and the names differ (a
    module moved since, as ``workbench.demo`` did, is read as where it is now: the same workload)."""
    return (f"workload: {old!r} vs {new!r}",) if old and new and current_spec(old) != current_spec(new) else ()


# -- statistics --------------------------------------------------------------------------------
def t_quantile(p: float, df: float) -> float:
    """Student's t quantile (numerically: bisection on the integrated density; no scipy)."""
    if not 0.5 <= p < 1 or not df > 0:
        raise InvalidArgumentError(f"t_quantile needs 0.5 <= p < 1 and df > 0; got {p}, {df}")
    if df > 1e5:
        return NormalDist().inv_cdf(p)
    log_c = math.lgamma((df + 1) / 2) - math.lgamma(df / 2) - 0.5 * math.log(df * math.pi)

    def cdf(x: float) -> float:
        t = np.linspace(0.0, x, 4001)
        pdf = np.exp(log_c - (df + 1) / 2 * np.log1p(t * t / df))
        h = x / 4000
        return 0.5 + h / 3 * (pdf[0] + pdf[-1] + 4 * pdf[1:-1:2].sum() + 2 * pdf[2:-1:2].sum())

    lo, hi = 0.0, 1.0
    while cdf(hi) < p:
        lo, hi = hi, hi * 2
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if cdf(mid) < p else (lo, mid)
    return (lo + hi) / 2


def _bootstrap_centers(
    groups: tuple[tuple[float, ...], ...], resamples: int, rng: np.random.Generator, quantile: float = 0.5
) -> np.ndarray:
    """Hierarchical bootstrap of the mean of process medians: ``resamples`` values."""
    k = len(groups)
    inner = np.empty((k, resamples))
    for i, g in enumerate(groups):  # each process's median, resampled within the process
        arr = np.asarray(g)
        inner[i] = np.quantile(arr[rng.integers(0, len(arr), size=(resamples, len(arr)))], quantile, axis=1)
    which = rng.integers(0, k, size=(resamples, k))  # processes, with replacement
    column = rng.integers(0, resamples, size=(resamples, k))  # an independent inner resample each
    return inner[which, column].mean(axis=1)


def widening_factor(old_log_medians: np.ndarray, new_log_medians: np.ndarray, confidence: float) -> float:
    """How much wider than the bootstrap's the interval must be for few processes: Student's t
    (Welch's degrees of freedom over the log process medians) over the normal quantile, times
    sqrt(k / (k - 1)) for the variance a bootstrap over k values misses."""
    ko, kn = len(old_log_medians), len(new_log_medians)
    a = float(np.var(old_log_medians, ddof=1)) / ko
    c = float(np.var(new_log_medians, ddof=1)) / kn
    if a + c > 0:
        df = (a + c) ** 2 / (a * a / (ko - 1) + c * c / (kn - 1))
    else:
        df = ko + kn - 2.0
    df = min(max(df, 1.0), ko + kn - 2.0)
    q = (1 + confidence) / 2
    k = min(ko, kn)
    return t_quantile(q, df) / NormalDist().inv_cdf(q) * math.sqrt(k / (k - 1))


# -- the verdict -------------------------------------------------------------------------------
@dataclass(frozen=True)
class GateVerdict:
    """The gate's answer: status, the ratio new/old with its interval, and what it could detect.

    ``status``: "regression" (exit 1), "inconclusive" / "ok" (exit 0), "refused" (exit 2).
    ``detectable_pct``: the smallest slowdown distinguishable from no change with this noise;
    ``flagged_above_pct``: the smallest slowdown this pair would call a REGRESSION at the threshold.
    """

    status: str
    threshold_pct: float
    reason: str
    ratio: float = math.nan
    ratio_low: float = math.nan
    ratio_high: float = math.nan
    confidence: float = CONFIDENCE
    detectable_pct: float = math.nan
    flagged_above_pct: float = math.nan
    old_ms: float = math.nan
    new_ms: float = math.nan
    old_processes: int = 0
    new_processes: int = 0
    old_spread_pct: float = math.nan
    new_spread_pct: float = math.nan
    old_cpu_wait_pct: float = math.nan
    new_cpu_wait_pct: float = math.nan
    environment_differences: tuple[str, ...] = ()
    old_report: str = ""
    quantile: float = GATE_QUANTILE
    busy_note: str = ""

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.status]

    @property
    def regressed(self) -> bool:
        return self.status == REGRESSION

    @property
    def change_pct(self) -> float:
        return 100.0 * (self.ratio - 1.0)

    def message(self) -> str:
        """Plain text for the command line: the verdict first, then the numbers behind it."""
        where = f" against {self.old_report}" if self.old_report else ""
        if self.status == REFUSED:
            return f"REFUSED{where}: {self.reason}"
        pct = lambda r: f"{100 * (r - 1):+.1f} %"
        gated = math.isfinite(self.threshold_pct)
        head = {REGRESSION: "REGRESSION", INCONCLUSIVE: "INCONCLUSIVE", OK: "ok"}[self.status]
        lines = [
            f"{head}{where}: {pct(self.ratio)} (new/old {self.ratio:.3f}, "
            f"{100 * self.confidence:g} % interval {pct(self.ratio_low)} to {pct(self.ratio_high)}); "
            f"{self.reason}",
            f"  {_quantile_name(self.quantile)} of each process's calls, mean over processes: "
            f"old {self.old_ms:.4g} ms ({self.old_processes} processes, spread {self.old_spread_pct:.1f} %), "
            f"new {self.new_ms:.4g} ms ({self.new_processes} processes, spread {self.new_spread_pct:.1f} %)",
            f"  smallest change this pair of reports could detect: +{self.detectable_pct:.1f} %"
            + (
                f"; with the +{self.threshold_pct:g} % threshold a slowdown is flagged only above "
                f"+{self.flagged_above_pct:.1f} %"
                if gated
                else ""
            ),
        ]
        if self.busy_note:
            lines.append(f"  note: {self.busy_note}")
        if self.environment_differences:
            lines.append(
                "  note: the environments differ (compared anyway, --allow-environment-change): "
                + "; ".join(self.environment_differences)
            )
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "threshold_pct": self.threshold_pct,
            "reason": self.reason,
            "ratio": self.ratio,
            "ratio_low": self.ratio_low,
            "ratio_high": self.ratio_high,
            "confidence": self.confidence,
            "detectable_pct": self.detectable_pct,
            "flagged_above_pct": self.flagged_above_pct,
            "old_ms": self.old_ms,
            "new_ms": self.new_ms,
            "old_processes": self.old_processes,
            "new_processes": self.new_processes,
            "old_spread_pct": self.old_spread_pct,
            "new_spread_pct": self.new_spread_pct,
            "old_cpu_wait_pct": self.old_cpu_wait_pct,
            "new_cpu_wait_pct": self.new_cpu_wait_pct,
            "environment_differences": list(self.environment_differences),
            "old_report": self.old_report,
            "quantile": self.quantile,
            "busy_note": self.busy_note,
            "change_pct": self.change_pct,
            "exit_code": self.exit_code,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "GateVerdict":
        names = set(cls.__dataclass_fields__) - {"environment_differences"}
        kw = {k: d[k] for k in names if k in d}
        return cls(**kw, environment_differences=tuple(d.get("environment_differences", ())))


def _quantile_name(q: float) -> str:
    if q in (0, 0.5):
        return "minimum" if q == 0 else "median"
    pct = f"{100 * q:g}"
    suffix = (
        "th"
        if pct.endswith(("11", "12", "13")) or not pct.isdigit()
        else {"1": "st", "2": "nd", "3": "rd"}.get(pct[-1], "th")
    )
    return f"{pct}{suffix} percentile"


def check_threshold(threshold_pct: Any) -> float:
    """A regression threshold in percent: a number >= 0 (inf: compare without gating)."""
    if (
        isinstance(threshold_pct, bool)
        or not isinstance(threshold_pct, (int, float))
        or math.isnan(threshold_pct)
        or threshold_pct < 0
    ):
        raise InvalidArgumentError(
            f"--fail-on-regression takes a percentage >= 0 (5 means fail when "
            f"more than 5 % slower); got {threshold_pct!r}"
        )
    return float(threshold_pct)


def gate(
    old: SampleSet,
    new: SampleSet,
    threshold_pct: float = math.inf,
    *,
    confidence: float = CONFIDENCE,
    resamples: int = RESAMPLES,
    seed: int = SEED,
    allow_environment_change: bool = False,
    old_report: str = "",
    quantile: float = GATE_QUANTILE,
) -> GateVerdict:
    """Judge ``new`` against ``old`` (see the module docstring). Pure and seeded."""
    threshold = check_threshold(threshold_pct)
    if not 0 < confidence < 1:
        raise InvalidArgumentError(f"confidence must be between 0 and 1; got {confidence!r}")
    if isinstance(resamples, bool) or not isinstance(resamples, int) or resamples < 100:
        raise InvalidArgumentError(f"resamples must be an integer >= 100; got {resamples!r}")
    if isinstance(quantile, bool) or not isinstance(quantile, (int, float)) or not 0 <= quantile < 1:
        raise InvalidArgumentError(
            f"quantile must be a number in [0, 1) (0.1: each process's 10th "
            f"percentile; 0.5: its median); got {quantile!r}"
        )
    base: dict[str, Any] = {
        "quantile": float(quantile),
        "threshold_pct": threshold,
        "confidence": confidence,
        "old_report": old_report,
        "old_processes": old.n_processes,
        "new_processes": new.n_processes,
        "old_cpu_wait_pct": old.max_cpu_wait_pct,
        "new_cpu_wait_pct": new.max_cpu_wait_pct,
    }
    diffs = environment_differences(old.environment, new.environment) + workload_difference(old.workload, new.workload)
    if diffs and not allow_environment_change:
        return GateVerdict(
            status=REFUSED,
            environment_differences=diffs,
            **base,
            reason=(
                "the two reports come from different environments or workloads (" + "; ".join(diffs) + "), so a "
                "difference in time says nothing about the code. Compare reports made on the same machine "
                "with the same settings, or pass --allow-environment-change to compare anyway"
            ),
        )
    few = [
        f"{label} has {s.n_processes}"
        for label, s in (("the old report", old), ("the new report", new))
        if s.n_processes < MIN_PROCESSES
    ]
    if few:
        return GateVerdict(
            status=REFUSED,
            environment_differences=diffs,
            **base,
            reason=(
                f"the gate needs samples from at least {MIN_PROCESSES} processes per report to see the "
                f"spread between processes, and {' and '.join(few)}; make both with --processes 3 or more"
            ),
        )

    rng = np.random.default_rng(seed)
    old_c = _bootstrap_centers(old.processes, resamples, rng, quantile)
    new_c = _bootstrap_centers(new.processes, resamples, rng, quantile)
    boot = np.log(new_c) - np.log(old_c)
    old_ms, new_ms = old.center_at(quantile), new.center_at(quantile)
    point = math.log(new_ms) - math.log(old_ms)
    alpha = 1 - confidence
    q_lo, q_hi = np.quantile(boot, [alpha / 2, 1 - alpha / 2])
    factor = widening_factor(
        np.log(old.process_levels_ms(quantile)), np.log(new.process_levels_ms(quantile)), confidence
    )
    below, above = max(point - float(q_lo), 0.0) * factor, max(float(q_hi) - point, 0.0) * factor
    low, high = math.exp(point - below), math.exp(point + above)
    limit = 1 + threshold / 100
    if low > limit:
        status, reason = REGRESSION, f"the whole interval lies beyond the +{threshold:g} % threshold"
    elif high <= limit:
        status = OK
        reason = (
            f"the whole interval lies within the +{threshold:g} % threshold"
            if math.isfinite(threshold)
            else "no --fail-on-regression threshold was given, so this is a comparison, not a gate"
        )
    else:
        status, reason = (
            INCONCLUSIVE,
            (
                f"the interval straddles the +{threshold:g} % threshold: the noise is too large to tell "
                "whether this is a regression (not a failure: exit 0). More processes (--processes) or "
                "repeats (--repeat) on both reports narrow the interval"
            ),
        )
    busy = [
        f"{label} report's processes waited for a CPU up to {s.max_cpu_wait_pct:.0f} % of their time"
        for label, s in (("the old", old), ("the new", new))
        if s.max_cpu_wait_pct > LOADED_WAIT_PCT
    ]
    busy_note = (
        (
            f"the machine was busy while timing ({' and '.join(busy)}; over {LOADED_WAIT_PCT:g} % means "
            "other work took their CPU): "
            + (
                f"the {_quantile_name(quantile)} resists that better than a median would"
                if quantile < 0.5
                else f"the {_quantile_name(quantile)} moves with such load"
            )
            + ". An idle machine, with no more threads than cores, gives a narrower interval"
        )
        if busy
        else ""
    )
    return GateVerdict(
        status=status,
        reason=reason,
        busy_note=busy_note,
        ratio=math.exp(point),
        ratio_low=low,
        ratio_high=high,
        detectable_pct=100 * (math.exp(below) - 1),
        flagged_above_pct=100 * (limit * math.exp(below) - 1),
        old_ms=old_ms,
        new_ms=new_ms,
        old_spread_pct=old.spread_at(quantile),
        new_spread_pct=new.spread_at(quantile),
        environment_differences=diffs,
        **base,
    )
