"""``workbench report``: profile a workload (or load a bundle), execute the template, render HTML.

Order matters for a CI gate: everything that can be checked without running the workload is
checked first (the threshold, the earlier report's samples and environment, the template, the
output folder), so a typo costs nothing and nothing is overwritten. Then the workload is timed in
``processes`` fresh processes (the gate's samples, ``workbench.report.sampler``), profiled once
in this process with the trace, the experiments run, the notebook is executed and rendered, and
last ``summary.json`` is written with the samples and, with ``compare_to``, the gate's verdict.

Every timed process, this one included, runs in one allocator mode (``allocator_mode``, default
``steady``: glibc malloc's thresholds pinned, ``workbench.capture.allocator``), so the headline,
the gate's samples and the Experiments section time the same steady state; with the adaptive
default the same code measured 1.6x apart between the headline and the experiments of one report.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

import workbench.capture.allocator as allocator
from workbench.capture.run import RunRecord
from workbench.errors import BundleError, InvalidArgumentError, ReportError
from workbench.report.execute import check_template, execute_template
from workbench.report.experiments import write_experiments
from workbench.report.files import find_template
from workbench.report.regression import (
    GATE_QUANTILE,
    MIN_PROCESSES,
    SUMMARY_FILE,
    GateVerdict,
    SampleSet,
    check_threshold,
    environment_differences,
    gate,
    load_samples,
    workload_difference,
)
from workbench.report.render import render_html
from workbench.report.sections import timing_summary
from workbench.report.workload import DEFAULT_WORKLOAD, resolve_workload, run_guarded

DEFAULT_PROCESSES = 3

BUNDLE_DIR = "run"
NOTEBOOK_FILE = "report.ipynb"
HTML_FILE = "report.html"


def default_template() -> Path:
    """``templates/report.ipynb`` next to the package (a checkout or an editable install)."""
    return find_template("report.ipynb", "default report")


@dataclass(frozen=True)
class ReportResult:
    """Where a report's files are and the timing it shows."""

    out_dir: str
    html_path: str
    notebook_path: str
    bundle_path: str
    summary: dict[str, Any]
    regression: GateVerdict | None = field(default=None)

    def to_dict(self) -> dict[str, Any]:
        return {
            "out_dir": self.out_dir,
            "html_path": self.html_path,
            "notebook_path": self.notebook_path,
            "bundle_path": self.bundle_path,
            "summary": self.summary,
            "regression": self.regression.to_dict() if self.regression else None,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "ReportResult":
        reg = d.get("regression")
        return cls(
            out_dir=d["out_dir"],
            html_path=d["html_path"],
            notebook_path=d["notebook_path"],
            bundle_path=d["bundle_path"],
            summary=dict(d["summary"]),
            regression=GateVerdict.from_dict(reg) if reg else None,
        )


def profile_workload(
    spec: str,
    *,
    warmup: int,
    repeat: int,
    time_limit_s: float | None = None,
    resolved: tuple[Callable[..., Any], tuple[Any, ...]] | None = None,
) -> RunRecord:
    """Profile ``module:function`` with ``wb.profile`` (trace on) in this process; the workload's
    own failures become a ``WorkloadError``, ``time_limit_s`` a ``WorkloadTimeout``. ``resolved``:
    the (function, args) ``resolve_workload(spec)`` already returned. The report keeps the run's
    record (``RunRecord``, with the environment fingerprint); the template reads the bundle back as
    the public ``ProfileRun`` (``wb.load_run``)."""
    from workbench.capture.profile import profile
    from workbench.devices.fingerprint import environment_fingerprint

    func, args = resolved or resolve_workload(spec)
    return run_guarded(
        lambda: profile(
            func, *args, warmup=warmup, repeat=repeat, trace=True, name=spec, environment=environment_fingerprint()
        ),
        f"the workload {spec!r}",
        time_limit_s,
    )


def _load_bundle(path: Path) -> RunRecord:
    if not path.exists():
        raise BundleError(
            f"run bundle {str(path)!r} does not exist; pass a folder written by "
            "ProfileRun.save() or by an earlier `workbench report` (its run/ folder)"
        )
    return RunRecord.load(path)


def _check_positive_count(name: str, value: Any, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise InvalidArgumentError(f"{name} must be an integer >= {minimum}; got {value!r}")


def _same_folder(a: Path, b: str | Path) -> bool:
    try:
        return a.resolve() == Path(b).resolve()
    except OSError:
        return False


def _quiet(_: str) -> None:
    pass


def build_report(
    out_dir: str | Path,
    *,
    workload: str = DEFAULT_WORKLOAD,
    bundle: str | Path | None = None,
    template: str | Path | None = None,
    warmup: int = 3,
    repeat: int = 20,
    compare_to: str | Path | None = None,
    fail_on_regression_pct: float = math.inf,
    title: str | None = None,
    experiments: bool = True,
    processes: int = DEFAULT_PROCESSES,
    time_limit_s: float | None = None,
    allow_environment_change: bool = False,
    gate_quantile: float = GATE_QUANTILE,
    allocator_mode: str | None = None,
    progress: Callable[[str], None] | None = None,
) -> ReportResult:
    """Write ``run/`` (unless a bundle is given), ``experiments.json`` (``experiments`` and a
    workload: the variants its hypotheses suggest, compared with it), ``report.ipynb``,
    ``report.html`` and ``summary.json`` (with the clean samples of ``processes`` fresh processes,
    which a later report's ``compare_to`` gates against).

    ``allocator_mode``: ``steady`` pins glibc malloc's thresholds in every timed process, this one
    included for the rest of its life (glibc has no way back); ``default`` leaves them adaptive;
    None: ``$WORKBENCH_ALLOCATOR``, else steady (``workbench.capture.allocator``).
    ``progress`` receives one line per phase ("timing the workload in a fresh process (1/3)...").
    Bad input raises before anything runs or is written; see the module docstring."""
    say = progress or _quiet
    threshold = check_threshold(fail_on_regression_pct)
    if isinstance(gate_quantile, bool) or not isinstance(gate_quantile, (int, float)) or not 0 <= gate_quantile < 1:
        raise InvalidArgumentError(f"--gate-quantile takes a number in [0, 1); got {gate_quantile!r}")
    _check_positive_count("repeat", repeat, 1)
    _check_positive_count("warmup", warmup, 0)
    _check_positive_count("processes", processes, 0)
    allocator_mode = allocator.requested_mode(allocator_mode)
    if time_limit_s is not None and (
        isinstance(time_limit_s, bool) or not isinstance(time_limit_s, (int, float)) or not time_limit_s > 0
    ):
        raise InvalidArgumentError(f"--time-limit takes a number of seconds > 0; got {time_limit_s!r}")
    out = Path(out_dir).resolve()
    if out.exists() and not out.is_dir():
        raise ReportError(f"the report folder {str(out)!r} is a file; pass --out a folder")
    template_path = Path(template).resolve() if template else default_template()
    check_template(template_path)
    old = None
    if compare_to is not None:
        if _same_folder(out, compare_to):
            raise InvalidArgumentError(
                f"--out {str(out_dir)!r} is the --compare-to report itself; the new "
                "report would overwrite the one it is judged against. Pass another --out"
            )
        old = load_samples(compare_to)
        if old.n_processes < MIN_PROCESSES:
            raise InvalidArgumentError(
                f"the report {str(compare_to)!r} has samples from {old.n_processes} "
                f"process; the gate needs at least {MIN_PROCESSES} per report to see "
                "the spread between processes. Re-make it with --processes 3 or more"
            )
        if bundle is not None:
            raise InvalidArgumentError(
                "--compare-to needs the new report's samples from fresh processes, "
                "and a --bundle report has none; report on --workload instead"
            )
        if processes < MIN_PROCESSES:
            raise InvalidArgumentError(
                f"--compare-to needs --processes >= {MIN_PROCESSES} (the spread between "
                f"processes is what the gate judges); got {processes}"
            )
        if not allow_environment_change:
            _refuse_other_environment(old, compare_to, workload, allocator_mode)
    if bundle is not None:
        bundle_path = Path(bundle).resolve()
        run = _load_bundle(bundle_path)
        samples = None
    else:
        resolved = resolve_workload(workload)  # an unknown workload is bad input, before any process starts
        samples = None
        if processes:
            from workbench.report.sampler import sample_processes

            samples = sample_processes(
                workload,
                processes=processes,
                warmup=warmup,
                repeat=repeat,
                time_limit_s=time_limit_s,
                allocator_mode=allocator_mode,
                progress=say,
            )
        if allocator_mode == allocator.STEADY:
            allocator.pin_steady()  # the traced pass and the experiments: the workers' mode
        say("profiling the workload with the trace...")
        run = profile_workload(workload, warmup=warmup, repeat=repeat, time_limit_s=time_limit_s, resolved=resolved)
        bundle_path = run.save(out / BUNDLE_DIR)
    out.mkdir(parents=True, exist_ok=True)
    params = {"bundle": str(bundle_path), "title": title or f"workbench report: {run.name}", "experiments": ""}
    summary: dict[str, Any] = {
        "timing": timing_summary(run),
        "workload": run.name,
        "bundle": str(bundle_path),
        "template": str(template_path),
        "created_at": datetime.now(timezone.utc).isoformat(),
        "samples": samples.to_dict() if samples is not None else None,
    }
    if bundle is None:
        summary["allocator"] = allocator.current_mode().to_dict()
    if samples is None:
        summary["samples_note"] = (
            "no per-process samples: "
            + ("a report made from a bundle" if bundle is not None else "--processes 0")
            + "; this report cannot be a --compare-to baseline"
        )
    if bundle is None:
        if experiments:
            say("comparing the variants the hypotheses suggest with the workload...")
        path, summary["experiments"] = write_experiments(out, workload, run, enabled=experiments)
        params["experiments"] = str(path)
    say("executing the report notebook...")
    notebook = execute_template(template_path, out / NOTEBOOK_FILE, params)
    say("rendering the HTML page...")
    html_path = render_html(notebook, out / HTML_FILE)
    verdict = None
    if old is not None and samples is not None:
        verdict = gate(
            old,
            samples,
            threshold,
            allow_environment_change=allow_environment_change,
            old_report=str(compare_to),
            quantile=gate_quantile,
        )
        summary["regression"] = verdict.to_dict()
    (out / SUMMARY_FILE).write_text(json.dumps(summary, indent=1, default=str), encoding="utf-8")
    return ReportResult(
        out_dir=str(out),
        html_path=str(html_path),
        notebook_path=str(notebook),
        bundle_path=str(bundle_path),
        summary=summary,
        regression=verdict,
    )


def _refuse_other_environment(old: SampleSet, compare_to: str | Path, workload: str, allocator_mode: str) -> None:
    """Before anything runs: this machine against the environment the old report recorded."""
    from workbench.report.sampler import fresh_gate_environment

    diffs = environment_differences(
        old.environment, fresh_gate_environment(allocator_mode=allocator_mode)
    ) + workload_difference(old.workload, workload)
    if diffs:
        raise InvalidArgumentError(
            f"the report {str(compare_to)!r} was made in another environment or of another workload "
            f"({'; '.join(diffs)}), so a difference in time would say nothing about the code. Compare with a report from this machine "
            "and these settings, or pass --allow-environment-change to compare anyway (the differences "
            "are then printed with the verdict)"
        )
