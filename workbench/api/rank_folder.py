"""A folder of rank files read where each rank is analysed: ``RankFolder``, the backend of a ``Trace``
(``workbench.api.trace``) that ``wb.load_trace`` maps over processes or a Dask cluster.  The user holds
the one ``Trace`` type whatever the folder's size; its analyses are answered here, from the per-rank
summaries, and its tables are read here on demand.

    trace = wb.load_trace("job/traces")                 # every core: one worker process per rank file
    trace = wb.load_trace("job/traces", client=client)  # a Dask cluster (distributed.Client)
    trace.kernel_breakdown().table                      # from the per-rank summaries
    trace.rank(3).kernels                               # one rank's full tables, read on demand
    trace.rank_folder.summary_bytes()                        # this backend (None for a trace read in one process)

``workers=None`` maps a folder of many rank files over one worker process per core (at most one per rank,
bounded by free memory); a single file, a folder under SMALL_FOLDER_BYTES of JSON in all, or one of ranks
under SMALL_RANK_BYTES on average and under LARGE_FOLDER_BYTES in all, is read in this process (workers would
cost more than they save: each pays the analyses' fixed cost per rank), as is everything with ``workers=1``
(then with no decode processes either: one process in all). A rank worker decodes its file alone (never in
byte ranges over further processes: the cores are the other workers').

Each worker reads one rank file, runs the per-rank analyses (``workbench.analysis.rank_summary``) and
sends back only the summary; the caller combines the summaries (cross-rank results such as stragglers
are computed from them). The caller's memory grows with the number of ranks by the size of the
summaries, not by their tables. Results equal those of ``workers=1`` (one process, every table in
memory): the per-rank tables exactly, sums over ranks to the last bits of a float.

A summary holds one ``semantics`` and idle threshold; asking for others maps the ranks again (fast when
the columnar cache holds their tables). ``hypotheses()`` runs the rules on each rank where it is read and
folds the per-rank findings; the cross-rank rule (``straggler_rank``) runs here on the summaries (each
worker keeps its rank's activity before its collectives), so the folder's findings are the one-process
ones; ``diagnosis(full_tables=True)`` reads every rank's tables into this process and runs the
one-process diagnosis itself. The Trace's tables (``kernels``,
``cpu_ops``, ...) are every rank's tables read into this process on first use (``full()``, said in a
warning).  This module knows nothing of the ``Trace`` class: it hands back ``TraceData``.
"""

from __future__ import annotations

import dataclasses
import os
import warnings
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import pandas as pd

import workbench.analysis.rank_summary as rank_summary
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
from workbench.analysis.idle import KERNEL_WAIT_THRESHOLD_US
from workbench.analysis.rank_summary import PackedSummary, RankSummary, relabeled_meta
from workbench.analysis.stragglers import STRAGGLER_MIN_WAIT_FRACTION
from workbench.errors import InvalidArgumentError, TraceFormatError, TraceWarning, require_package
from workbench.hypotheses import Diagnosis, Hypothesis
from workbench.hypotheses.diagnose import CROSS_RANK_RULES  # run on the summaries, not per rank
from workbench.hypotheses.fold_ranks import RANK_SCOPE
from workbench.hypotheses.registry import NotJudged
from workbench.trace import TraceData, TraceMeta, read_trace
from workbench.trace.paths import shown
from workbench.trace.rank_map import RankFailure, RankMapError, json_bytes, map_ranks, worker_count
from workbench.trace.ranks import RankFile, assign_ranks, device_names, one_job, trace_paths

if TYPE_CHECKING:
    from distributed import Client

SUMMARY_FUNCTION = "workbench.analysis.rank_summary:packed_rank_file"
DIAGNOSIS_FUNCTION = "workbench.api.rank_folder:diagnose_rank_file"
SMALL_FOLDER_BYTES = 32 << 20  # JSON in all below which workers=None reads in this process
SMALL_RANK_BYTES = 4 << 20  # ranks smaller than this on average: read in this process too ...
LARGE_FOLDER_BYTES = 1 << 30  # ... unless the folder holds more JSON than this in all


