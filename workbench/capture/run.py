"""ProfileRun: what one ``wb.profile`` / ``%%gpuprofile`` measured, as a frozen value.

The run holds its timing (raw samples), the cold first call, compile diagnostics, the environment
and the parsed trace; it saves itself as a bundle folder and reloads from one (``load_run``).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from workbench.capture.compile_diag import CompileDiagnostics
from workbench.capture.measurement import Measurement


@dataclass(frozen=True)
class ProfileRun:
    name: str
    timing: Measurement            # warm repeats, one sample per call
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
        return bool(self.timing.metadata.get("under_profiler", False))

    @property
    def notes(self) -> tuple[str, ...]:
        """Caveats to show beside the numbers."""
        out = list(self.timing.warnings)
        if self.timed_under_profiler:
            out.append("timed with torch.profiler recording: its per-op overhead is in the "
                       "samples (trace=False / --no-trace for timing without it)")
        if self.trace_note:
            out.append(self.trace_note)
        return tuple(out)

    @property
    def traced_calls(self) -> int:
        """Calls of the profiled function the trace covers (the timed repeats), 0 without one."""
        return self.repeat if self.trace_path is not None else 0

    @cached_property
    def hypotheses(self) -> list[Any]:
        """Ranked hypotheses, best first: run-level rules (cold start, compile, measurement) and
        the trace's rules with time at stake per call (``workbench.hypotheses.diagnose_run``)."""
        from workbench.hypotheses import diagnose_run

        return list(diagnose_run(self))

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
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any], *, trace: Any = None) -> "ProfileRun":
        return cls(
            name=d["name"], timing=Measurement.from_dict(d["timing"]), cold_ms=float(d["cold_ms"]),
            warmup=int(d["warmup"]), repeat=int(d["repeat"]), device=d["device"],
            compile=CompileDiagnostics.from_dict(d["compile"]), environment=dict(d["environment"]),
            settings=dict(d["settings"]), memory=dict(d["memory"]),
            profiler_warmup=d["profiler_warmup"], trace_path=d.get("trace_path"),
            trace_note=d.get("trace_note", ""), created_at=d["created_at"], trace=trace,
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
        return (f"ProfileRun({self.name!r} on {self.device}: warm median {self.timing.median_ms:.4g} ms "
                f"[95% CI {lo:.4g}-{hi:.4g}], p95 {self.timing.p95_ms:.4g} ms, n={self.timing.n}; "
                f"cold {self.cold_ms:.4g} ms; trace {'parsed' if self.trace is not None else 'none'})")


def load_run(path: str | Path) -> ProfileRun:
    """Load a run bundle written by ``ProfileRun.save``; the trace is parsed again from its file."""
    from workbench.capture.bundle import load_run as _load

    return _load(path)
