"""Profile health: can the run's numbers be stood behind, and if not, what to do.

Every ``wb.profile`` run carries one (``run.health``). It judges the measurement, not the
workload: the profiler's overhead (traced median / clean median), first-session profiler
artifacts, too few samples, noisy samples, a loaded machine (load average against the usable
cores), CPU threads oversubscribed (this process's torch threads plus the other load on the
machine against the cores), the OpenMP wait policy, and the CPU clock governor where Linux shows
it. It qualifies the run's findings (a banner beside the timing, in the report and in
``summary.json``); it never ranks as a finding.

The machine's state is read once (``read_machine_state``) into a frozen value, so the verdicts
are pure functions of their inputs and are tested on made-up states. Its HTML, text and Markdown
are drawn by the render layer (``workbench.render.health``; a notebook shows ``run.health`` through
IPython's display formatter).
"""

from __future__ import annotations

import math
import os
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, Mapping

import workbench.capture.allocator as allocator
from workbench.measurement import FEW_SAMPLES, NOISY_RELATIVE_IQR, Measurement

# Thresholds, named so that the text and the docs can cite them.
MAX_PROFILER_OVERHEAD = 0.20  # traced median above clean median by more than this: inflated trace
MAX_LOAD_PER_CORE = 0.75  # 1-minute load average per usable core above this: a loaded machine
MIN_SAMPLES_FOR_INTERVAL = 6  # fewer: no distribution-free 95 % interval of the median exists
FIRST_TRACED_CALL_RATIO = 2.0  # first traced call this many times the others: start-up in the trace
MAX_THREADS_PER_CORE = 1.25  # runnable threads (torch's + other work's) per usable core above this
MAX_WAIT_SHARE = 0.10  # share of the timed/traced calls the thread waited for a CPU above this
SLOW_GOVERNORS = frozenset({"powersave", "conservative", "ondemand"})

OK, NOTE, WARN, UNKNOWN = "ok", "note", "warn", "unknown"
_LEVEL_ORDER = {WARN: 0, NOTE: 1, UNKNOWN: 2, OK: 3}

OMP_WAIT_NOTE = (
    "OpenMP worker threads spin (busy-wait) after each parallel region before they "
    "sleep; on a machine shared with other processes, or with few cores, the spinning "
    "threads take the CPU the next op or another process needs"
)


@dataclass(frozen=True)
class MachineState:
    """What the machine looked like while profiling; ``None`` where it could not be read."""

    load_avg_1m: float | None = None
    usable_cores: int | None = None
    torch_threads: int | None = None
    omp_wait_policy: str | None = None  # the environment variable, None when unset
    cpu_governor: str | None = None
    cpu_cur_mhz: float | None = None
    cpu_max_mhz: float | None = None
    allocator_mode: str | None = None  # steady / default (capture.allocator), None: not read
    allocator_label: str | None = None  # the sentence a reader is told about it

    def to_dict(self) -> dict[str, Any]:
        return {
            "load_avg_1m": self.load_avg_1m,
            "usable_cores": self.usable_cores,
            "torch_threads": self.torch_threads,
            "omp_wait_policy": self.omp_wait_policy,
            "cpu_governor": self.cpu_governor,
            "cpu_cur_mhz": self.cpu_cur_mhz,
            "cpu_max_mhz": self.cpu_max_mhz,
            "allocator_mode": self.allocator_mode,
            "allocator_label": self.allocator_label,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any] | None) -> "MachineState":
        d = dict(d or {})
        return cls(**{k: d.get(k) for k in cls.__dataclass_fields__})


@dataclass(frozen=True)
class HealthCheck:
    """One verdict: ``level`` is ok / note / warn / unknown; ``advice`` says what to do."""

    name: str
    level: str
    observed: str
    advice: str = ""
    value: float | None = None
    threshold: float | None = None

    def line(self) -> str:
        text = f"{self.level.upper()} {self.name}: {self.observed}"
        return f"{text}; what to do: {self.advice}" if self.advice and self.level in (WARN, NOTE) else text

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "level": self.level,
            "observed": self.observed,
            "advice": self.advice,
            "value": self.value,
            "threshold": self.threshold,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "HealthCheck":
        return cls(
            name=str(d["name"]),
            level=str(d.get("level", UNKNOWN)),
            observed=str(d.get("observed", "")),
            advice=str(d.get("advice", "")),
            value=_float_or_none(d.get("value")),
            threshold=_float_or_none(d.get("threshold")),
        )


