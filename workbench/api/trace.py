"""The public ``Trace`` (``wb.Trace``, what ``wb.load_trace`` returns): a trace's tables plus one
method per analysis and the diagnosis, each a line of delegation to ``workbench.analysis`` or
``workbench.hypotheses`` (the face layer of DESIGN.md: it calls the library and holds no logic).

    trace = wb.load_trace("trace.json.gz")          # a file, a folder of rank files, or a list
    trace.kernel_breakdown().table                  # time per kernel name and per kernel type
    trace.idle_breakdown(kernel_wait_threshold_us=50).table
    trace.hypotheses()                              # ranked, best first

One type whatever the source: a folder of many rank files read by worker processes (or a Dask cluster)
is a ``Trace`` too, whose backend (``trace.rank_folder``, a ``workbench.api.rank_folder.RankFolder``)
answers the breakdowns and the diagnosis from per-rank summaries and reads the tables into this
process only when something asks for them (``trace.kernels``, ``trace.module_breakdown()``: said in a
warning); ``trace.rank(r)`` reads one rank.

Every method takes ``semantics``: ``"workbench"`` (the default), ``"hta"`` / ``"hta_noround"`` to
count as Holistic Trace Analysis 0.5 does on the same trace, or a ``workbench.analysis.Semantics``.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import workbench.analysis.attribution as attribution
import workbench.analysis.memory as memory_analysis
from workbench import analysis, render
from workbench.analysis import (
    CommOverlap,
    CopyStats,
    IdleBreakdown,
    KernelBreakdown,
    LaunchStats,
    OpBreakdown,
    Semantics,
    StepBreakdown,
    Stragglers,
    SyncAudit,
    TemporalBreakdown,
)
from workbench.analysis.attribution import ModuleBreakdown, SourceBreakdown
from workbench.analysis.critical_path import CollectiveWaits, CriticalPath, WhatIf
from workbench.analysis.diff import TraceDiff
from workbench.analysis.idle import KERNEL_WAIT_THRESHOLD_US
from workbench.analysis.memory import MemoryGrowth, MemoryPeak, MemoryTimeline
from workbench.analysis.stragglers import STRAGGLER_MIN_WAIT_FRACTION
from workbench.hypotheses import Diagnosis, Hypothesis, diagnose
from workbench.trace import TraceData, TraceMeta, read_trace
from workbench.trace.fidelity import require

if TYPE_CHECKING:
    import pandas as pd
    from distributed import Client

    from workbench.api.rank_folder import RankFolder

__all__ = ["Diff", "Trace", "diff", "load_trace"]

TraceSource = str | os.PathLike[str] | Sequence[str | os.PathLike[str]]

# what each analysis needs that another tool's format may lack (tables, or "table.column"; the trace's
# meta.fidelity names what its format lacks): the method says "not available from <format>: ..." instead
NEEDS: dict[str, tuple[str, ...]] = {
    "op_breakdown": ("cpu_ops",),
    "kernel_breakdown": ("kernels",),
    "temporal_breakdown": ("kernels",),
    "idle_breakdown": ("kernels", "kernels.launch_ts_us"),
    "launch_stats": ("runtime",),
    "comm_overlap": ("kernels",),
    "copy_stats": ("kernels",),
    "sync_audit": ("runtime",),
    "stragglers": ("kernels",),
    "step_breakdown": ("annotations", "annotations.step", "kernels.launch_ts_us"),  # kernels counted by launch
    "module_breakdown": ("python_calls",),
    "source_breakdown": ("python_calls",),
}


def load_trace(
    source: TraceSource,
    *,
    hta_compat: bool = False,
    round_ns: bool | None = None,
    drop_last_step: bool | None = None,
    cache: bool = True,
    workers: int | None = None,
    client: Client | None = None,
    partial: bool = False,
) -> Trace:
    """Load a Kineto/Chrome trace: a ``.json``/``.json.gz`` file, a folder of rank files, or a list; or one
    Nsight Systems SQLite export (``nsys export --type sqlite``) or rocprofv3 JSON file (the format is judged by
    content; ``trace.meta.source`` names it and ``trace.meta.fidelity`` what it cannot provide).

    Args:
        source: a trace file, a folder of per-rank trace files, or a list of files.
        hta_compat: read as Holistic Trace Analysis does (both options below).
        round_ns: ``ts = ceil(ts)``, ``end = floor(ts + dur)`` in µs (default: ``hta_compat``).
        drop_last_step: with two or more ``ProfilerStep#`` annotations, drop the last step
            (default: ``hta_compat``).
        cache: read the tables from the columnar cache when the files are unchanged since they
            were cached, and write them there after a fresh read (``$WORKBENCH_CACHE_DIR``, else
            ``~/.cache/workbench``; ``workbench.trace.cache``). ``False`` always decodes the files.
        workers: processes that read the trace. For many rank files: worker processes that each read and
            analyse ranks (``None``: one per core, at most one per rank, bounded by free memory). For one
            file (or rank files read here): processes that decode a large file in byte ranges (``None``: one
            per core for a plain JSON file of 96 MB or more; ``n``: n for any plain file over 8 MB; the
            tables are the same). ``1``: this process only, every table here.
        client: a ``distributed.Client``: the ranks are read and analysed on that Dask cluster.
        partial: keep the other ranks when a worker dies or its analysis fails (named in a warning).

    Returns:
        Trace: the tables (``cpu_ops``, ``runtime``, ``kernels``, ...) and the analyses over them; for
        rank files read by workers the same type, its analyses answered from per-rank summaries
        (``trace.rank_folder``; ``trace.rank(r)`` reads one rank's tables, the tables all ranks' on first use).

    Raises ``TraceFormatError`` for a file that cannot be read as a trace; warns (``TraceWarning``)
    where the trace is usable but something was odd, saying what was done.
    """
    from workbench.api.rank_folder import mapped_load

    options = {
        "round_ns": hta_compat if round_ns is None else round_ns,
        "drop_last_step": hta_compat if drop_last_step is None else drop_last_step,
    }
    mapped = mapped_load(source, options=options, cache=cache, workers=workers, client=client, partial=partial)
    if mapped is not None:
        return Trace.over_folder(mapped)
    return Trace.of(
        read_trace(
            source,
            hta_compat=hta_compat,
            round_ns=round_ns,
            drop_last_step=drop_last_step,
            cache=cache,
            decode_workers=workers,
        )
    )


def load_memory_snapshot(path: str | os.PathLike[str]) -> Trace:
    """A ``torch.cuda.memory._snapshot()`` pickle as a Trace whose ``memory`` table holds the allocator's
    history (``trace.memory_timeline()``, ``trace.memory_peak()``). Read with a restricted unpickler: no code
    from the pickle runs; a pickle naming anything but plain data raises ``SnapshotError``."""
    from workbench.trace.memory_snapshot import snapshot_trace

    return Trace.of(snapshot_trace(path))


class Trace(TraceData):
    """A loaded trace: its tables (see ``workbench.trace.TraceData`` and ``workbench.trace.schema``)
    and the analyses and diagnosis over them. ``trace.rank(r)`` is the same for one rank.

    ``rank_folder``: the rank-folder backend when the ranks were read by workers (the breakdowns and the
    diagnosis come from its per-rank summaries; the tables are read here on first use), else None."""

    def __init__(self, tables: dict[str, pd.DataFrame], meta: TraceMeta, *, folder: RankFolder | None = None):
        self._own_tables: dict[str, pd.DataFrame] | None = None
        self.rank_folder = folder
        super().__init__(tables, meta)

    @classmethod
    def over_folder(cls, folder: RankFolder) -> Trace:
        """The Trace of a rank folder read by workers (``wb.load_trace`` makes it)."""
        return cls({}, folder.meta, folder=folder)

    @property
    def _tables(self) -> dict[str, pd.DataFrame]:  # a folder's: every rank's, read here on first use
        if self.rank_folder is not None:
            return self.rank_folder.full()._tables
        return self._own_tables  # type: ignore[return-value]

    @_tables.setter
    def _tables(self, tables: dict[str, pd.DataFrame]) -> None:
        self._own_tables = tables

    @property
    def read_in(self) -> str:
        """Where the trace was read: ``"this process"``, ``"processes"`` (one worker per rank file) or ``"dask"``."""
        return self.rank_folder.where if self.rank_folder is not None else "this process"

    @property
    def failures(self) -> tuple:
        """The rank files a worker could not read or analyse (``partial=True`` kept the others)."""
        return self.rank_folder.failures if self.rank_folder is not None else ()

    # --- description, from the summaries where there are some -------------------------------
    def rank(self, rank: int) -> Trace:
        """One rank's tables (for a folder read by workers, read into this process on demand).

        Args:
            rank: the rank number (``trace.ranks``).

        Returns:
            Trace: that rank alone.
        """
        if self.rank_folder is not None:
            return Trace.of(self.rank_folder.rank(rank))
        return super().rank(rank)

    @property
    def has_gpu(self) -> bool:
        return self.rank_folder.has_gpu if self.rank_folder is not None else super().has_gpu

    def span_us(self) -> float:
        """From the earliest start to the latest end, in µs (a rank folder's: its longest rank's).

        Args:
            (none): every table of the trace (a rank folder: its rank summaries).

        Returns:
            float: µs; 0.0 for a trace with no events.
        """
        return self.rank_folder.span_us() if self.rank_folder is not None else super().span_us()

    def event_count(self) -> int:
        """Events over every rank.

        Args:
            (none): every table of the trace (a rank folder: its rank summaries).

        Returns:
            int: the count.
        """
        return self.rank_folder.event_count() if self.rank_folder is not None else super().event_count()

    def summary(self) -> str:
        """One line: ranks, events, span, CPU only or GPU (and which), warnings.

        Args:
            (none): the whole trace (a rank folder's line also says where its ranks were read).

        Returns:
            str: the line.
        """
        return self.rank_folder.summary() if self.rank_folder is not None else super().summary()

    # --- analyses (workbench.analysis) ----------------------------------------------------
    def op_breakdown(self, semantics: Semantics | str = "workbench") -> OpBreakdown:
        """CPU ops by self time: calls, self and total time, share, most common input shapes.

        Args:
            semantics: how to count (``"workbench"``, ``"hta"``, ``"hta_noround"`` or a Semantics).

        Returns:
            OpBreakdown: ``.table``, one row per op name sorted by self time (count, self_us,
            total_us, mean_us, mean_self_us, pct, top_input_dims, top_input_types), and
            ``.total_self_us``.
        """
        require(self.meta, NEEDS["op_breakdown"])  # a format without them says so (workbench.trace.fidelity)
        if self.rank_folder is not None:  # from the per-rank summaries
            return self.rank_folder.op_breakdown(semantics)
        return analysis.op_breakdown(self, semantics)

    def kernel_breakdown(self, semantics: Semantics | str = "workbench") -> KernelBreakdown:
        """GPU time per kernel name and per kernel type (computation / communication / memory).

        Args:
            semantics: how to count (``"workbench"``, ``"hta"``, ``"hta_noround"`` or a Semantics).

        Returns:
            KernelBreakdown: ``.table``, one row per (rank, kernel_type, name) with count, sum, mean,
            min, max, std (µs) and pct of the rank's kernel time; ``.types``, time per type and
            "<a> overlapping <b>" rows; ``.total_kernel_us`` and ``.busy_us``.
        """
        require(self.meta, NEEDS["kernel_breakdown"])  # a format without them says so (workbench.trace.fidelity)
        if self.rank_folder is not None:  # from the per-rank summaries
            return self.rank_folder.kernel_breakdown(semantics)
        return analysis.kernel_breakdown(self, semantics)

    def temporal_breakdown(self, semantics: Semantics | str = "workbench") -> TemporalBreakdown:
        """Per rank: idle, compute and non-compute time over the span of GPU activity.

        Args:
            semantics: how to count (``"workbench"``, ``"hta"``, ``"hta_noround"`` or a Semantics).

        Returns:
            TemporalBreakdown: ``.table``, one row per rank: kernel_time_us, idle_us, compute_us,
            non_compute_us and each as a percentage of kernel time.
        """
        require(self.meta, NEEDS["temporal_breakdown"])  # a format without them says so (workbench.trace.fidelity)
        if self.rank_folder is not None:  # from the per-rank summaries
            return self.rank_folder.temporal_breakdown(semantics)
        return analysis.temporal_breakdown(self, semantics)

    def idle_breakdown(
        self, semantics: Semantics | str = "workbench", kernel_wait_threshold_us: float = KERNEL_WAIT_THRESHOLD_US
    ) -> IdleBreakdown:
        """Idle time per stream, split into host wait, kernel wait and other (as HTA defines them).

        Args:
            semantics: how to count (``"workbench"``, ``"hta"``, ``"hta_noround"`` or a Semantics).
            kernel_wait_threshold_us: a gap shorter than this, with the launch already made, is
                kernel wait (back-to-back launch latency); longer is other.

        Returns:
            IdleBreakdown: ``.table``, one row per (rank, stream, idle_category) with idle_us, count
            and ratio; ``.gaps``, one row per gap.
        """
        require(self.meta, NEEDS["idle_breakdown"])  # a format without them says so (workbench.trace.fidelity)
        if self.rank_folder is not None:  # from the per-rank summaries
            return self.rank_folder.idle_breakdown(semantics, kernel_wait_threshold_us)
        return analysis.idle_breakdown(self, semantics, kernel_wait_threshold_us=kernel_wait_threshold_us)

    def launch_stats(self, semantics: Semantics | str = "workbench") -> LaunchStats:
        """Every call that put work on the GPU: its CPU time, the GPU time it launched, the delay.

        Args:
            semantics: how to count (``"workbench"``, ``"hta"``, ``"hta_noround"`` or a Semantics).

        Returns:
            LaunchStats: ``.table``, one row per launch (api, runtime_us, gpu_us, launch_delay_us,
            shorter_than_launch); ``.by_api``; ``.n_launches``, ``.n_shorter_than_launch``.
        """
        require(self.meta, NEEDS["launch_stats"])  # a format without them says so (workbench.trace.fidelity)
        if self.rank_folder is not None:  # from the per-rank summaries
            return self.rank_folder.launch_stats(semantics)
        return analysis.launch_stats(self, semantics)

    def comm_overlap(self, semantics: Semantics | str = "workbench") -> CommOverlap:
        """Per rank: how much communication the computation hides.

        Args:
            semantics: how to count (``"workbench"``, ``"hta"``, ``"hta_noround"`` or a Semantics).

        Returns:
            CommOverlap: ``.table``, one row per rank: comm_us, compute_us, overlap_us, overlap_pct
            (NaN without communication kernels) and exposed_comm_us.
        """
        require(self.meta, NEEDS["comm_overlap"])  # a format without them says so (workbench.trace.fidelity)
        if self.rank_folder is not None:  # from the per-rank summaries
            return self.rank_folder.comm_overlap(semantics)
        return analysis.comm_overlap(self, semantics)

    def copy_stats(self, semantics: Semantics | str = "workbench") -> CopyStats:
        """Copies per direction and host memory (pageable / pinned): count, bytes, time, bandwidth.

        Args:
            semantics: how to count (``"workbench"``, ``"hta"``, ``"hta_noround"`` or a Semantics).

        Returns:
            CopyStats: ``.table``, one row per (rank, kind, direction, host_memory) with count, bytes,
            dur_us, gbps, median_gbps; ``.pageable_bytes``, ``.total_copy_us``.
        """
        require(self.meta, NEEDS["copy_stats"])  # a format without them says so (workbench.trace.fidelity)
        if self.rank_folder is not None:  # from the per-rank summaries
            return self.rank_folder.copy_stats(semantics)
        return analysis.copy_stats(self, semantics)

    def sync_audit(self, semantics: Semantics | str = "workbench") -> SyncAudit:
        """Every host-side wait on the device, how long it blocked, and the CPU op that caused it.

        Args:
            semantics: how to count (``"workbench"``, ``"hta"``, ``"hta_noround"`` or a Semantics).

        Returns:
            SyncAudit: ``.table``, one row per wait (api, kind, blocked_us, op, cause_op);
            ``.by_cause``; ``.blocked_us``.
        """
        require(self.meta, NEEDS["sync_audit"])  # a format without them says so (workbench.trace.fidelity)
        if self.rank_folder is not None:  # from the per-rank summaries
            return self.rank_folder.sync_audit(semantics)
        return analysis.sync_audit(self, semantics)

    def stragglers(
        self, semantics: Semantics | str = "workbench", min_wait_fraction: float = STRAGGLER_MIN_WAIT_FRACTION
    ) -> Stragglers:
        """The ranks the others wait for in collectives (the least communication time).

        Args:
            semantics: how to count (``"workbench"``, ``"hta"``, ``"hta_noround"`` or a Semantics).
            min_wait_fraction: the others' median extra communication time, as a fraction of the
                median communication time, above which a rank is a straggler.

        Returns:
            Stragglers: ``.table``, one row per rank (busy_us, compute_us, comm_us, comm_deficit_us,
            is_straggler); ``.stragglers``; ``.wait_caused_us``; ``.reason`` when there are none.
        """
        require(self.meta, NEEDS["stragglers"])  # a format without them says so (workbench.trace.fidelity)
        if self.rank_folder is not None:  # from the per-rank summaries
            return self.rank_folder.stragglers(semantics, min_wait_fraction)
        return analysis.stragglers(self, semantics, min_wait_fraction=min_wait_fraction)

    def step_breakdown(self, semantics: Semantics | str = "workbench") -> StepBreakdown:
        """Per ``ProfilerStep#N`` on each rank: CPU duration and the GPU work it launched.

        Args:
            semantics: how to count (``"workbench"``, ``"hta"``, ``"hta_noround"`` or a Semantics).

        Returns:
            StepBreakdown: ``.table``, one row per (rank, step): dur_us, gpu_busy_us, gpu_idle_us,
            compute_us, comm_us, memory_us, n_kernels; ``.median_step_us``.
        """
        require(self.meta, NEEDS["step_breakdown"])  # a format without them says so (workbench.trace.fidelity)
        if self.rank_folder is not None:  # from the per-rank summaries
            return self.rank_folder.step_breakdown(semantics)
        return analysis.step_breakdown(self, semantics)

    def module_breakdown(
        self, *, basis: str = "auto", calls: int | None = None, scale: float = 1.0, top: int = attribution.TOP_ITEMS
    ) -> ModuleBreakdown:
        """Op and kernel time per ``nn.Module`` path, inclusive and self (TensorBoard's module view).

        Needs the trace's Python events (``torch.profiler.profile(with_stack=True,
        with_modules=True)``; ``wb.profile`` records them); without them ``.not_recorded`` says why.

        Args:
            basis: what is attributed: ``"kernel"`` (GPU time, through each kernel's launch),
                ``"cpu_op"`` (CPU op self time) or ``"auto"`` (kernel time when the trace has any).
            calls: profiled calls the trace covers, for the per-call columns (default: its
                ``ProfilerStep#`` annotations, else 1).
            scale: factor from the trace's times to clean times (``run.trace_scale``).
            top: ops or kernels kept per module in ``.items``.

        Returns:
            ModuleBreakdown: ``.table``, one row per module path in tree order (path, depth,
            count, inclusive_us, self_us, their pct and ms per call, cpu_op_us, kernel_us,
            wall_us, backward_us: the backward of the module's ops, linked by autograd's sequence
            numbers); ``.items``, the top ops or kernels under each path; ``.outside_us`` (time in
            no module's scope) and its parts ``.backward_us`` (some module's backward) and
            ``.optimizer_us`` (inside ``Optimizer.step``).
        """
        require(self.meta, NEEDS["module_breakdown"])  # a format without them says so (workbench.trace.fidelity)
        return attribution.module_breakdown(self, basis=basis, calls=calls, scale=scale, top=top)

    def source_breakdown(
        self,
        *,
        basis: str = "auto",
        calls: int | None = None,
        scale: float = 1.0,
        top: int = attribution.TOP_ITEMS,
        user_paths: Sequence[str] | None = None,
    ) -> SourceBreakdown:
        """Op and kernel time per line of the user's code: the innermost frame in the user's files
        (not torch's, the standard library's or a site-package's), as ``group_by_stack_n`` grouped.

        Args:
            basis: ``"kernel"``, ``"cpu_op"`` or ``"auto"``, as for ``module_breakdown``.
            calls: profiled calls the trace covers, for the per-call columns.
            scale: factor from the trace's times to clean times (``run.trace_scale``).
            top: ops or kernels kept per source location in ``.items``.
            user_paths: file path prefixes or suffixes that are the user's code; by default
                every file outside torch, the standard library and site-packages is.

        Returns:
            SourceBreakdown: ``.table``, one row per location (``file.py:123 in fn``; the line is
            the function's first line) with self_us, inclusive_us, their pct and ms per call;
            ``.items``; ``.not_recorded`` when the trace has no Python events.
        """
        require(self.meta, NEEDS["source_breakdown"])  # a format without them says so (workbench.trace.fidelity)
        return attribution.source_breakdown(self, basis=basis, calls=calls, scale=scale, top=top, user_paths=user_paths)

    def critical_path(
        self,
        annotation: str = "ProfilerStep",
        instance: int = 0,
        rank: int | None = None,
        *,
        window: tuple[float, float] | None = None,
        semantics: Semantics | str = "workbench",
    ) -> CriticalPath:
        """The longest dependent path through one step (HTA's dependency model): what the step is bound by.

        Args:
            annotation: the range to follow: ``"ProfilerStep"``, any ``record_function`` or NVTX range name
                (matched as a substring), or ``""`` for the whole trace.
            instance: which occurrence of the annotation on the rank (0: the first).
            rank: the rank (default: the trace's first).
            window: ``(start_us, end_us)`` instead of an annotation.
            semantics: ``"workbench"``, or ``"hta"`` / ``"hta_noround"`` to build HTA's graph exactly.

        Returns:
            CriticalPath: ``.table``, the edges on the path (kind, time, name, stream, module, source line);
            ``.length_us``, ``.step_us``, ``.shares_pct`` per kind, ``.bound_by``, ``.notes`` when partial.
        """
        if self.rank_folder is not None and not self.rank_folder.read_all:  # one rank's tables, read here
            r = self.ranks[0] if rank is None else rank
            return self.rank(r).critical_path(annotation, instance, r, window=window, semantics=semantics)
        return analysis.critical_path(self, annotation, instance, rank, window, semantics)

    def what_if(
        self,
        changes: dict[str, float] | None = None,
        *,
        remove_gaps: bool = False,
        annotation: str = "ProfilerStep",
        instance: int = 0,
        rank: int | None = None,
        window: tuple[float, float] | None = None,
        semantics: Semantics | str = "workbench",
    ) -> WhatIf:
        """Shrink the named work on the critical path's graph and recompute it: the new step time and bound.

        Args:
            changes: ``{"kernel or op pattern": factor}``; a regular expression searched in the names,
                and the factor on their time (0.5: twice as fast, 0: gone).
            remove_gaps: launch delays and GPU idle gaps take no time.
            annotation: the range to follow, as for ``critical_path``.
            instance: which occurrence of it.
            rank: the rank (default: the trace's first).
            window: ``(start_us, end_us)`` instead of an annotation.
            semantics: ``"workbench"``, ``"hta"`` or ``"hta_noround"``.

        Returns:
            WhatIf: ``.before`` and ``.after`` (CriticalPath), ``.saved_us``, ``.new_step_us`` and
            ``.table``, one row per pattern (events matched, their time, their time on the path).
        """
        if self.rank_folder is not None and not self.rank_folder.read_all:  # one rank's tables, read here
            r = self.ranks[0] if rank is None else rank
            return self.rank(r).what_if(
                changes,
                remove_gaps=remove_gaps,
                annotation=annotation,
                instance=instance,
                rank=r,
                window=window,
                semantics=semantics,
            )
        return analysis.what_if(
            self,
            changes,
            remove_gaps=remove_gaps,
            annotation=annotation,
            instance=instance,
            rank=rank,
            window=window,
            semantics=semantics,
        )

    def collective_waits(
        self, annotation: str = "ProfilerStep", instance: int = 0, *, semantics: Semantics | str = "workbench"
    ) -> CollectiveWaits:
        """Each rank's critical path of one step and, per collective, which rank's path the others wait on.

        Args:
            annotation: the range to follow on every rank (as for ``critical_path``).
            instance: which occurrence of it.
            semantics: ``"workbench"``, ``"hta"`` or ``"hta_noround"``.

        Returns:
            CollectiveWaits: ``.table``, one row per collective (waits_on, wait_us, on_path_ranks);
            ``.paths``, {rank: CriticalPath}; ``.notes``.
        """
        return analysis.collective_waits(self, annotation, instance, semantics)

    # --- memory (workbench.analysis.memory) ------------------------------------------------
    def memory_timeline(self) -> MemoryTimeline:
        """Allocated (and reserved) bytes over time per device, from the trace's allocator events.

        Args:
            (none): every device and rank of the trace.

        Returns:
            MemoryTimeline: per device, the allocated (and reserved) bytes at each event; the recorded totals where
            the trace has them (the peak is then exactly the largest ``Total Allocated``), else running sums.
        """
        return memory_analysis.memory_timeline(self)

    def memory_peak(self, *, roles: object = None, user_paths: Sequence[str] | None = None) -> MemoryPeak:
        """The peak per device and the blocks live at it.

        Args:
            roles: the tensors a run's capture named (parameters, gradients, optimizer state), as a frame or a list
                of records; None: categories from the op context only.
            user_paths: source files counted as the user's code for the source-line attribution.

        Returns:
            MemoryPeak: per device the peak, when it happens and the live blocks, each with the op, ``nn.Module``
            and source line that allocated it, its size, lifetime and category (``.top()``, ``.category_bytes()``,
            ``.notes``).
        """
        frame = memory_analysis.roles_frame(roles) if isinstance(roles, (list, tuple)) else roles
        return memory_analysis.memory_peak(self, roles=frame, user_paths=user_paths)

    def memory_growth(self) -> MemoryGrowth:
        """Allocated bytes across ``ProfilerStep#`` spans: what each step kept.

        Args:
            (none): every ``ProfilerStep#`` span of the trace.

        Returns:
            MemoryGrowth: per step the bytes allocated at its end against its start (a leak grows every step).
        """
        return memory_analysis.memory_growth(self)

    # --- diagnosis (workbench.hypotheses) -------------------------------------------------
    def hypotheses(self, rules: Iterable[str] | None = None) -> list[Hypothesis]:
        """Ranked hypotheses about where the time goes, best first; only rules with evidence fire.

        Args:
            rules: names of the rules to run (``workbench.hypotheses.list_rules()``); all by default.

        Returns:
            list[Hypothesis]: each with its category, evidence, time at stake and falsifier.
        """
        return list(self.diagnosis(rules).hypotheses)

    def diagnosis(self, rules: Iterable[str] | None = None, *, full_tables: bool = False) -> Diagnosis:
        """The hypotheses and, for each rule that could not judge this trace, why.

        Args:
            rules: names of the rules to run (``workbench.hypotheses.list_rules()``); all by default.
            full_tables: for a folder read by workers, read every rank's tables here and run the
                one-process diagnosis (the cross-rank rules judge too); otherwise each rank is
                diagnosed where it was read and the findings folded.

        Returns:
            Diagnosis: ``.hypotheses`` (ranked) and ``.not_judged`` (rule, reason).
        """
        if self.rank_folder is not None and not full_tables:
            return self.rank_folder.diagnosis(rules)
        return diagnose(self, rules=rules)

    # --- views (workbench.charts) ---------------------------------------------------------
    def save_charts(
        self, folder: str | os.PathLike[str], *, formats: str | Sequence[str] = ("svg",), scale: float = 1.0
    ) -> list[Path]:
        """Write the charts the notebook shows for this trace to ``folder``.

        Args:
            folder: where to write (created if missing).
            formats: any of ``"svg"``, ``"png"``, ``"html"``, ``"json"``.
            scale: size factor for png.

        Returns:
            list[Path]: the files written.
        """
        from workbench.charts.export import save_charts  # altair only when charts are asked for

        return save_charts(self, Path(folder), formats=formats, scale=scale)

    def _repr_html_(self) -> str:
        """Notebook display: the summary card, the warnings and the charts (``workbench.render``)."""
        return render.notebook_html(self)


# --- what changed between two profiles (workbench.analysis.diff) ------------------------------------


class Diff(TraceDiff):
    """``wb.diff``'s result: a ``workbench.analysis.diff.TraceDiff`` that draws itself in a notebook
    (``workbench.render.diff``: the summary, the waterfall, the tables)."""

    def _repr_html_(self) -> str:
        return render.notebook_html(self)

    def __repr__(self) -> str:
        return f"<Diff: {self.summary}>"


def _diff_side(value: object, what: str) -> tuple[TraceData, str]:
    """A trace to compare and its label: a Trace (or TraceData), a run (its ``.trace``), or a path of any
    supported format (Kineto JSON, Nsight Systems SQLite, rocprofv3 JSON)."""
    from workbench.errors import InvalidArgumentError

    if isinstance(value, TraceData):
        return value, (Path(value.meta.files[0]).name if value.meta.files else what)
    if isinstance(value, (str, os.PathLike)):
        return load_trace(value, workers=1), Path(value).name  # one process: the tables are what is matched
    trace = getattr(value, "trace", None)
    if isinstance(trace, TraceData):
        return trace, str(getattr(value, "name", "") or what)
    raise InvalidArgumentError(
        f"wb.diff compares traces: {what} is a {type(value).__name__}; pass a Trace, a run "
        "with a trace (wb.profile(...)), or a trace file path"
    )


def diff(
    a: object,
    b: object,
    *,
    label_a: str | None = None,
    label_b: str | None = None,
    semantics: Semantics | str = "workbench",
) -> Diff:
    """What changed from ``a`` to ``b``: kernels and ops matched by name and call-tree place, per step.

    Args:
        a, b: two ``Trace``\\ s, runs (``wb.profile`` results; their traced pass), or paths of any supported
            format (Kineto ``.json``/``.json.gz``, Nsight Systems ``.sqlite``, rocprofv3 JSON).
        label_a, label_b: names for the two sides (default: the file names, else "a" / "b").
        semantics: how the side-by-side breakdowns count (``"workbench"``, ``"hta"``, ...).

    Returns:
        Diff: ``.summary`` (one sentence), ``.table`` (the kernels, or ops for CPU-only traces, largest
        change first, each ``appeared`` / ``disappeared`` / ``changed`` / ``unchanged``), ``.kernels``,
        ``.ops``, ``.op_names``, ``.groups`` (the waterfall's bars), ``.temporal`` and ``.idle`` side by
        side, the totals per step (``total_a_us``, ``total_b_us``, ``delta_us``) and ``.top``.
    """
    from workbench.analysis.diff import trace_diff

    ta, name_a = _diff_side(a, "a")
    tb, name_b = _diff_side(b, "b")
    if label_a is None and label_b is None and name_a == name_b:
        name_a, name_b = "a", "b"
    result = trace_diff(ta, tb, label_a=label_a or name_a, label_b=label_b or name_b, semantics=semantics)
    import dataclasses

    return Diff(**{f.name: getattr(result, f.name) for f in dataclasses.fields(result)})