def mapped_load(
    source: object,
    *,
    options: dict[str, bool],
    cache: bool,
    workers: int | None,
    client: Client | None,
    partial: bool,
) -> RankFolder | None:
    """The rank folder read over workers, or None where one process is the way (``workers=1``, one rank
    file, or a single worker fits)."""
    if workers is not None and (type(workers) is not int or workers < 1):
        raise InvalidArgumentError(f"workers must be a whole number >= 1, or None for every core; got {workers!r}")
    if client is not None:
        require_package("distributed", extra="dask", feature="loading a trace on a Dask cluster (client=)")
    elif workers == 1:
        return None
    paths = trace_paths(source)
    if client is None and (len(paths) == 1 or worker_count(paths, workers) == 1):
        return None
    if client is None and workers is None and _better_here(paths):
        return None
    return RankFolder.load(paths, options=options, cache=cache, workers=workers, client=client, partial=partial)


def _better_here(paths: list[str]) -> bool:
    """Whether one process reads these rank files faster than workers, at a memory that is no concern: little
    JSON in all (starting workers costs about a second), or many small ranks (each worker pays the analyses'
    fixed cost per rank, one process pays it once for all) that are not many GB together."""
    total = sum(json_bytes(p) for p in paths)
    return total < SMALL_FOLDER_BYTES or (total / len(paths) < SMALL_RANK_BYTES and total < LARGE_FOLDER_BYTES)


def _rank_file(summary: PackedSummary) -> RankFile:
    meta = summary.meta
    return RankFile(
        summary.path,
        meta.distributed_info.get(summary.rank),
        device_names(meta.device_properties.get(summary.rank)),
        meta.base_time_ns.get(summary.rank),
    )