@dataclass(frozen=True)
class ProfileHealth:
    """The checks of one run, worst first; ``verdict`` is "ok", "caution" or "not recorded"."""

    checks: tuple[HealthCheck, ...] = ()
    machine: MachineState = field(default_factory=MachineState)
    recorded: bool = True  # False: an older run bundle without a health record

    @property
    def problems(self) -> tuple[HealthCheck, ...]:
        return tuple(c for c in self.checks if c.level == WARN)

    @property
    def notes(self) -> tuple[HealthCheck, ...]:
        return tuple(c for c in self.checks if c.level == NOTE)

    @property
    def verdict(self) -> str:
        if not self.recorded:
            return "not recorded"
        return "caution" if self.problems else "ok"

    @property
    def ok(self) -> bool:
        return self.verdict == "ok"

    def check(self, name: str) -> HealthCheck | None:
        return next((c for c in self.checks if c.name == name), None)

    def headline(self) -> str:
        """One line for beside the timing."""
        if not self.recorded:
            return (
                "profile health: not recorded (an older run bundle); profile again to have the "
                "overhead, load and thread checks"
            )
        if self.problems:
            names = ", ".join(c.name.replace("_", " ") for c in self.problems)
            return f"profile health: CAUTION ({names}): read the numbers with the checks below"
        return "profile health: ok" + (f" ({len(self.notes)} note(s))" if self.notes else "")

    def lines(self) -> list[str]:
        return [self.headline()] + [c.line() for c in self.checks if c.level in (WARN, NOTE)]

    def to_text(self) -> str:
        return "\n".join(self.lines())

    def to_dict(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict,
            "recorded": self.recorded,
            "checks": [c.to_dict() for c in self.checks],
            "machine": self.machine.to_dict(),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any] | None) -> "ProfileHealth":
        if not d:
            return cls.not_recorded()
        return cls(
            checks=tuple(HealthCheck.from_dict(c) for c in d.get("checks", ())),
            machine=MachineState.from_dict(d.get("machine")),
            recorded=bool(d.get("recorded", True)),
        )

    @classmethod
    def not_recorded(cls) -> "ProfileHealth":
        return cls(checks=(), recorded=False)


def _float_or_none(value: Any) -> float | None:
    try:
        out = float(value)
    except (TypeError, ValueError):
        return None
    return out if math.isfinite(out) else None


# -- reading the machine -------------------------------------------------------------------
def _usable_cores() -> int | None:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count()


def _read_number(path: Path) -> float | None:
    try:
        return float(path.read_text().strip())
    except (OSError, ValueError):
        return None


def read_machine_state(
    torch: ModuleType | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    cpufreq: Path = Path("/sys/devices/system/cpu/cpu0/cpufreq"),
) -> MachineState:
    env = os.environ if environ is None else environ
    try:
        load = float(os.getloadavg()[0])
    except (AttributeError, OSError):
        load = None
    threads = None
    if torch is not None:
        try:
            threads = int(torch.get_num_threads())
        except Exception:  # a stub torch without threads
            threads = None
    try:
        governor = (cpufreq / "scaling_governor").read_text().strip() or None
    except OSError:
        governor = None
    cur = _read_number(cpufreq / "scaling_cur_freq")
    top = _read_number(cpufreq / "cpuinfo_max_freq") or _read_number(cpufreq / "scaling_max_freq")
    mode = allocator.current_mode(env)
    return MachineState(
        load_avg_1m=load,
        usable_cores=_usable_cores(),
        torch_threads=threads,
        omp_wait_policy=env.get("OMP_WAIT_POLICY"),
        cpu_governor=governor,
        cpu_cur_mhz=cur / 1e3 if cur else None,
        cpu_max_mhz=top / 1e3 if top else None,
        allocator_mode=mode.name if mode.applied else allocator.DEFAULT,
        allocator_label=mode.label,
    )


