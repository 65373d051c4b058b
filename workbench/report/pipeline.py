"""``workbench report``: profile a workload (or load a bundle), execute the template, render HTML.

Order matters for a CI gate: everything that can be checked without running the workload is
checked first (the threshold, the earlier report's samples and environment, the template, the
output folder), so a typo costs nothing and nothing is overwritten. Then the workload is timed in
``processes`` fresh processes (the gate's samples, ``workbench.report.sampler``), profiled once
in this process with the trace, the experiments run, the notebook is executed and rendered, and
last ``summary.json`` is written with the samples and, with ``compare_to``, the gate's verdict.

What is asked for is one ``ReportRequest`` (``workbench.report.request``), whose values are checked
when it is made; ``build_report(out_dir, workload=..., repeat=...)`` makes one from its options.
The workload string is resolved once, into the ``ResolvedWorkload`` the steps below are given (the
gate's worker processes resolve it again, each in its own fresh interpreter).

Every timed process, this one included, runs in one allocator mode (``allocator_mode``, default
``steady``: glibc malloc's thresholds pinned, ``workbench.capture.allocator``), so the headline,
the gate's samples and the Experiments section time the same steady state; with the adaptive
default the same code measured 1.6x apart between the headline and the experiments of one report.
"""

from __future__ import annotations

import json
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
    MIN_PROCESSES,
    SUMMARY_FILE,
    GateVerdict,
    SampleSet,
    environment_differences,
    gate,
    load_samples,
    workload_difference,
)
from workbench.report.render import render_html
from workbench.report.request import DEFAULT_PROCESSES, ReportRequest, ResolvedWorkload
from workbench.report.sections import timing_summary
from workbench.report.workload import run_guarded

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
    workload: str | ResolvedWorkload,
    *,
    warmup: int,
    repeat: int,
    time_limit_s: float | None = None,
) -> RunRecord:
    """Profile the workload with ``wb.profile`` (trace on) in this process; the workload's own
    failures become a ``WorkloadError``, ``time_limit_s`` a ``WorkloadTimeout``. ``workload``: the
    ``ResolvedWorkload`` the pipeline already made, or a ``module:function`` string, resolved here.
    The report keeps the run's record (``RunRecord``, with the environment fingerprint); the
    template reads the bundle back as the public ``ProfileRun`` (``wb.load_run``)."""
    from workbench.capture.profile import profile
    from workbench.devices.fingerprint import environment_fingerprint

    resolved = workload if isinstance(workload, ResolvedWorkload) else ResolvedWorkload.resolve(workload)
    return run_guarded(
        lambda: profile(
            resolved.function,
            *resolved.args,
            warmup=warmup,
            repeat=repeat,
            trace=True,
            name=resolved.spec,
            environment=environment_fingerprint(),
        ),
        f"the workload {resolved.spec!r}",
        time_limit_s,
    )


def _load_bundle(path: Path) -> RunRecord:
    if not path.exists():
        raise BundleError(
            f"run bundle {str(path)!r} does not exist; pass a folder written by "
            "ProfileRun.save() or by an earlier `workbench report` (its run/ folder)"
        )
    return RunRecord.load(path)


def _same_folder(a: Path, b: str | Path) -> bool:
    try:
        return a.resolve() == Path(b).resolve()
    except OSError:
        return False


def _quiet(_: str) -> None:
    pass


def build_report(
    request: ReportRequest | str | Path | None = None,
    *,
    progress: Callable[[str], None] | None = None,
    **options: Any,
) -> ReportResult:
    """Write ``run/`` (unless a bundle is given), ``experiments.json`` (``experiments`` and a
    workload: the variants its hypotheses suggest, compared with it), ``report.ipynb``,
    ``report.html`` and ``summary.json`` (with the clean samples of ``processes`` fresh processes,
    which a later report's ``compare_to`` gates against).

    ``request``: a ``ReportRequest`` (then no ``options``), or the ``out_dir`` of the one that
    ``ReportRequest(out_dir, **options)`` makes: ``build_report("reports/demo", repeat=50)``.
    See ``ReportRequest`` for each option (``allocator_mode``: ``steady`` pins glibc malloc's
    thresholds in every timed process, this one included for the rest of its life, glibc having no
    way back). ``progress`` receives one line per phase ("timing the workload in a fresh process
    (1/3)..."). Bad input raises before anything runs or is written; see the module docstring."""
    if isinstance(request, ReportRequest):
        if options:
            raise TypeError(
                f"build_report() takes a ReportRequest or keyword options, not both; got the options "
                f"{', '.join(sorted(options))} (use dataclasses.replace(request, ...) to change a request)"
            )
    elif request is None:
        request = ReportRequest(**options)
    elif "out_dir" in options:
        raise TypeError("build_report() got out_dir twice: as its first argument and as a keyword")
    else:
        request = ReportRequest(request, **options)
    return _build(request, progress or _quiet)


