"""RunRecord: what one profile measured, as a frozen value of the capture layer.

The record holds the clean timing (raw samples, no profiler running), the cold first call, the
samples of the separate traced pass and the profiler's overhead, a health check of the
measurement, compile diagnostics, the environment facts and the parsed trace data
(``workbench.trace.TraceData``); it saves itself as a bundle folder and reloads from one
(``RunRecord.load``, ``workbench.capture.bundle``). Times read from the trace are stated per clean
call: their shares come from the trace, their magnitude from the clean timing (``trace_scale``).

The public run (``wb.profile``, ``%%gpuprofile``, ``wb.load_run``) is ``workbench.api.run.
ProfileRun``, the face object built on this record: it adds the facade Trace, the hypotheses, the
history, the per-call tables, charts and the notebook display.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from workbench.capture.bundle import read_bundle, save_bundle
from workbench.capture.compile_diag import CompileDiagnostics
from workbench.capture.health import ProfileHealth, check_health
from workbench.measurement import Measurement
from workbench.trace import TraceData
from workbench.trace.optimizer_params import OptimizerStepParams, optimizer_params_from_list
from workbench.trace.statements import StatementLines
from workbench.units import format_ms

STEP_PREFIX = "ProfilerStep#"  # each traced call's annotation (capture.profiler_session.STEP_NAME)

RecordT = TypeVar("RecordT", bound="RunRecord")


@dataclass(frozen=True)
class RunRecord:
    name: str
    timing: Measurement  # clean warm repeats (no profiler running), one sample per call
    cold_ms: float  # the first call, timed apart (compile, autotune, lazy init)
    warmup: int
    repeat: int
    device: str  # "cpu" or "cuda:<index>"
    compile: CompileDiagnostics
    environment: dict[str, Any]
    settings: dict[str, Any]  # torch settings in effect while profiling (threads, grad mode)
    memory: dict[str, Any]  # device memory statistics over the repeats
    profiler_warmup: str  # what was done against first-session profiler artifacts
    trace_path: str | None  # the exported Chrome trace (gzipped JSON), None when trace off
    trace_note: str  # why there is no parsed trace, "" when there is one
    created_at: str
    trace: TraceData | None = field(default=None, compare=False, repr=False)
    traced_timing: Measurement | None = None  # the traced pass's calls, timed under the profiler
    trace_repeat: int = 0  # calls in the traced pass (0: trace off)
    health: ProfileHealth = field(default_factory=ProfileHealth.not_recorded, compare=False)
    profiler_stderr: str = field(default="", compare=False, repr=False)  # native output held back
    expected_calls: int | None = None  # calls the user expects to make: one-time costs are spread over them
    # the traced pass's module scopes by the profiler's labels ("Linear_6") -> the modules' names in
    # their model ("blocks.1.mlp.fc"; capture.module_scopes.ModuleNames); {} where none ran or unknown
    module_names: dict[str, str] = field(default_factory=dict, compare=False)
    # the parameters each optimizer's step visited in the traced pass, in its order, with the modules that
    # hold them (trace.optimizer_params): the optimizer's time split by module; () where none stepped
    optimizer_params: tuple[OptimizerStepParams, ...] = field(default=(), compare=False)
    # the statements of the user's code that the traced pass ran (capture.statements), for time by
    # statement line; None where not recorded (trace off, an older record)
    statements: StatementLines | None = field(default=None, compare=False, repr=False)

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
        """Factor from the trace's per-call times to the clean per-call time: the clean median over
        the traced call's time as the trace itself measured it (the mean of its ``ProfilerStep#``
        spans, at least the traced median), so that shares come from the trace and magnitudes from
        the clean timing and no op's per-call time exceeds the clean call. Spans, not the traced
        samples alone: a preempted traced call is long in the trace even when its sample had the
        run-queue wait taken out. 1.0 where there is no separate traced pass (older bundles)."""
        if self.traced_timing is None or self.timing.median_ms <= 0:
            return 1.0
        traced_ms = max(float(self.traced_timing.median_ms), self.trace_step_mean_ms or 0.0)
        return self.timing.median_ms / traced_ms if traced_ms > 0 else 1.0

    @property
    def trace_step_mean_ms(self) -> float | None:
        """Mean span of the traced calls in the trace (its ``ProfilerStep#`` annotations, one per
        traced call), None without a trace or steps."""
        if self.trace is None or self.trace_path is None:
            return None
        steps = self.trace.annotations
        if len(steps) == 0:
            return None
        steps = steps[steps["name"].astype(str).str.startswith(STEP_PREFIX)]
        return float(steps["dur_us"].mean()) / 1e3 if len(steps) else None

    @property
    def notes(self) -> tuple[str, ...]:
        """Caveats to show beside the numbers."""
        covered = ("only ", "noisy") if self.health.recorded else ()  # the health check says these
        out = [w for w in self.timing.warnings if not w.startswith(covered)] if covered else list(self.timing.warnings)
        if self.timed_under_profiler:
            out.append(
                "timed with torch.profiler recording (an older run): its per-op overhead is in "
                "the samples; profile again for clean timing"
            )
        if self.statements is not None and self.statements.note and self.trace_path is not None:
            out.append(self.statements.note)
        if self.trace_note:
            out.append(self.trace_note)
            if self.profiler_stderr.strip():
                out.append("the profiler's native output: " + self.profiler_stderr.strip()[-2000:])
        return tuple(out)

    @property
    def traced_calls(self) -> int:
        """Calls of the profiled function the trace covers (the traced pass), 0 without one."""
        return self.trace_repeat if self.trace_path is not None else 0

    # -- persistence ---------------------------------------------------------------------
    def save(self, path: str | Path) -> Path:
        """Write the run as a bundle folder (run.json, environment.json, trace.json.gz)."""
        return save_bundle(self.to_dict(), self.trace_path, path)

    @classmethod
    def load(cls: type[RecordT], path: str | Path) -> RecordT:
        """Read a bundle folder written by ``save``; the trace is parsed again from its file."""
        contents = read_bundle(path)
        return cls.from_dict(contents.record, trace=contents.trace, folder=contents.folder)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "timing": self.timing.to_dict(),
            "cold_ms": self.cold_ms,
            "warmup": self.warmup,
            "repeat": self.repeat,
            "device": self.device,
            "compile": self.compile.to_dict(),
            "environment": self.environment,
            "settings": dict(self.settings),
            "memory": dict(self.memory),
            "profiler_warmup": self.profiler_warmup,
            "trace_path": self.trace_path,
            "trace_note": self.trace_note,
            "created_at": self.created_at,
            "traced_timing": self.traced_timing.to_dict() if self.traced_timing is not None else None,
            "trace_repeat": self.trace_repeat,
            "profiler_overhead": self.profiler_overhead,
            "health": self.health.to_dict(),
            "profiler_stderr": self.profiler_stderr,
            "expected_calls": self.expected_calls,
            "module_names": dict(self.module_names),
            "optimizer_params": [o.to_dict() for o in self.optimizer_params],
            "statements": self.statements.to_dict() if self.statements is not None else None,
        }

    @classmethod
    def fields_from_dict(cls, d: dict[str, Any], *, trace: TraceData | None = None) -> dict[str, Any]:
        """The constructor's keywords from a ``to_dict`` record. Also reads records written before
        the traced pass was separated: no ``traced_timing`` (the trace then covered the ``repeat``
        timed calls), no ``health`` (checked again from the samples; the machine's state reads
        "not recorded")."""
        timing = Measurement.from_dict(d["timing"])
        traced_doc = d.get("traced_timing")
        traced = Measurement.from_dict(traced_doc) if traced_doc else None
        repeat = int(d["repeat"])
        trace_repeat = d.get("trace_repeat")
        if trace_repeat is None:  # older record: the trace covered the timed repeats
            trace_repeat = repeat if d.get("trace_path") else 0
        health_doc = d.get("health")
        health = (
            ProfileHealth.from_dict(health_doc)
            if health_doc
            else check_health(
                timing,
                traced=traced,
                profiler_warmup=str(d.get("profiler_warmup", "")),
                legacy_under_profiler=bool(timing.metadata.get("under_profiler", False)),
            )
        )
        return dict(
            name=d["name"],
            timing=timing,
            cold_ms=float(d["cold_ms"]),
            warmup=int(d["warmup"]),
            repeat=repeat,
            device=d["device"],
            compile=CompileDiagnostics.from_dict(d["compile"]),
            environment=dict(d["environment"]),
            settings=dict(d["settings"]),
            memory=dict(d["memory"]),
            profiler_warmup=d["profiler_warmup"],
            trace_path=d.get("trace_path"),
            trace_note=d.get("trace_note", ""),
            created_at=d["created_at"],
            trace=trace,
            traced_timing=traced,
            trace_repeat=int(trace_repeat),
            health=health,
            profiler_stderr=str(d.get("profiler_stderr", "") or ""),
            expected_calls=int(d["expected_calls"]) if d.get("expected_calls") else None,
            module_names=_module_names(d.get("module_names")),
            optimizer_params=optimizer_params_from_list(d.get("optimizer_params")),
            statements=StatementLines.from_dict(d["statements"]) if d.get("statements") is not None else None,
        )

    @classmethod
    def from_dict(
        cls: type[RecordT], d: dict[str, Any], *, trace: TraceData | None = None, folder: Path | None = None
    ) -> RecordT:
        """The record from ``to_dict``'s output; ``folder``: the bundle it was read from, if any
        (a wrong record there becomes a ``BundleError`` naming it)."""
        from workbench.capture.bundle import incomplete_record

        try:
            return cls(**cls.fields_from_dict(d, trace=trace))
        except (KeyError, TypeError, ValueError) as exc:
            if folder is None:
                raise
            raise incomplete_record(folder, exc) from exc

    # -- text ----------------------------------------------------------------------------
    def __repr__(self) -> str:
        lo, hi = self.timing.median_ci_ms()
        overhead = self.profiler_overhead
        traced = f"; traced {self.traced_calls} calls, profiler overhead {overhead:.2f}x" if overhead else ""
        return (
            f"{type(self).__name__}({self.name!r} on {self.device}: clean median "
            f"{format_ms(self.timing.median_ms)} per call [95% CI {format_ms(lo)}-{format_ms(hi)}], "
            f"p95 {format_ms(self.timing.p95_ms)}, n={self.timing.n}; cold {format_ms(self.cold_ms)} "
            f"once{traced}; trace {'parsed' if self.trace is not None else 'none'}; "
            f"{self.health.headline()})"
        )


def _module_names(value: Any) -> dict[str, str]:
    """A saved record's ``module_names`` ({} where an older record has none); a label or name that is
    not a string is a ValueError (a damaged record, named by the bundle reader)."""
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        raise ValueError(f"module_names must map module labels to names (strings); got {type(value).__name__}")
    return dict(value)