def read_run_delay_ns() -> int | None:
    """Nanoseconds this thread has waited on a run queue (ready, but no CPU free), from the
    kernel's schedstat; None where it is not readable (not Linux, schedstats off)."""
    import threading

    for path in ("/proc/thread-self/schedstat", f"/proc/self/task/{threading.get_native_id()}/schedstat"):
        try:
            with open(path) as fh:
                return int(fh.read().split()[1])
        except (OSError, ValueError, IndexError):
            continue
    return None


def wait_share(before_ns: int | None, after_ns: int | None, timed_ms: float) -> float | None:
    """The share of ``timed_ms`` the thread spent waiting for a CPU between two readings."""
    if before_ns is None or after_ns is None or timed_ms <= 0:
        return None
    return max(0.0, (after_ns - before_ns) / 1e6) / timed_ms


# -- the checks ----------------------------------------------------------------------------
def _overhead(timing: Measurement, traced: Measurement | None, legacy_under_profiler: bool) -> HealthCheck:
    if legacy_under_profiler:
        return HealthCheck(
            "profiler_overhead",
            WARN,
            "the timed samples were taken under torch.profiler (an older run): its per-op "
            "overhead is in the headline timing",
            "profile again: wb.profile now times without the profiler and traces apart",
        )
    if traced is None:
        return HealthCheck("profiler_overhead", OK, "no traced pass (trace off): nothing to inflate")
    if timing.median_ms <= 0:
        return HealthCheck("profiler_overhead", UNKNOWN, "the clean median is 0 ms: no ratio")
    ratio = traced.median_ms / timing.median_ms
    observed = (
        f"a traced call takes {ratio:.2f}x a clean one ({traced.median_ms:.4g} ms vs "
        f"{timing.median_ms:.4g} ms, median of {traced.n} traced and {timing.n} clean calls)"
    )
    if ratio - 1 > MAX_PROFILER_OVERHEAD:
        return HealthCheck(
            "profiler_overhead",
            WARN,
            observed,
            "the trace's own op and kernel times are inflated; its shares are scaled to the "
            "clean time per call, but many short ops are inflated more than long ones, so "
            "read small ops' shares as upper bounds (fewer, larger ops, or trace=False "
            "for timing only)",
            ratio,
            1 + MAX_PROFILER_OVERHEAD,
        )
    return HealthCheck("profiler_overhead", OK, observed, value=ratio, threshold=1 + MAX_PROFILER_OVERHEAD)


def _first_session(profiler_warmup: str, traced: Measurement | None) -> HealthCheck:
    if traced is None:
        return HealthCheck("first_session_artifacts", OK, "no traced pass")
    record = (profiler_warmup or "").strip().lower()
    if not (record.startswith("ran") or record.startswith("skipped")):
        return HealthCheck(
            "first_session_artifacts",
            WARN,
            f"no warm-up profiler session before the traced pass ({profiler_warmup or 'not recorded'})",
            "the first profiler session in a process can mis-time or drop GPU events; "
            "profile once more in this process and read the second trace",
        )
    samples = traced.samples_ms
    if len(samples) >= 3:
        others = statistics.median(samples[1:])
        if others > 0 and samples[0] / others >= FIRST_TRACED_CALL_RATIO:
            return HealthCheck(
                "first_session_artifacts",
                NOTE,
                f"the first traced call took {samples[0] / others:.1f}x the others: "
                "start-up work fell inside the trace",
                "trace more calls (trace_repeat) or warm up longer; per-call shares average over the traced calls",
                samples[0] / others,
                FIRST_TRACED_CALL_RATIO,
            )
    return HealthCheck("first_session_artifacts", OK, "a warm-up profiler session ran before the traced pass")


