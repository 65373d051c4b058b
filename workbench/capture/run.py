"""ProfileRun: what one ``wb.profile`` / ``%%gpuprofile`` measured, as a frozen value.

The run holds its clean timing (raw samples, no profiler running), the cold first call, the
samples of the separate traced pass and the profiler's overhead, a health check of the
measurement, compile diagnostics, the environment and the parsed trace; it saves itself as a
bundle folder and reloads from one (``load_run``). Times read from the trace are stated per clean
call: their shares come from the trace, their magnitude from the clean timing
(``trace_scale``, ``per_call_ops``).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from workbench.capture.compile_diag import CompileDiagnostics
from workbench.capture.health import ProfileHealth, check_health
from workbench.capture.measurement import Measurement
from workbench.units import format_ms


@dataclass(frozen=True)
class ProfileRun:
    name: str
    timing: Measurement            # clean warm repeats (no profiler running), one sample per call
    cold_ms: float                 # the first call, timed apart (compile, autotune, lazy init)
    warmup: int
    repeat: int
    device: str                    # "cpu" or "cuda:<index>"
    compile: CompileDiagnostics
    environment: dict[str, Any]
    settings: dict[str, Any]       # torch settings in effect while profiling (threads, grad mode)
    memory: dict[str, Any]         # device memory statistics over the repeats
    profiler_warmup: str           # what was done against first-session profiler artifacts
    trace_path: str | None         # the exported Chrome trace (gzipped JSON), None when trace off
    trace_note: str                # why there is no parsed trace, "" when there is one
    created_at: str
    trace: Any = field(default=None, compare=False, repr=False)
    traced_timing: Measurement | None = None   # the traced pass's calls, timed under the profiler
    trace_repeat: int = 0          # calls in the traced pass (0: trace off)
    health: ProfileHealth = field(default_factory=ProfileHealth.not_recorded, compare=False)
    profiler_stderr: str = field(default="", compare=False, repr=False)  # native output held back
    expected_calls: int | None = None  # calls the user expects to make: one-time costs are spread over them

    # -- derived -------------------------------------------------------------------------
    @property
    def warm_median_ms(self) -> float:
        return self.timing.median_ms

    @property
    def cold_over_warm(self) -> float:
        """How many warm calls the first call cost."""
        median = self.timing.median_ms
        return self.cold_ms / median if median > 0 else float("inf")

    @property
    def timed_under_profiler(self) -> bool:
        """True only for runs recorded before timing and tracing were separated (older bundles)."""
        return bool(self.timing.metadata.get("under_profiler", False))

    @property
    def profiler_overhead(self) -> float | None:
        """Traced median / clean median (1.25: a traced call takes 25 % longer); None without a
        separate traced pass."""
        if self.traced_timing is None or self.timing.median_ms <= 0:
            return None
        return self.traced_timing.median_ms / self.timing.median_ms

    @property
    def trace_scale(self) -> float:
        """Factor from the trace's per-call times to the clean per-call time (1 / overhead; 1.0
        where there is no separate traced pass, as in older bundles)."""
        overhead = self.profiler_overhead
        return 1.0 / overhead if overhead and overhead > 0 else 1.0

    @property
    def notes(self) -> tuple[str, ...]:
        """Caveats to show beside the numbers."""
        covered = ("only ", "noisy") if self.health.recorded else ()   # the health check says these
        out = [w for w in self.timing.warnings if not w.startswith(covered)] if covered else list(self.timing.warnings)
        if self.timed_under_profiler:
            out.append("timed with torch.profiler recording (an older run): its per-op overhead is in "
                       "the samples; profile again for clean timing")
        if self.trace_note:
            out.append(self.trace_note)
            if self.profiler_stderr.strip():
                out.append("the profiler's native output: " + self.profiler_stderr.strip()[-2000:])
        return tuple(out)

    @property
    def traced_calls(self) -> int:
        """Calls of the profiled function the trace covers (the traced pass), 0 without one."""
        return self.trace_repeat if self.trace_path is not None else 0

    def per_call_ops(self, top: int | None = 15) -> Any:
        """The trace's CPU ops by self time, per clean call: ``self_ms_per_call`` and
        ``total_ms_per_call`` are the trace's totals / traced calls x ``trace_scale``, ``pct``
        their share; empty (with the columns) without a trace."""
        return _per_call_table(self, "op_breakdown", "self_us", "total_us", top)

    def per_call_kernels(self, top: int | None = 15) -> Any:
        """The trace's GPU kernels by time, per clean call (``sum_ms_per_call``)."""
        return _per_call_table(self, "kernel_breakdown", "sum_us", None, top)

    @cached_property
    def hypotheses(self) -> list[Any]:
        """Ranked hypotheses, best first: run-level rules (cold start, compile, measurement) and
        the trace's rules with time at stake per call (``workbench.hypotheses.diagnose_run``)."""
        from workbench.hypotheses import HypothesisList, diagnose_run_full

        return HypothesisList.from_diagnosis(diagnose_run_full(self))

    # -- persistence ---------------------------------------------------------------------
    def save(self, path: str | Path) -> Path:
        """Write the run as a bundle folder (run.json, environment.json, trace.json.gz)."""
        from workbench.capture.bundle import save_run

        return save_run(self, path)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name, "timing": self.timing.to_dict(), "cold_ms": self.cold_ms,
            "warmup": self.warmup, "repeat": self.repeat, "device": self.device,
            "compile": self.compile.to_dict(), "environment": self.environment,
            "settings": dict(self.settings), "memory": dict(self.memory),
            "profiler_warmup": self.profiler_warmup, "trace_path": self.trace_path,
            "trace_note": self.trace_note, "created_at": self.created_at,
            "traced_timing": self.traced_timing.to_dict() if self.traced_timing is not None else None,
            "trace_repeat": self.trace_repeat, "profiler_overhead": self.profiler_overhead,
            "health": self.health.to_dict(), "profiler_stderr": self.profiler_stderr,
            "expected_calls": self.expected_calls,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any], *, trace: Any = None) -> "ProfileRun":
        """Also reads records written before the traced pass was separated: no ``traced_timing``
        (the trace then covered the ``repeat`` timed calls), no ``health`` (checked again from
        the samples; the machine's state reads "not recorded")."""
        timing = Measurement.from_dict(d["timing"])
        traced = d.get("traced_timing")
        traced = Measurement.from_dict(traced) if traced else None
        repeat = int(d["repeat"])
        trace_repeat = d.get("trace_repeat")
        if trace_repeat is None:   # older record: the trace covered the timed repeats
            trace_repeat = repeat if d.get("trace_path") else 0
        health = d.get("health")
        health = (ProfileHealth.from_dict(health) if health else
                  check_health(timing, traced=traced, profiler_warmup=str(d.get("profiler_warmup", "")),
                               legacy_under_profiler=bool(timing.metadata.get("under_profiler", False))))
        return cls(
            name=d["name"], timing=timing, cold_ms=float(d["cold_ms"]),
            warmup=int(d["warmup"]), repeat=repeat, device=d["device"],
            compile=CompileDiagnostics.from_dict(d["compile"]), environment=dict(d["environment"]),
            settings=dict(d["settings"]), memory=dict(d["memory"]),
            profiler_warmup=d["profiler_warmup"], trace_path=d.get("trace_path"),
            trace_note=d.get("trace_note", ""), created_at=d["created_at"], trace=trace,
            traced_timing=traced, trace_repeat=int(trace_repeat), health=health,
            profiler_stderr=str(d.get("profiler_stderr", "") or ""),
            expected_calls=int(d["expected_calls"]) if d.get("expected_calls") else None,
        )

    # -- display -------------------------------------------------------------------------
    def save_charts(self, folder: Any, *, formats: Any = ("svg",), scale: float = 1.0) -> list:
        """Write the charts the notebook shows for this result to ``folder`` (svg, png, html,
        json; see ``workbench.charts.save_charts``); returns the paths written."""
        from workbench.charts.export import save_charts

        return save_charts(self, folder, formats=formats, scale=scale)

    def _repr_html_(self) -> str:
        from workbench.capture.display import run_html

        return run_html(self)

    def __repr__(self) -> str:
        lo, hi = self.timing.median_ci_ms()
        overhead = self.profiler_overhead
        traced = (f"; traced {self.traced_calls} calls, profiler overhead {overhead:.2f}x" if overhead
                  else "")
        return (f"ProfileRun({self.name!r} on {self.device}: clean median {format_ms(self.timing.median_ms)} "
                f"per call [95% CI {format_ms(lo)}-{format_ms(hi)}], p95 {format_ms(self.timing.p95_ms)}, "
                f"n={self.timing.n}; cold {format_ms(self.cold_ms)} once{traced}; "
                f"trace {'parsed' if self.trace is not None else 'none'}; {self.health.headline()})")

    def to_text(self) -> str:
        """The run as plain text: clean timing per call, the traced pass, the health check."""
        t = self.timing
        lo, hi = t.median_ci_ms()
        lines = [f"{self.name} on {self.device}",
                 f"  clean median  {format_ms(t.median_ms)} per call (95% CI {format_ms(lo)}-{format_ms(hi)}), "
                 f"p95 {format_ms(t.p95_ms)}, {t.n} calls after {self.warmup} warm-up, no profiler running",
                 f"  first call    {format_ms(self.cold_ms)} once ({self.cold_over_warm:.1f}x the clean median)"]
        if self.traced_timing is not None:
            lines.append(f"  traced pass   {format_ms(self.traced_timing.median_ms)} per call over "
                         f"{self.traced_timing.n} calls under torch.profiler: overhead "
                         f"{self.profiler_overhead:.2f}x; trace times below are scaled to the clean call")
        lines += ["  " + line for line in self.health.lines()]
        lines += ["  note: " + n for n in self.notes]
        return "\n".join(lines)


