"""What a report is asked for (``ReportRequest``), checked once, and the workload it names,
resolved once (``ResolvedWorkload``).

``build_report(request)`` takes one ``ReportRequest``; the keyword form
``build_report(out_dir, workload=..., repeat=...)`` builds one from its options. A request checks
its values when it is made (the counts, the regression threshold, the gate's quantile, the time
limit, the allocator mode, and the options that only mean something together, such as
``fail_on_regression_pct`` without ``compare_to``), so a bad value is an ``InvalidArgumentError``
before anything runs. What needs the file system (the template, the earlier report, the output
folder) is checked by ``build_report``, still before anything runs.

The pipeline resolves the request's workload string (import the module, look up the function,
make its inputs) once, into a ``ResolvedWorkload`` it passes down. The gate's worker processes
resolve the string again, each in its own fresh interpreter: that is what they are for.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import workbench.capture.allocator as allocator
from workbench.errors import InvalidArgumentError
from workbench.report.regression import GATE_QUANTILE, MIN_PROCESSES, check_threshold
from workbench.report.workload import DEFAULT_WORKLOAD, resolve_workload

DEFAULT_PROCESSES = 3


def _count(name: str, value: Any, minimum: int, meaning: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise InvalidArgumentError(
            f"{name} must be an integer >= {minimum} ({meaning}; --{name} on the command line); got {value!r}"
        )


def _flag(name: str, value: Any) -> None:
    if not isinstance(value, bool):
        raise InvalidArgumentError(f"{name} must be True or False; got {value!r}")


def _path(name: str, value: Any, *, optional: bool = True) -> Path | None:
    if value is None and optional:
        return None
    if isinstance(value, (str, os.PathLike)) and str(value):
        return Path(value)
    what = "a path (a str or a pathlib.Path)" + (" or None" if optional else "")
    raise InvalidArgumentError(f"{name} must be {what}; got {value!r}")


def _number(value: Any) -> bool:
    return not isinstance(value, bool) and isinstance(value, (int, float))


@dataclass(frozen=True)
class ReportRequest:
    """Everything ``build_report`` is asked to do, checked when made (see the module docstring).

    ``out_dir``: the folder the report is written into. ``workload``: ``module:function`` to
    profile (ignored with ``bundle``, a saved run bundle to report on instead). ``template``: the
    notebook (None: ``templates/report.ipynb``). ``warmup`` and ``repeat``: untimed and timed
    calls, in each timed process and in the traced run. ``processes``: fresh processes that time
    the workload's clean calls for the gate (0: none, and the report cannot be a baseline).
    ``compare_to``: an earlier report to gate against, with ``fail_on_regression_pct`` (a
    percentage >= 0; inf: report the change, fail on none), ``gate_quantile`` (the quantile of
    each process's calls the gate compares, in [0, 1)) and ``allow_environment_change``.
    ``time_limit_s``: seconds a workload may run per process and in the traced run (None: no
    limit). ``experiments``: compare the variants the hypotheses suggest with the workload.
    ``allocator_mode``: ``steady`` or ``default`` (``workbench.capture.allocator``); None reads
    ``$WORKBENCH_ALLOCATOR`` when the request is made (steady when unset), so a made request
    always holds the mode it will time in.

    Paths are kept as ``pathlib.Path`` (not resolved: ``build_report`` resolves them), numbers as
    ``float``, so the same options always make equal requests.
    """

    out_dir: str | Path
    workload: str = DEFAULT_WORKLOAD
    bundle: str | Path | None = None
    template: str | Path | None = None
    warmup: int = 3
    repeat: int = 20
    compare_to: str | Path | None = None
    fail_on_regression_pct: float = math.inf
    title: str | None = None
    experiments: bool = True
    processes: int = DEFAULT_PROCESSES
    time_limit_s: float | None = None
    allow_environment_change: bool = False
    gate_quantile: float = GATE_QUANTILE
    allocator_mode: str | None = None

    def __post_init__(self) -> None:
        put = lambda name, value: object.__setattr__(self, name, value)  # the dataclass is frozen
        put("out_dir", _path("out_dir", self.out_dir, optional=False))
        for name in ("bundle", "template", "compare_to"):
            put(name, _path(name, getattr(self, name)))
        if not isinstance(self.workload, str) or not self.workload:
            raise InvalidArgumentError(
                f"workload must be a string module:function (for example {DEFAULT_WORKLOAD}); got {self.workload!r}"
            )
        if self.title is not None and not isinstance(self.title, str):
            raise InvalidArgumentError(
                f"title must be a string or None (None: 'workbench report: <workload>'); got {self.title!r}"
            )
        _count("repeat", self.repeat, 1, "the timed calls")
        _count("warmup", self.warmup, 0, "the untimed calls before timing")
        _count("processes", self.processes, 0, "the fresh processes that time the workload for the gate; 0: none")
        for name in ("experiments", "allow_environment_change"):
            _flag(name, getattr(self, name))
        put("fail_on_regression_pct", check_threshold(self.fail_on_regression_pct))
        if math.isfinite(self.fail_on_regression_pct) and self.compare_to is None:
            raise InvalidArgumentError(
                "--fail-on-regression needs --compare-to OLD_REPORT_DIR: the threshold is "
                "how much slower than the earlier report fails the gate"
            )
        if not _number(self.gate_quantile) or not 0 <= self.gate_quantile < 1:
            raise InvalidArgumentError(
                f"--gate-quantile takes a number in [0, 1) (0.1: each process's 10th percentile; "
                f"0.5: its median); got {self.gate_quantile!r}"
            )
        put("gate_quantile", float(self.gate_quantile))
        if self.allow_environment_change and self.compare_to is None:
            raise InvalidArgumentError(
                "--allow-environment-change needs --compare-to OLD_REPORT_DIR: it lets the gate "
                "compare with a report from another environment"
            )
        if self.time_limit_s is not None:
            if not _number(self.time_limit_s) or not self.time_limit_s > 0:
                raise InvalidArgumentError(
                    f"--time-limit takes a number of seconds > 0 (or no limit: None); got {self.time_limit_s!r}"
                )
            put("time_limit_s", float(self.time_limit_s))
        put("allocator_mode", allocator.requested_mode(self.allocator_mode))
        if self.compare_to is not None:
            if self.bundle is not None:
                raise InvalidArgumentError(
                    "--compare-to needs the new report's samples from fresh processes, "
                    "and a --bundle report has none; report on --workload instead"
                )
            if self.processes < MIN_PROCESSES:
                raise InvalidArgumentError(
                    f"--compare-to needs --processes >= {MIN_PROCESSES} (the spread between "
                    f"processes is what the gate judges); got {self.processes}"
                )


@dataclass(frozen=True)
class ResolvedWorkload:
    """A workload string resolved once: the function and the arguments it is called with.

    ``spec`` is the string as asked (the run's name, what an earlier report's workload is compared
    with, and what the gate's worker processes resolve afresh in their own interpreters)."""

    spec: str
    function: Callable[..., Any]
    args: tuple[Any, ...]

    @classmethod
    def resolve(cls, spec: str) -> ResolvedWorkload:
        """``resolve_workload(spec)``: import the module, look the function up, make its inputs;
        an unknown workload is an ``InvalidArgumentError``, a module that fails a ``WorkloadError``."""
        function, args = resolve_workload(spec)
        return cls(spec, function, args)