def _samples(timing: Measurement) -> list[HealthCheck]:
    out = []
    if timing.n < MIN_SAMPLES_FOR_INTERVAL:
        out.append(
            HealthCheck(
                "too_few_samples",
                WARN,
                f"only {timing.n} timed calls: no 95 % interval of the median can be formed "
                f"from fewer than {MIN_SAMPLES_FOR_INTERVAL}",
                f"time at least {FEW_SAMPLES} calls (repeat=20 is the default)",
                timing.n,
                MIN_SAMPLES_FOR_INTERVAL,
            )
        )
    elif timing.n < FEW_SAMPLES:
        lo, hi = timing.median_ci_ms()
        out.append(
            HealthCheck(
                "too_few_samples",
                WARN,
                f"only {timing.n} timed calls: the median's 95 % interval is {lo:.4g}-{hi:.4g} ms",
                f"time at least {FEW_SAMPLES} calls (repeat=20 is the default)",
                timing.n,
                FEW_SAMPLES,
            )
        )
    else:
        out.append(HealthCheck("too_few_samples", OK, f"{timing.n} timed calls", value=timing.n, threshold=FEW_SAMPLES))
    if timing.n >= 4 and timing.relative_iqr > NOISY_RELATIVE_IQR:
        out.append(
            HealthCheck(
                "noisy_timing",
                WARN,
                f"the IQR is {timing.relative_iqr:.0%} of the median (> {NOISY_RELATIVE_IQR:.0%})",
                "differences smaller than the spread are not real; quiet the machine or time more calls",
                timing.relative_iqr,
                NOISY_RELATIVE_IQR,
            )
        )
    else:
        out.append(
            HealthCheck(
                "noisy_timing",
                OK,
                f"IQR {timing.relative_iqr:.0%} of the median"
                if timing.n >= 4
                else "too few samples to judge the spread",
            )
        )
    return out


def _load(m: MachineState) -> HealthCheck:
    if m.load_avg_1m is None or not m.usable_cores:
        return HealthCheck("machine_load", UNKNOWN, "the load average or the core count could not be read")
    per_core = m.load_avg_1m / m.usable_cores
    observed = (
        f"1-minute load average {m.load_avg_1m:.2f} on {m.usable_cores} usable core(s) "
        f"({per_core:.2f} per core, this process included)"
    )
    if per_core > MAX_LOAD_PER_CORE:
        return HealthCheck(
            "machine_load",
            WARN,
            observed,
            "other work competes for the cores: timings are slower and noisier than on a "
            "quiet machine; profile when the machine is idle, or compare only within "
            "interleaved runs (wb.compare)",
            per_core,
            MAX_LOAD_PER_CORE,
        )
    return HealthCheck("machine_load", OK, observed, value=per_core, threshold=MAX_LOAD_PER_CORE)


def _threads(m: MachineState) -> HealthCheck:
    if m.torch_threads is None or not m.usable_cores:
        return HealthCheck("thread_oversubscription", UNKNOWN, "torch's thread count or the cores could not be read")
    cores = m.usable_cores
    if m.torch_threads > cores:
        return HealthCheck(
            "thread_oversubscription",
            WARN,
            f"torch uses {m.torch_threads} threads on {cores} usable core(s)",
            f"set threads={cores} (or torch.set_num_threads({cores})): threads beyond the cores only take turns",
            m.torch_threads / cores,
            1.0,
        )
    if m.load_avg_1m is not None and m.torch_threads > 1:
        # the load average counts this process too: at most its own threads of it are ours
        others = max(0.0, m.load_avg_1m - m.torch_threads)
        wanted = m.torch_threads + others
        if wanted > cores * MAX_THREADS_PER_CORE:
            return HealthCheck(
                "thread_oversubscription",
                WARN,
                f"torch's {m.torch_threads} threads plus ~{others:.1f} runnable threads of other "
                f"work want {wanted:.1f} cores; {cores} are usable",
                "fewer torch threads (threads=N) or fewer processes at once: each parallel "
                "op waits for its slowest thread",
                wanted / cores,
                MAX_THREADS_PER_CORE,
            )
    return HealthCheck("thread_oversubscription", OK, f"torch uses {m.torch_threads} thread(s) on {cores} core(s)")


