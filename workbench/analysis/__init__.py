"""Analyses: pure functions from a Trace's tables to frozen results (``.table`` plus statistics,
``to_dict()`` / ``from_dict()``). No torch, IPython or altair here.

Every function takes the Trace first and ``semantics``: ``"workbench"`` (default, right), or ``"hta"`` /
``"hta_noround"`` to reproduce Holistic Trace Analysis 0.5's numbers on the same trace (its float64
timestamps and rounding, its dropping of the last ProfilerStep, its kernel classification and launch-API
list, its interval merge); these match its CSVs on all eleven shared trace sets to 0.01 µs.
"""

from __future__ import annotations

from workbench.analysis.copies import CopyStats, copy_stats
from workbench.analysis.critical_path import (
    CollectiveWaits,
    CriticalPath,
    WhatIf,
    collective_waits,
    critical_path,
    critical_paths,
    what_if,
)
from workbench.analysis.idle import IdleBreakdown, idle_breakdown
from workbench.analysis.kernels import KernelBreakdown, kernel_breakdown
from workbench.analysis.launches import LaunchStats, launch_stats
from workbench.analysis.ops import OpBreakdown, op_breakdown
from workbench.analysis.semantics import HTA, HTA_NOROUND, WORKBENCH, Semantics
from workbench.analysis.steps import StepBreakdown, step_breakdown
from workbench.analysis.stragglers import Stragglers, stragglers
from workbench.analysis.syncs import SyncAudit, sync_audit
from workbench.analysis.temporal import CommOverlap, TemporalBreakdown, comm_overlap, temporal_breakdown
from workbench.analysis.work import AnalyticWork, analytic_work, op_work

__all__ = [
    "op_breakdown",
    "kernel_breakdown",
    "temporal_breakdown",
    "idle_breakdown",
    "launch_stats",
    "comm_overlap",
    "copy_stats",
    "sync_audit",
    "stragglers",
    "step_breakdown",
    "analytic_work",
    "op_work",
    "critical_path",
    "critical_paths",
    "what_if",
    "collective_waits",
    "CriticalPath",
    "WhatIf",
    "CollectiveWaits",
    "OpBreakdown",
    "KernelBreakdown",
    "TemporalBreakdown",
    "IdleBreakdown",
    "LaunchStats",
    "CommOverlap",
    "CopyStats",
    "SyncAudit",
    "Stragglers",
    "StepBreakdown",
    "AnalyticWork",
    "Semantics",
    "WORKBENCH",
    "HTA",
    "HTA_NOROUND",
]