class RankFolder:
    """A multi-rank trace held as per-rank summaries: the ``Trace`` analyses answered from them, the
    tables read on demand (``rank(r)``, ``full()``)."""

    def __init__(
        self,
        summaries: Sequence[PackedSummary],
        *,
        options: dict[str, bool],
        cache: bool,
        workers: int | None,
        client: Client | None,
        failures: Sequence[RankFailure] = (),
        where: str = "processes",
        messages: Sequence[str] = (),
    ):
        self._summaries = {
            (summaries[0].semantics, summaries[0].kernel_wait_threshold_us): sorted(summaries, key=lambda s: s.rank)
        }
        self._options, self._cache, self._workers, self._client = dict(options), cache, workers, client
        self._ranks_by_path = {s.path: s.rank for s in summaries}
        self.failures = tuple(failures)
        self.where = where
        self.meta = _meta(list(summaries), options, messages)  # files in the order they were named, as one process
        self._full: TraceData | None = None

    @classmethod
    def load(
        cls,
        paths: list[str],
        *,
        options: dict[str, bool],
        cache: bool,
        workers: int | None,
        client: Client | None,
        partial: bool,
    ) -> RankFolder:
        outcome = map_ranks(
            SUMMARY_FUNCTION, paths, {"options": options, "cache": cache}, workers=workers, client=client, partial=True
        )
        unreadable = [f for f in outcome.failures if f.kind == "unreadable"]
        broken = [f for f in outcome.failures if f.kind != "unreadable"]
        if broken and not partial:
            raise RankMapError(broken, len(paths))
        summaries = _of_type(outcome.results, PackedSummary)
        if not summaries:
            first = outcome.failures[0]
            raise TraceFormatError(
                f"none of the {len(paths)} rank files could be read; the first: {first.message}", path=shown(first.path)
            )
        messages = [
            f"{shown(f.path)}: rank file left out, it cannot be read ({f.message}); the other "
            f"{len(summaries)} rank file(s) were loaded"
            for f in unreadable
        ]
        messages += [
            f"{f.describe()}; left out (partial=True), the other {len(summaries)} rank file(s) were loaded"
            for f in broken
        ]
        kept, job_messages = one_job([_rank_file(s) for s in summaries])  # the same check as one process
        summaries = [summaries[i] for i in kept]
        messages += job_messages
        ranks, rank_messages = assign_ranks([s.path for s in summaries], [s.declared_rank for s in summaries])
        summaries = [s.relabeled(r) for s, r in zip(summaries, ranks)]
        for summary in summaries:
            for message in summary.warnings:
                warnings.warn(message, TraceWarning, stacklevel=4)
        for message in messages + rank_messages:
            warnings.warn(message, TraceWarning, stacklevel=4)
        return cls(
            summaries,
            options=options,
            cache=cache,
            workers=workers,
            client=client,
            failures=outcome.failures,
            where=outcome.where,
            messages=messages + rank_messages,
        )

    # --- summaries ------------------------------------------------------------------------
    def summaries(
        self, semantics: Semantics | str = "workbench", kernel_wait_threshold_us: float = KERNEL_WAIT_THRESHOLD_US
    ) -> Iterator[RankSummary]:
        """Every rank's summary for these semantics, in rank order, unpacked one at a time (mapped again over
        the ranks the first time these semantics are asked for)."""
        return (packed.unpack() for packed in self.packed(semantics, kernel_wait_threshold_us))

    def summary_bytes(self, semantics: Semantics | str = "workbench") -> int:
        """Bytes the ranks' summaries take here (packed)."""
        return sum(len(packed.payload) for packed in self.packed(semantics))

    def packed(
        self, semantics: Semantics | str = "workbench", kernel_wait_threshold_us: float = KERNEL_WAIT_THRESHOLD_US
    ) -> list[PackedSummary]:
        """Every rank's packed summary for these semantics, in rank order."""
        name = semantics if isinstance(semantics, str) else semantics.name
        key = (name, float(kernel_wait_threshold_us))
        if key not in self._summaries:
            outcome = map_ranks(
                SUMMARY_FUNCTION,
                list(self._ranks_by_path),
                {
                    "options": self._options,
                    "cache": self._cache,
                    "semantics": semantics,
                    "kernel_wait_threshold_us": kernel_wait_threshold_us,
                },
                workers=self._workers,
                client=self._client,
            )
            self._summaries[key] = sorted(
                (s.relabeled(self._ranks_by_path[s.path]) for s in _of_type(outcome.results, PackedSummary)),
                key=lambda s: s.rank,
            )
        return self._summaries[key]

    # --- analyses, from the summaries ----------------------------------------------------------
    def kernel_breakdown(self, semantics: Semantics | str = "workbench") -> KernelBreakdown:
        """As ``Trace.kernel_breakdown``, from the per-rank summaries."""
        return rank_summary.combine_kernel(self.summaries(semantics))

    def temporal_breakdown(self, semantics: Semantics | str = "workbench") -> TemporalBreakdown:
        """As ``Trace.temporal_breakdown``, from the per-rank summaries."""
        return rank_summary.combine_temporal(self.summaries(semantics))

    def idle_breakdown(
        self, semantics: Semantics | str = "workbench", kernel_wait_threshold_us: float = KERNEL_WAIT_THRESHOLD_US
    ) -> IdleBreakdown:
        """As ``Trace.idle_breakdown``, from the per-rank summaries."""
        return rank_summary.combine_idle(self.summaries(semantics, kernel_wait_threshold_us))

    def launch_stats(self, semantics: Semantics | str = "workbench") -> LaunchStats:
        """As ``Trace.launch_stats``, from the per-rank summaries."""
        return rank_summary.combine_launches(self.summaries(semantics))

    def comm_overlap(self, semantics: Semantics | str = "workbench") -> CommOverlap:
        """As ``Trace.comm_overlap``, from the per-rank summaries."""
        return rank_summary.combine_comm(self.summaries(semantics))

    def copy_stats(self, semantics: Semantics | str = "workbench") -> CopyStats:
        """As ``Trace.copy_stats``, from the per-rank summaries."""
        return rank_summary.combine_copies(self.summaries(semantics))

    def sync_audit(self, semantics: Semantics | str = "workbench") -> SyncAudit:
        """As ``Trace.sync_audit``, from the per-rank summaries."""
        return rank_summary.combine_syncs(self.summaries(semantics))

    def stragglers(
        self, semantics: Semantics | str = "workbench", min_wait_fraction: float = STRAGGLER_MIN_WAIT_FRACTION
    ) -> Stragglers:
        """As ``Trace.stragglers``, from each rank's busy, compute and communication time."""
        return rank_summary.combine_stragglers(self.summaries(semantics), min_wait_fraction)

    def step_breakdown(self, semantics: Semantics | str = "workbench") -> StepBreakdown:
        """As ``Trace.step_breakdown``, from the per-rank summaries."""
        return rank_summary.combine_steps(self.summaries(semantics))

    def op_breakdown(self, semantics: Semantics | str = "workbench") -> OpBreakdown:
        """As ``Trace.op_breakdown``, from each rank's totals per op name and input signature."""
        order = {path: i for i, path in enumerate(self._ranks_by_path)}  # the files' order: rows of one-pass tables
        files = sorted(self.packed(semantics), key=lambda s: order[s.path])
        return rank_summary.combine_ops(packed.unpack() for packed in files)

    # --- diagnosis ------------------------------------------------------------------------------
    def hypotheses(self, rules: Iterable[str] | None = None) -> list[Hypothesis]:
        """Ranked hypotheses (see ``diagnosis``)."""
        return list(self.diagnosis(rules).hypotheses)

    def diagnosis(self, rules: Iterable[str] | None = None) -> Diagnosis:
        """The rules run on each rank where it is read, the per-rank findings folded across ranks.

        ``straggler_rank`` (it compares every rank's activity before its collectives) runs here, on the
        summaries every worker made of its rank: the same finding as the one-process diagnosis
        (``Trace.diagnosis(full_tables=True)`` reads every rank's tables into this process and runs that)."""
        from workbench.hypotheses.catalog import get_rule, list_rules
        from workbench.hypotheses.diagnose import NotJudgedNote, combine_ranks

        wanted = list(rules) if rules is not None else [r.name for r in list_rules("trace")]
        for name in wanted:
            get_rule(name)  # an unknown name -> RegistryError
        per_rank = [name for name in wanted if name not in CROSS_RANK_RULES]
        outcome = map_ranks(
            DIAGNOSIS_FUNCTION,
            list(self._ranks_by_path),
            {
                "rank": None,
                "ranks": self._ranks_by_path,
                "options": self._options,
                "cache": self._cache,
                "rules": per_rank,
            },
            workers=self._workers,
            client=self._client,
        )
        _of_type(outcome.results, Diagnosis)  # each one checked to be a Diagnosis
        per_rank = {self._ranks_by_path[path]: d for path, d in outcome.results.items()}
        cross: list[Hypothesis] = []
        cross_notes: list[NotJudgedNote] = []
        for name in wanted:
            if name in CROSS_RANK_RULES:  # judged here, on what the workers' summaries hold of every rank
                try:
                    cross += self._cross_rank(name)
                except NotJudged as exc:
                    cross_notes.append(NotJudgedNote(name, get_rule(name).category, exc.reason))
        return combine_ranks(per_rank, self.ranks, cross, cross_notes)  # as one process combines its ranks

    def _cross_rank(self, name: str) -> list[Hypothesis]:
        """A cross-rank rule run on the rank summaries: ``straggler_rank`` reads the stragglers table and each
        rank's activity before its collectives, which every worker summarised (the one-process finding)."""
        from workbench.hypotheses.catalog import get_rule
        from workbench.hypotheses.rules.distributed import judge_stragglers

        rule = get_rule(name)
        result = self.stragglers()
        before, device = rank_summary.combine_collective_before(self.summaries())
        found = judge_stragglers(result, before, device, self.ranks, rule.limits)
        if found is None:
            return []
        return [found if found.rule else dataclasses.replace(found, rule=name)]

    # --- tables, on demand -------------------------------------------------------------------
    def rank(self, rank: int) -> TraceData:
        """One rank's full tables, read into this process (from the cache when it holds them)."""
        path = next((p for p, r in self._ranks_by_path.items() if r == rank), None)
        if path is None:
            raise InvalidArgumentError(f"rank {rank} is not in this trace; its ranks are {self.ranks}")
        return read_rank(path, rank, self._options, self._cache)

    @property
    def read_all(self) -> bool:
        """Whether every rank's tables are in this process already (``full()`` was called)."""
        return self._full is not None

    def full(self) -> TraceData:
        """Every rank's tables in this process: the one-process tables (``workers=1``), read once."""
        if self._full is None:
            warnings.warn(
                f"reading the tables of all {len(self.ranks)} ranks into this process (the rank "
                "folder was summarised in workers; trace.rank(r) reads one rank)",
                TraceWarning,
                stacklevel=3,
            )
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # said once already, at the load
                self._full = read_trace(
                    list(self._ranks_by_path),
                    cache=self._cache,
                    round_ns=self._options.get("round_ns"),
                    drop_last_step=self._options.get("drop_last_step"),
                )
        return self._full

    # --- description -------------------------------------------------------------------------
    @property
    def ranks(self) -> list[int]:
        return list(self.meta.ranks)

    @property
    def has_gpu(self) -> bool:
        return any(s.gpu_event_count for s in self._first())

    def _first(self) -> list[PackedSummary]:
        return self._summaries[next(iter(self._summaries))]

    def span_us(self) -> float:
        """The longest rank's span, first event to last, in µs (from the rank summaries).

        Returns:
            float: µs; 0.0 for a folder with no events.
        """
        return max((s.span_us for s in self._first()), default=0.0)

    def event_count(self) -> int:
        """Events over every rank (from the rank summaries).

        Returns:
            int: the count.
        """
        return sum(s.event_count for s in self._first())

    def summary(self) -> str:
        """One line, as ``Trace.summary``, plus where the ranks were read."""
        ranks = self._first()
        gpu = "GPU" if self.has_gpu else "CPU only"
        names = sorted(
            {
                str(d.get("name"))
                for props in self.meta.device_properties.values()
                for d in props
                if isinstance(d, dict) and d.get("name")
            }
        )
        device = f" on {', '.join(names)}" if names else ""
        return (
            f"Trace: {len(self.ranks)} rank(s) {self.ranks}, {self.event_count():,} events "
            f"({sum(s.cpu_op_count for s in ranks):,} CPU ops, {sum(s.runtime_count for s in ranks):,} runtime "
            f"calls, {sum(s.gpu_event_count for s in ranks):,} GPU events), span {self.span_us() / 1000:.3f} ms, "
            f"{gpu}{device}; {len(self.meta.warnings)} warning(s); read in {self.where}"
        )

    def __repr__(self) -> str:
        return f"<RankFolder backend: {self.summary()}>"