def _omp(m: MachineState) -> HealthCheck:
    policy = (m.omp_wait_policy or "").strip().upper()
    if policy == "PASSIVE":
        return HealthCheck("omp_wait_policy", OK, "OMP_WAIT_POLICY=PASSIVE: idle OpenMP threads sleep")
    if policy == "ACTIVE":
        return HealthCheck(
            "omp_wait_policy",
            WARN,
            f"OMP_WAIT_POLICY=ACTIVE: {OMP_WAIT_NOTE}",
            "unless the machine is yours alone, start Python with OMP_WAIT_POLICY=PASSIVE "
            "(it is read when the OpenMP runtime starts, so set it before importing torch)",
        )
    loaded = m.load_avg_1m is not None and m.usable_cores and m.load_avg_1m / m.usable_cores > MAX_LOAD_PER_CORE
    level = WARN if loaded and (m.torch_threads or 1) > 1 else NOTE
    return HealthCheck(
        "omp_wait_policy",
        level,
        f"OMP_WAIT_POLICY is not set, so the OpenMP runtime's default applies: {OMP_WAIT_NOTE}",
        "on a shared machine or in a notebook next to other work, start Python (the "
        "kernel) with OMP_WAIT_POLICY=PASSIVE; `make demo` does, which is one reason its "
        "timings can differ from a notebook's",
    )


def _allocator(m: MachineState) -> HealthCheck | None:
    """Which allocator mode the calls were timed in; None where it was not read (older runs)."""
    if m.allocator_label is None:
        return None
    if m.allocator_mode == allocator.STEADY:
        return HealthCheck(
            "allocator",
            NOTE,
            f"timed with malloc in {m.allocator_label} in every process this run's numbers come from",
            "freed buffers up to 32 MiB are reused from the heap instead of being mapped "
            "afresh, so a call whose cost is fresh memory is faster here than in a default "
            "process; compare variants from processes in the same mode",
        )
    return HealthCheck("allocator", OK, f"malloc in its {m.allocator_label}")


def _clocks(m: MachineState) -> HealthCheck:
    if m.cpu_governor is None and m.cpu_cur_mhz is None:
        return HealthCheck("cpu_clock", UNKNOWN, "the CPU frequency is not readable here (no cpufreq in /sys)")
    parts = []
    if m.cpu_governor:
        parts.append(f"governor {m.cpu_governor}")
    if m.cpu_cur_mhz and m.cpu_max_mhz:
        parts.append(f"cpu0 at {m.cpu_cur_mhz:.0f} of {m.cpu_max_mhz:.0f} MHz")
    observed = ", ".join(parts)
    if m.cpu_governor in SLOW_GOVERNORS:
        return HealthCheck(
            "cpu_clock",
            NOTE,
            observed,
            "a frequency-scaling governor ramps the clock with load: short runs may time at a "
            "lower clock; warm up longer, or use the performance governor for benchmarks",
        )
    return HealthCheck("cpu_clock", OK, observed)


def _preemption(clean: float | None, traced: float | None, attempts: int) -> HealthCheck:
    if clean is None and traced is None:
        return HealthCheck("cpu_wait", UNKNOWN, "the kernel's run-queue wait (schedstat) is not readable here")
    parts = []
    if clean is not None:
        parts.append(f"the clean timed calls waited {clean:.0%} of their time for a CPU")
    if traced is not None:
        parts.append(
            f"the traced calls {traced:.0%}" + (f" (the least of {attempts} traced passes)" if attempts > 1 else "")
        )
    worst = max(x for x in (clean, traced) if x is not None)
    observed = "; ".join(parts)
    if worst > MAX_WAIT_SHARE:
        return HealthCheck(
            "cpu_wait",
            WARN,
            observed + " (that wait is taken out of each CPU sample)",
            "other processes took the CPU during the measurement: the samples leave this "
            "thread's waits out, but its other threads' waits and cache effects stay in, and "
            "in the trace waits show as gaps between ops; profile on a quiet machine, or "
            "fewer threads / processes at once",
            worst,
            MAX_WAIT_SHARE,
        )
    return HealthCheck("cpu_wait", OK, observed, value=worst, threshold=MAX_WAIT_SHARE)


# A call that maps fresh memory pages pays a minor page fault per 4 KiB page (about a microsecond
# each on these machines): glibc hands large freed buffers back to the OS, or keeps them, depending
# on its heap layout, so the same code can run at two speeds in two processes.
FRESH_PAGES_WARN_FAULTS = 256.0  # minor faults per clean call (1 MiB of fresh 4 KiB pages)
PAGE_BYTES = 4096


