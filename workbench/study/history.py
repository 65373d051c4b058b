"""Per-cell history: every profile of a cell appended to a JSON lines file beside the notebook,
keyed by the cell's source hash and the environment fingerprint, and the change points in it.

    key = history_key(cell_source, run.environment, notebook="analysis.ipynb")
    append_run("workbench-history.jsonl", run, key)
    h = load_history("workbench-history.jsonl", key)
    h.entries, h.change_points          # [HistoryEntry(time, median_ms, spread_ms, ...)], [4]

Change points (``change_points``): binary segmentation with a step fit and a noise model. Each
entry is a run's median on the log scale; within a segment the medians scatter around one level
with Gaussian noise whose scale is the larger of the scatter the data show and the runs' own
uncertainty (the standard error of each run's median, from the IQR and the count of its samples):
a shift smaller than the runs' own noise is not called a change, however steady the medians.
Each run's noise also holds the machine's run-to-run noise (``RUN_NOISE``, 1 %: cache state,
clock frequency, placement move a run's median by about that much between runs even when each
run's own samples sit still), so a half-percent wobble between two very steady runs is not a
change. The best split is the one with the largest likelihood-ratio statistic of a step model
against one level (one step, or a stretch that differs from both sides, as circular binary
segmentation tests, so that up-then-down is found too); its significance is the
share of seeded simulations of the null (one level, the same noise) whose best split is as large
(a parametric bootstrap, ``simulations`` draws, ``seed``). A significant split is kept and every
segment it leaves is searched again. Each side of a change holds at least ``min_size`` entries, so one
outlier is not a change: a shift is confirmed by its second run.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Sequence, Union

import numpy as np

import workbench.study.records as records
from workbench.errors import StudyError
from workbench.study.files import check_format, dumps
from workbench.study.identity import stable_environment
from workbench.study.records import expect_all

if TYPE_CHECKING:
    from workbench.capture.run import RunRecord

# What the change-point search reads per run: an entry, its median (ms), or an entry's dict.
EntryLike = Union["HistoryEntry", float, dict[str, Any]]

HISTORY_FORMAT = "workbench-history"
HISTORY_VERSION = 1
ALPHA = 0.01  # significance of one split (binary segmentation searches a side only after a find)
SIMULATIONS = 1000  # draws of the null distribution
MIN_SIZE = 2  # entries on each side of a change
PAIR_LIMIT = 150  # series up to this length also try the two-split (up-then-down) model
CHUNK = 250  # null draws simulated at once
IQR_TO_SD = 1.349  # a normal distribution's IQR in standard deviations
MEDIAN_SE = math.sqrt(math.pi / 2)  # a median's standard error over the mean's, for normal samples
RUN_NOISE = 0.01  # run-to-run noise of one machine (relative), beyond a run's own sampling error


@dataclass(frozen=True)
class HistoryEntry:
    """One profile of a cell: when, its clean median and the spread of its samples."""

    key: str
    time: str  # ISO time of the run
    median_ms: float
    spread_ms: float  # interquartile range of the run's clean samples
    p95_ms: float | None = None
    n: int = 0
    name: str = ""
    notebook: str = ""  # the notebook (or script) that wrote it, "" when not given
    source_hash: str = ""
    environment_key: str = ""
    label: str = ""  # the cell's (or callable's) first line, for people: what the key stands for

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "HistoryEntry":
        kw = {k: d[k] for k in cls.__dataclass_fields__ if k in d}
        kw["median_ms"] = float(kw["median_ms"])
        kw["spread_ms"] = float(kw.get("spread_ms") or 0.0)
        return cls(**kw)

    @classmethod
    def parse(cls, d: dict[str, Any]) -> "HistoryEntry":
        """A stored entry, type-checked: a median that is a finite number > 0, a spread >= 0, ...
        (ValueError naming the first wrong field)."""
        expect_all(d, ENTRY_FIELDS, where="entry")
        return cls.from_dict(d)


@dataclass(frozen=True)
class History:
    """A cell's runs in order and the indices where a significant shift begins."""

    key: str
    entries: tuple[HistoryEntry, ...]
    change_points: tuple[int, ...]
    path: str = ""
    notes: tuple[str, ...] = field(default=(), compare=False)

    def to_dict(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "entries": [e.to_dict() for e in self.entries],
            "change_points": list(self.change_points),
            "path": self.path,
            "notes": list(self.notes),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "History":
        return cls(
            d["key"],
            tuple(HistoryEntry.from_dict(e) for e in d.get("entries", ())),
            tuple(int(i) for i in d.get("change_points", ())),
            d.get("path", ""),
            tuple(d.get("notes", ())),
        )

    def to_text(self) -> str:
        lines = [f"history {self.key}: {len(self.entries)} runs, change points at {list(self.change_points) or 'none'}"]
        for i, e in enumerate(self.entries):
            mark = "  <- change" if i in self.change_points else ""
            lines.append(f"  {i:3d}  {e.time}  median {e.median_ms:.4g} ms  IQR {e.spread_ms:.3g} ms{mark}")
        return "\n".join(lines)


def history_key(source: str, environment: dict[str, Any], *, notebook: str = "") -> str:
    """The key of a cell's history: its source hash, the stable environment fingerprint and, when
    given, the notebook, so that two notebooks sharing one history file keep apart."""
    src = hashlib.sha256(source.encode()).hexdigest()[:16]
    env = hashlib.sha256(json.dumps(stable_environment(environment), sort_keys=True, default=str).encode()).hexdigest()[
        :16
    ]
    nb = hashlib.sha256(notebook.encode()).hexdigest()[:8] if notebook else ""
    return f"{src}-{env}" + (f"-{nb}" if nb else "")


ENTRY_FIELDS = {
    "key": "str",
    "time": "str?",
    "median_ms": "positive",
    "spread_ms": "nonneg?",
    "p95_ms": "nonneg?",
    "n": "count?",
    "name": "str?",
    "notebook": "str?",
    "source_hash": "str?",
    "environment_key": "str?",
    "label": "str?",
}
WHAT = "history file"


def _parse_line(rec: dict[str, Any]) -> HistoryEntry | dict[str, Any]:
    """A history line: one entry, type-checked, or any other object (the header, if first)."""
    if "entry" not in rec:
        return rec
    if not isinstance(rec["entry"], dict):
        raise ValueError(f"its entry is a {type(rec['entry']).__name__}, not an object")
    return HistoryEntry.parse(rec["entry"])


def _check_header(lines: list[records.Line], path: Path) -> None:
    if not lines:
        return
    header = lines[0].value
    if not isinstance(header, dict) or "format" not in header:
        raise StudyError(
            f"{str(path)!r} does not start with a workbench history header; it is not a history "
            f"file (or its first line is damaged): point at another file; nothing was changed"
        )
    check_format(header, kind=HISTORY_FORMAT, version=HISTORY_VERSION, path=path)


def _read(path: Any, *, warn: bool = True) -> tuple[Path, list[HistoryEntry]]:
    """The file's entries in order (header checked; each unreadable line skipped with a warning
    naming the file and line). A missing file has none; a folder, FIFO, device or a file past the
    size cap is refused before it is opened."""
    p = records.as_path(path, WHAT)
    lines, skipped = records.read_jsonl(p, WHAT, _parse_line, warn=False)
    _check_header(lines, p)
    entries = [ln.value for ln in lines[1:] if isinstance(ln.value, HistoryEntry)]
    odd = [
        records.Skipped(str(p), ln.number, f"neither the header nor an entry (keys {sorted(ln.record)[:6]})")
        for ln in lines[1:]
        if not isinstance(ln.value, HistoryEntry)
    ]
    if warn:
        records.warn_skipped(sorted([*skipped, *odd], key=lambda s: s.number), WHAT, stacklevel=4)
    return p, entries


def first_line(source: str, limit: int = 80) -> str:
    """The first line of code in ``source`` (magic and blank lines skipped), shortened to ``limit``."""
    lines = [ln.strip() for ln in str(source).splitlines() if ln.strip()]
    code = [ln for ln in lines if not ln.startswith(("%", "!"))] or lines
    text = code[0] if code else ""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def append_run(
    history_path: str | Path, run: RunRecord, key: str, *, notebook: str = "", label: str = ""
) -> HistoryEntry:
    """Append one profiled run (a ProfileRun: ``timing``, ``created_at``) to the history under ``key``.

    A key already written by another notebook in this file is refused (StudyError): build the key
    with ``history_key(..., notebook=...)`` so that the two notebooks' histories keep apart. The
    file is read, checked and appended to under its lock (``records.locked``), so two processes
    appending at once both keep their entry. A run whose median is not a finite number > 0 is
    refused (it could never be read back)."""
    if not key or not isinstance(key, str):
        raise StudyError(
            f"a history entry needs a non-empty string key (history_key(source, environment)); got {key!r}"
        )
    path = records.as_path(history_path, WHAT)
    timing = run.timing
    env = run.environment or {}
    entry = HistoryEntry(
        key=key,
        time=str(run.created_at),
        median_ms=float(timing.median_ms),
        spread_ms=float(timing.iqr_ms),
        p95_ms=float(timing.p95_ms),
        n=int(timing.n),
        name=str(run.name),
        notebook=notebook,
        source_hash=key.split("-")[0],
        environment_key=hashlib.sha256(
            json.dumps(stable_environment(env), sort_keys=True, default=str).encode()
        ).hexdigest()[:16],
        label=str(label),
    )
    try:
        HistoryEntry.parse(entry.to_dict())
    except ValueError as exc:
        raise StudyError(f"this run cannot be added to its history: {exc}; nothing was written") from None
    with records.locked(path, WHAT) as log:
        lines = log.lines(_parse_line)
        _check_header(lines, path)
        if notebook:
            others = {
                e.notebook
                for e in (ln.value for ln in lines[1:])
                if isinstance(e, HistoryEntry) and e.key == key and e.notebook and e.notebook != notebook
            }
            if others:
                raise StudyError(
                    f"history key {key} in {str(path)!r} is already used by {sorted(others)}, not by "
                    f"{notebook!r}: two notebooks share this file with the same key; build the key with "
                    f"history_key(source, environment, notebook=...) so each keeps its own history "
                    f"(nothing was written)"
                )
        if not lines and os.fstat(log.fd).st_size == 0:
            log.append({"format": HISTORY_FORMAT, "version": HISTORY_VERSION}, dumps)
        elif not lines:
            raise StudyError(
                f"{str(path)!r} has no readable line, so no workbench history header: it is not a "
                f"history file (or it is damaged): point at another file; nothing was written"
            )
        log.append({"entry": entry.to_dict()}, dumps)
    return entry


def _entries(path: Path, key: str) -> list[HistoryEntry]:
    return [e for e in _read(path)[1] if e.key == key]


def load_history(path: str | Path, key: str, **change_point_options: Any) -> History:
    """The entries under ``key`` in the file (others' keys are left out) and their change points.
    A missing file is an empty history; a file from a newer format is refused."""
    p, found = _read(path)
    entries = tuple(e for e in found if e.key == key)
    return History(key, entries, tuple(change_points(entries, **change_point_options)), str(p))


NOTEBOOK_FILE = "workbench-history.jsonl"  # the one default file name: beside the notebook, or here
LEGACY_FOLDER = ".workbench"  # where a script's history went before (read, never written)
LEGACY_FILE = "history.jsonl"
DEFAULT_FOLDER, DEFAULT_FILE = LEGACY_FOLDER, LEGACY_FILE  # the old names, kept for imports


HISTORY_ENV = "WORKBENCH_HISTORY"  # a history file to use instead of the default one


def default_history_path(notebook: str | Path | None = None) -> Path:
    """Where a run's history goes by default, and where ``workbench history`` looks without a path:
    ``workbench-history.jsonl`` beside the notebook (what ``%%gpuprofile`` writes), or in the
    current folder when no notebook is known (a plain script or shell, ``wb.profile``; Jupyter's
    current folder is the notebook's, so both land in the same file); the environment variable
    ``WORKBENCH_HISTORY`` names another file (for CI, or a test suite)."""
    import os

    chosen = os.environ.get(HISTORY_ENV, "").strip()
    if chosen and chosen.lower() not in HISTORY_OFF:
        return Path(chosen).expanduser()
    if notebook:
        return Path(notebook).expanduser().resolve().parent / NOTEBOOK_FILE
    return Path.cwd() / NOTEBOOK_FILE


def record_run(
    run: RunRecord,
    *,
    source: str,
    notebook: str | None = None,
    path: str | Path | None = None,
    **change_point_options: Any,
) -> History:
    """Append one profiled run (a ProfileRun) to its history and return the history with its
    change points: keyed by ``source`` (the cell's, or the callable's, source), the run's stable
    environment fingerprint and the notebook's name, so that two notebooks sharing one file keep
    apart. ``path``: the history file (default: ``default_history_path(notebook)``)."""
    if not isinstance(source, str):
        raise StudyError(f"record_run needs the profiled code's source as a string; got {type(source).__name__}")
    target = records.as_path(path, WHAT) if path is not None else default_history_path(notebook)
    nb = Path(notebook).name if notebook else ""
    key = history_key(source, dict(run.environment or {}), notebook=nb)
    append_run(target, run, key, notebook=nb, label=first_line(source))
    return load_history(target, key, **change_point_options)


HISTORY_OFF = ("0", "off", "false", "no")


def history_enabled() -> bool:
    """False when ``WORKBENCH_HISTORY`` is set to off (0, off, false, no): no run is recorded."""
    import os

    return os.environ.get(HISTORY_ENV, "").strip().lower() not in HISTORY_OFF


def callable_source(fn: Any) -> str:
    """The source a callable's history is keyed by: its code where Python can read it, else its
    module and qualified name (a builtin, a C extension, a lambda typed at a prompt)."""
    import inspect

    target = inspect.unwrap(fn) if callable(fn) else fn
    try:
        return inspect.getsource(target)
    except (OSError, TypeError):
        mod = getattr(target, "__module__", "") or type(target).__module__
        name = getattr(target, "__qualname__", "") or type(target).__qualname__
        return f"{mod}.{name}"


def record_profile(
    run: RunRecord, source: str, *, notebook: str | None = None, where: str = "wb.profile"
) -> History | None:
    """``record_run`` for the profilers (``wb.profile``, ``%%gpuprofile``): the history, or None
    with a warning when it cannot be written (a profile never fails for its history) or when
    ``WORKBENCH_HISTORY=off``."""
    import warnings

    from workbench.errors import WorkbenchError

    if not history_enabled():
        return None
    try:
        target = default_history_path(notebook)
        nb = Path(notebook).name if notebook else ""
        key = history_key(source, dict(run.environment or {}), notebook=nb)
        append_run(target, run, key, notebook=nb, label=first_line(source))
    except (WorkbenchError, OSError, ValueError, TypeError, AttributeError) as exc:
        warnings.warn(
            f"{where}: the run was not added to its history ({type(exc).__name__}: {exc}); the profile "
            f"itself is fine (history=False / --no-history turns the history off)",
            stacklevel=3,
        )
        return None
    try:  # added: what follows can only fail to read it back, and says so
        return load_history(target, key)
    except (WorkbenchError, OSError, ValueError, TypeError, AttributeError) as exc:
        warnings.warn(
            f"{where}: the run was added to its history {str(target)!r}, but the history could not be "
            f"read back ({type(exc).__name__}: {exc}); run.history is None",
            stacklevel=3,
        )
        return None


def history_keys(path: str | Path) -> list[tuple[str, int, str]]:
    """The keys in a history file, in first-seen order: (key, entries, what the key stands for: the
    cell's first line as last written, else the run's name)."""
    seen: dict[str, list[Any]] = {}
    for e in _read(path)[1]:
        slot = seen.setdefault(e.key, [0, ""])
        slot[0] += 1
        slot[1] = e.label or e.name or e.notebook or slot[1]
    return [(k, int(v[0]), str(v[1])) for k, v in seen.items()]


# -- change points -----------------------------------------------------------------------------
def _levels(entries: Sequence[EntryLike], run_noise: float = RUN_NOISE) -> tuple[np.ndarray, np.ndarray]:
    """(log medians, each run's noise on the log scale: its median's standard error and the
    machine's run-to-run noise ``run_noise``, added in quadrature)."""
    med, noise = [], []
    for e in entries:
        if isinstance(e, (int, float)):
            m, s, n = float(e), 0.0, 0
        elif isinstance(e, dict):
            m, s, n = float(e["median_ms"]), float(e.get("spread_ms") or 0.0), int(e.get("n") or 0)
        else:
            m, s, n = float(e.median_ms), float(e.spread_ms or 0.0), int(e.n or 0)
        if not (m > 0 and math.isfinite(m)):
            raise StudyError(f"a history entry needs a positive finite median; got {m!r}")
        med.append(math.log(m))
        # the standard error of a median of n samples: sqrt(pi/2) sd / sqrt(n), sd from the IQR
        own = MEDIAN_SE * s / IQR_TO_SD / m / math.sqrt(n) if s > 0 and n > 0 and math.isfinite(s) else 0.0
        noise.append(math.sqrt(own**2 + run_noise**2))
    return np.asarray(med), np.asarray(noise)


def _segment_ss(csum: np.ndarray, csq: np.ndarray, a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sum and sum of squared deviations of y[a:b] per draw (``csum``/``csq`` with a leading 0)."""
    s = csum[:, b] - csum[:, a]
    q = csq[:, b] - csq[:, a]
    return s, q - s**2 / (b - a)


def _best_split(y: np.ndarray, floor: float, min_size: int) -> tuple[np.ndarray, list[tuple[int, ...]]]:
    """For each row of ``y`` (shape [draws, n]): the largest likelihood-ratio statistic of a step
    model against one level, and its split(s). Two models: one step (split k), and a segment that
    differs from both sides (splits i < j: up, then down again, which one step cannot fit; as in
    circular binary segmentation); the latter for series up to ``PAIR_LIMIT`` entries. The noise
    variance is the pooled within-segment one, at least ``floor**2``."""
    draws, n = y.shape
    csum = np.concatenate([np.zeros((draws, 1)), np.cumsum(y, axis=1)], axis=1)
    csq = np.concatenate([np.zeros((draws, 1)), np.cumsum(y * y, axis=1)], axis=1)
    _, ss0 = _segment_ss(csum, csq, np.array(0), np.array(n))
    floor2 = floor**2
    ks = np.arange(min_size, n - min_size + 1)
    _, ssl = _segment_ss(csum, csq, np.zeros_like(ks), ks)
    _, ssr = _segment_ss(csum, csq, ks, np.full_like(ks, n))
    ss1 = ssl + ssr
    stat1 = (ss0[:, None] - ss1) / np.maximum(ss1 / max(n - 2, 1), floor2)
    best1 = np.argmax(stat1, axis=1)
    stat = stat1[np.arange(draws), best1]
    where: list[tuple[int, ...]] = [(int(ks[b]),) for b in best1]
    if n <= PAIR_LIMIT and n >= 3 * min_size:
        ii, jj = np.meshgrid(np.arange(min_size, n + 1), np.arange(min_size, n + 1), indexing="ij")
        ok = (jj - ii >= min_size) & (n - jj >= min_size)
        ii, jj = ii[ok], jj[ok]
        _, s_a = _segment_ss(csum, csq, np.zeros_like(ii), ii)
        _, s_b = _segment_ss(csum, csq, ii, jj)
        _, s_c = _segment_ss(csum, csq, jj, np.full_like(jj, n))
        ss2 = s_a + s_b + s_c
        # two more parameters than one level: per parameter, comparable with the one-step statistic
        stat2 = (ss0[:, None] - ss2) / 2 / np.maximum(ss2 / max(n - 3, 1), floor2)
        best2 = np.argmax(stat2, axis=1)
        top2 = stat2[np.arange(draws), best2]
        for d in np.nonzero(top2 > stat)[0]:
            where[d] = (int(ii[best2[d]]), int(jj[best2[d]]))
        stat = np.maximum(stat, top2)
    return stat, where


def _search(
    y: np.ndarray,
    noise: np.ndarray,
    offset: int,
    *,
    alpha: float,
    simulations: int,
    min_size: int,
    rng: np.random.Generator,
    found: list[int],
) -> None:
    n = len(y)
    if n < 2 * min_size:
        return
    floor = float(np.median(noise)) if len(noise) else 0.0
    stat, where = _best_split(y[None, :], floor, min_size)
    observed, splits = float(stat[0]), where[0]
    # the null: one level, Gaussian noise at the scale the data (or the runs' own noise) show
    scale = max(float(np.std(y, ddof=1)) if n > 1 else 0.0, floor, 1e-12)
    exceed = 0
    for start in range(0, simulations, CHUNK):
        draws = min(CHUNK, simulations - start)
        null_stat, _ = _best_split(rng.normal(0.0, scale, size=(draws, n)), floor, min_size)
        exceed += int(np.sum(null_stat >= observed))
    p = (1 + exceed) / (1 + simulations)
    if p >= alpha:
        return
    # one split per step (binary segmentation): of the best model's splits, the one a single step
    # fits best; the segments either side are searched again (up-then-down is found in two steps)
    k = splits[0] if len(splits) == 1 else max(splits, key=lambda s: _one_step(y, s, floor))
    found.append(offset + k)
    _search(y[:k], noise[:k], offset, alpha=alpha, simulations=simulations, min_size=min_size, rng=rng, found=found)
    _search(y[k:], noise[k:], offset + k, alpha=alpha, simulations=simulations, min_size=min_size, rng=rng, found=found)


def _one_step(y: np.ndarray, k: int, floor: float) -> float:
    left, right = y[:k], y[k:]
    ss1 = float(np.sum((left - left.mean()) ** 2) + np.sum((right - right.mean()) ** 2))
    ss0 = float(np.sum((y - y.mean()) ** 2))
    return (ss0 - ss1) / max(ss1 / max(len(y) - 2, 1), floor**2, 1e-300)


def change_points(
    entries: Iterable[EntryLike],
    *,
    alpha: float = ALPHA,
    simulations: int = SIMULATIONS,
    min_size: int = MIN_SIZE,
    seed: int = 0,
    run_noise: float = RUN_NOISE,
) -> list[int]:
    """Indices where a significant shift in the runs' median begins (sorted; [] when none).

    ``entries``: HistoryEntry values, dicts with ``median_ms`` (and ``spread_ms``), or plain
    medians. Binary segmentation with a likelihood-ratio step test calibrated by a seeded
    parametric bootstrap (see the module docstring); deterministic for a given ``seed``."""
    entries = list(entries)
    if not 0 < alpha < 1:
        raise StudyError(f"alpha must be between 0 and 1; got {alpha!r}")
    if min_size < 1 or simulations < 99:
        raise StudyError("change_points needs min_size >= 1 and simulations >= 99")
    if len(entries) < 2 * min_size:
        return []
    if not (0 <= run_noise < 1 and math.isfinite(run_noise)):
        raise StudyError(f"run_noise is a relative noise level between 0 and 1; got {run_noise!r}")
    y, noise = _levels(entries, run_noise)
    found: list[int] = []
    _search(
        y,
        noise,
        0,
        alpha=alpha,
        simulations=simulations,
        min_size=min_size,
        rng=np.random.default_rng(seed),
        found=found,
    )
    return sorted(found)