def _build(req: ReportRequest, say: Callable[[str], None]) -> ReportResult:
    """``build_report`` on a request already checked: the checks that need the file system, then
    the work, in the order of the module docstring."""
    allocator_mode = str(req.allocator_mode)  # the request resolved None to the mode it times in
    out = Path(req.out_dir).resolve()
    if out.exists() and not out.is_dir():
        raise ReportError(f"the report folder {str(out)!r} is a file; pass --out a folder")
    template_path = Path(req.template).resolve() if req.template else default_template()
    check_template(template_path)
    old = None
    if req.compare_to is not None:
        if _same_folder(out, req.compare_to):
            raise InvalidArgumentError(
                f"--out {str(req.out_dir)!r} is the --compare-to report itself; the new "
                "report would overwrite the one it is judged against. Pass another --out"
            )
        old = load_samples(req.compare_to)
        if old.n_processes < MIN_PROCESSES:
            raise InvalidArgumentError(
                f"the report {str(req.compare_to)!r} has samples from {old.n_processes} "
                f"process; the gate needs at least {MIN_PROCESSES} per report to see "
                "the spread between processes. Re-make it with --processes 3 or more"
            )
        if not req.allow_environment_change:
            _refuse_other_environment(old, req.compare_to, req.workload, allocator_mode)
    workload: ResolvedWorkload | None = None
    if req.bundle is not None:
        bundle_path = Path(req.bundle).resolve()
        run = _load_bundle(bundle_path)
        samples = None
    else:
        # resolved once, here: an unknown workload is bad input, found before any process starts
        workload = ResolvedWorkload.resolve(req.workload)
        samples = None
        if req.processes:
            from workbench.report.sampler import sample_processes

            samples = sample_processes(
                workload.spec,  # each fresh process resolves the string in its own interpreter
                processes=req.processes,
                warmup=req.warmup,
                repeat=req.repeat,
                time_limit_s=req.time_limit_s,
                allocator_mode=allocator_mode,
                progress=say,
            )
        if allocator_mode == allocator.STEADY:
            allocator.pin_steady()  # the traced pass and the experiments: the workers' mode
        say("profiling the workload with the trace...")
        run = profile_workload(workload, warmup=req.warmup, repeat=req.repeat, time_limit_s=req.time_limit_s)
        bundle_path = run.save(out / BUNDLE_DIR)
    out.mkdir(parents=True, exist_ok=True)
    params = {"bundle": str(bundle_path), "title": req.title or f"workbench report: {run.name}", "experiments": ""}
    summary: dict[str, Any] = {
        "timing": timing_summary(run),
        "workload": run.name,
        "bundle": str(bundle_path),
        "template": str(template_path),
        "created_at": datetime.now(timezone.utc).isoformat(),
        "samples": samples.to_dict() if samples is not None else None,
    }
    if workload is not None:
        summary["allocator"] = allocator.current_mode().to_dict()
    if samples is None:
        summary["samples_note"] = (
            "no per-process samples: "
            + ("a report made from a bundle" if workload is None else "--processes 0")
            + "; this report cannot be a --compare-to baseline"
        )
    if workload is not None:
        if req.experiments:
            say("comparing the variants the hypotheses suggest with the workload...")
        path, summary["experiments"] = write_experiments(
            out, workload.spec, run, enabled=req.experiments, resolved=(workload.function, workload.args)
        )
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
            req.fail_on_regression_pct,
            allow_environment_change=req.allow_environment_change,
            old_report=str(req.compare_to),
            quantile=req.gate_quantile,
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