def read_minor_faults() -> int | None:
    """This process's minor page faults so far (``getrusage``), None where it cannot be read."""
    try:
        import resource

        return int(resource.getrusage(resource.RUSAGE_SELF).ru_minflt)
    except (ImportError, OSError, ValueError):
        return None


def _fresh_pages(faults_per_call: float | None) -> HealthCheck:
    if faults_per_call is None:
        return HealthCheck("fresh_pages", UNKNOWN, "page faults are not readable here (no getrusage)")
    kib = faults_per_call * PAGE_BYTES / 2**10
    observed = (
        f"each clean call took {faults_per_call:,.0f} minor page faults (memory mapped fresh: at "
        f"least {kib:,.0f} KiB, more where the pages are huge pages)"
    )
    if faults_per_call >= FRESH_PAGES_WARN_FAULTS:
        return HealthCheck(
            "fresh_pages",
            WARN,
            observed,
            "the call allocates large buffers whose pages the allocator returns to the OS and maps "
            "again on every call; that cost is in the timing and depends on the allocator's state "
            "(the same code can differ up to 2x between processes): reuse buffers (out=, "
            "preallocation) to remove it, and compare variants interleaved in one process "
            "(wb.compare) rather than across processes; `workbench report` times every process "
            "with the allocator pinned (--allocator steady) for this reason",
            faults_per_call,
            FRESH_PAGES_WARN_FAULTS,
        )
    return HealthCheck("fresh_pages", OK, observed, value=faults_per_call, threshold=FRESH_PAGES_WARN_FAULTS)


def check_health(
    timing: Measurement,
    *,
    traced: Measurement | None = None,
    profiler_warmup: str = "",
    machine: MachineState | None = None,
    legacy_under_profiler: bool = False,
    clean_wait_share: float | None = None,
    traced_wait_share: float | None = None,
    trace_attempts: int = 1,
    page_faults_per_call: float | None = None,
) -> ProfileHealth:
    """Every check, worst first. ``machine=None`` (a reloaded older run): the machine checks read
    "unknown" instead of guessing. ``*_wait_share``: the share of the clean / traced calls the thread
    waited on the run queue (``read_run_delay_ns``)."""
    checks = [
        _overhead(timing, traced, legacy_under_profiler),
        _first_session(profiler_warmup, traced),
        *_samples(timing),
    ]
    if machine is not None:
        checks.append(_preemption(clean_wait_share, traced_wait_share, trace_attempts))
    if machine is None:
        checks.append(HealthCheck("machine_load", UNKNOWN, "the machine's state was not recorded"))
        state = MachineState()
    else:
        checks += [_load(machine), _threads(machine), _omp(machine), _clocks(machine)]
        if page_faults_per_call is not None:  # counted around the clean calls (getrusage)
            checks.append(_fresh_pages(page_faults_per_call))
        mode_check = _allocator(machine)
        if mode_check is not None:
            checks.append(mode_check)
        state = machine
    order = sorted(range(len(checks)), key=lambda i: (_LEVEL_ORDER.get(checks[i].level, 9), i))
    return ProfileHealth(checks=tuple(checks[i] for i in order), machine=state)


def health_for(
    timing: Measurement,
    traced: Measurement | None,
    profiler_warmup: str,
    torch: ModuleType | None = None,
    *,
    torch_threads: int | None = None,
    environ: Mapping[str, str] | None = None,
    clean_wait_share: float | None = None,
    traced_wait_share: float | None = None,
    trace_attempts: int = 1,
    page_faults_per_call: float | None = None,
) -> ProfileHealth:
    """The health of a run just profiled: reads the machine now (``torch_threads``: the thread
    count the profile ran with, where it set one for the run; ``page_faults_per_call``: minor page
    faults per clean call, ``read_minor_faults`` around the timed calls)."""
    from dataclasses import replace

    machine = read_machine_state(torch, environ=environ)
    if torch_threads is not None:
        machine = replace(machine, torch_threads=int(torch_threads))
    return check_health(
        timing,
        traced=traced,
        profiler_warmup=profiler_warmup,
        machine=machine,
        clean_wait_share=clean_wait_share,
        traced_wait_share=traced_wait_share,
        trace_attempts=trace_attempts,
        page_faults_per_call=page_faults_per_call,
    )