Value = TypeVar("Value")


def _of_type(results: dict[str, object], kind: type[Value]) -> list[Value]:
    """The map's results, each checked to be what the mapped function returns."""
    out = []
    for path, value in results.items():
        if not isinstance(value, kind):
            raise TypeError(
                f"the per-rank function returned {type(value).__name__} for {shown(path)}, not {kind.__name__}"
            )
        out.append(value)
    return out


def _meta(summaries: list[PackedSummary], options: dict[str, bool], messages: Sequence[str]) -> TraceMeta:
    metas = [s.meta for s in summaries]

    def merged(name: str) -> dict:
        return {k: v for m in metas for k, v in getattr(m, name).items()}

    return TraceMeta(
        files=tuple(m for meta in metas for m in meta.files),
        ranks=tuple(sorted(s.rank for s in summaries)),
        file_ranks=merged("file_ranks"),
        origins_ns=merged("origins_ns"),
        device_properties=merged("device_properties"),
        distributed_info=merged("distributed_info"),
        process_names=merged("process_names"),
        thread_names=merged("thread_names"),
        options={"round_ns": bool(options.get("round_ns")), "drop_last_step": bool(options.get("drop_last_step"))},
        warnings=tuple(w for s in summaries for w in s.warnings) + tuple(messages),
        notes=tuple(n for m in metas for n in m.notes),
        base_time_ns=merged("base_time_ns"),
    )