def _per_call_table(run: ProfileRun, method: str, time_col: str, total_col: str | None,
                    top: int | None) -> Any:
    import pandas as pd

    out_cols = {time_col: time_col.replace("_us", "_ms_per_call")}
    if total_col:
        out_cols[total_col] = total_col.replace("_us", "_ms_per_call")
    empty = pd.DataFrame(columns=["name", "calls_per_call", *out_cols.values(), "pct"])
    analysis = getattr(run.trace, method, None) if run.trace is not None else None
    if analysis is None:
        return empty
    table = analysis().table
    if table is None or len(table) == 0 or time_col not in table.columns:
        return empty
    calls = max(1, run.traced_calls or 1)
    scale = run.trace_scale / calls / 1e3          # µs over the traced calls -> ms per clean call
    table = table.sort_values(time_col, ascending=False)
    out = table.copy()
    whole = float(table[time_col].sum())
    for src, dst in out_cols.items():
        if src in out.columns:
            out[dst] = out[src].astype(float) * scale
    if "count" in out.columns:
        out["calls_per_call"] = out["count"].astype(float) / calls
    out["pct"] = out[time_col].astype(float) / whole * 100 if whole > 0 else float("nan")
    keep = ["rank", "name", "kernel_type", "calls_per_call", *out_cols.values(), "pct"]
    keep += [c for c in out.columns if "dims" in c or "types" in c or "shape" in c]
    out = out[[c for c in dict.fromkeys(keep) if c in out.columns]]
    return (out.head(top) if top else out).reset_index(drop=True)


def load_run(path: str | Path) -> ProfileRun:
    """Load a run bundle written by ``ProfileRun.save``; the trace is parsed again from its file."""
    from workbench.capture.bundle import load_run as _load

    return _load(path)