def read_rank(path: str, rank: int, options: dict[str, bool], cache: bool) -> TraceData:
    """One rank file's tables, as rank ``rank`` (the number the folder gave it)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # said at the load
        data = read_trace(
            [path], cache=cache, round_ns=options.get("round_ns"), drop_last_step=options.get("drop_last_step")
        )
    old = data.ranks[0]
    if old == rank:
        return data
    tables = {
        name: frame.assign(rank=pd.Series([rank] * len(frame), dtype=frame["rank"].dtype, index=frame.index))
        for name, frame in data._tables.items()
    }
    return TraceData(tables, relabeled_meta(data.meta, old, rank))


def diagnose_rank_file(
    path: str, *, rank: int | None, ranks: dict[str, int], options: dict[str, bool], cache: bool, rules: list[str]
) -> Diagnosis:
    """What a worker runs for ``RankFolder.diagnosis``: one rank's tables, its diagnosis."""
    from workbench.hypotheses import diagnose
    from workbench.hypotheses.diagnose import scoped_to_rank

    number = ranks[path] if rank is None else rank
    trace = read_rank(path, number, options, cache)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        found = diagnose(trace, rules=rules)
    # every finding of a one-rank trace is about that rank: scoped so, the caller folds them across ranks
    return scoped_to_rank(found, number)


def connect(address: str, timeout_s: float = 10.0) -> Client:
    """A ``distributed.Client`` of the scheduler at ``address``; a clear error within ``timeout_s`` when it
    does not answer."""
    require_package("distributed", extra="dask", feature="running the map on a Dask cluster (--scheduler)")
    from distributed import Client

    from workbench.trace.rank_map import SchedulerError

    try:
        return Client(address, timeout=timeout_s)
    except (OSError, TimeoutError, ValueError) as exc:
        raise SchedulerError(
            f"the Dask scheduler at {address!r} did not answer within {timeout_s:g} s "
            f"({type(exc).__name__}: {exc}); check the address (tcp://HOST:8786) and that "
            "the scheduler runs and is reachable from here"
        ) from None


__all__ = ["RankFolder", "connect", "diagnose_rank_file", "mapped_load", "read_rank"]
