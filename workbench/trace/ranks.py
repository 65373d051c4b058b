"""Which rank each file of a trace is.

The rank is ``distributedInfo.rank``. A single file without one is rank 0. Several files
without a rank, or two files claiming the same rank, are all kept as distinct ranks with a
TraceWarning saying what was done (Holistic Trace Analysis silently keeps only one of them).
A rank that is not a whole number from 0 to 2**31 - 1 (2**70, -3, "0", 1.5) counts as absent,
with a warning.

A folder's rank files must be of one job (``one_job``): a copy of a rank file, or a minority that differs
from the others in world size, GPU model or clock domain, is left out with a warning naming the file
and why, in one process and in the folder's workers alike.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from workbench.trace.paths import TRACE_SUFFIXES, shown, trace_paths

__all__ = [
    "TRACE_SUFFIXES",
    "RankFile",
    "assign_ranks",
    "declared_rank",
    "device_names",
    "one_job",
    "rank_problem",
    "trace_paths",
]

MAX_RANK = 2**31 - 1


def declared_rank(distributed_info: object) -> int | None:
    if isinstance(distributed_info, dict):
        rank = distributed_info.get("rank")
        if type(rank) is int and 0 <= rank <= MAX_RANK:
            return rank
    return None


def rank_problem(path: str, distributed_info: object) -> str | None:
    """A message when the file states a rank that cannot be one; None otherwise."""
    if not isinstance(distributed_info, dict) or distributed_info.get("rank") is None:
        return None
    if declared_rank(distributed_info) is not None:
        return None
    value = repr(distributed_info["rank"])
    value = value if len(value) <= 40 else value[:37] + "..."
    return (
        f"{shown(path)}: distributedInfo.rank {value} is not a rank (a whole number from 0 to "
        f"{MAX_RANK}); read as if absent"
    )


def assign_ranks(paths: list[str], declared: list[int | None]) -> tuple[list[int], list[str]]:
    """Distinct ranks for the files, and a message per file whose rank had to be chosen."""
    if len(paths) == 1:
        return [declared[0] if declared[0] is not None else 0], []
    ranks: list[int | None] = []
    owner: dict[int, str] = {}
    messages = []
    for path, rank in zip(paths, declared):
        if rank is not None and rank not in owner:
            owner[rank] = path
            ranks.append(rank)
        else:
            ranks.append(None)
    next_free = max(owner, default=-1) + 1
    for i, (path, rank) in enumerate(zip(paths, declared)):
        if ranks[i] is not None:
            continue
        ranks[i] = next_free
        if rank is None:
            messages.append(f"{shown(path)}: no distributedInfo.rank; kept as rank {next_free}")
        else:
            messages.append(
                f"{shown(path)}: claims rank {rank}, as does {shown(owner[rank])}; kept as rank "
                f"{next_free} so neither is dropped"
            )
        next_free += 1
    return [int(r) for r in ranks], messages  # type: ignore[arg-type]


# --- one job: what a folder's rank files must share -------------------------------------------
CLOCK_DOMAIN_NS = 3600 * 10**9  # ranks of one job start their traces within an hour of each other
FINGERPRINT_BYTES = 1 << 20  # bytes read from each end of a file to tell a copy of another


@dataclass(frozen=True)
class RankFile:
    """What a folder's check of one job reads of one rank file (after it was parsed)."""

    path: str
    distributed_info: object
    device_names: tuple[str, ...]
    base_time_ns: int | None


def file_fingerprint(path: str) -> tuple[int, str]:
    """(size, digest of the first and last MiB): equal for a copy of a file, cheap for a large one."""
    import hashlib

    size = os.path.getsize(path)
    digest = hashlib.sha1()
    with open(path, "rb") as fh:
        digest.update(fh.read(FINGERPRINT_BYTES))
        if size > 2 * FINGERPRINT_BYTES:
            fh.seek(size - FINGERPRINT_BYTES)
            digest.update(fh.read(FINGERPRINT_BYTES))
    return size, digest.hexdigest()


def device_names(device_properties: object) -> tuple[str, ...]:
    if not isinstance(device_properties, (list, tuple)):
        return ()
    return tuple(sorted({str(p.get("name")) for p in device_properties if isinstance(p, dict) and p.get("name")}))


def one_job(files: Sequence[RankFile]) -> tuple[list[int], list[str]]:
    """The indices of the files that belong to the folder's job, and a message per file left out.

    A file is left out when it is a copy of an earlier one (same size and content at both ends: it would
    count that rank twice), or when a strict majority of the other files agree on something it differs in:
    ``distributedInfo.world_size`` (a rank of another job), the GPU model in ``deviceProperties``, or a
    ``baseTimeNanoseconds`` more than an hour from theirs (another clock domain, another run). With no
    majority, nothing is left out on that count. One file is always its own job."""
    if len(files) < 2:
        return list(range(len(files))), []
    keep, messages = [], []
    seen: dict[tuple[int, str], str] = {}
    for i, f in enumerate(files):
        try:
            print_ = file_fingerprint(f.path)
        except OSError:
            keep.append(i)
            continue
        if print_ in seen:
            messages.append(
                f"{shown(f.path)}: the same content as {shown(seen[print_])}, a copy of one rank; "
                "left out (it would count that rank twice)"
            )
            continue
        seen[print_] = f.path
        keep.append(i)
    checks: tuple[tuple[str, Callable[[RankFile], object], Callable[[object], str]], ...] = (
        ("world size", lambda f: _world_size(f.distributed_info), lambda v: f"world size {v}"),
        ("device", lambda f: f.device_names or None, lambda v: f"devices {', '.join(v)}"),  # type: ignore[arg-type]
    )
    for _, value_of, said in checks:
        keep = _majority_filter(files, keep, value_of, said, messages)
    keep = _clock_filter(files, keep, messages)
    return keep, messages


def _world_size(info: object) -> int | None:
    if isinstance(info, dict) and type(info.get("world_size")) is int and info["world_size"] > 0:
        return int(info["world_size"])
    return None


def _majority_filter(
    files: Sequence[RankFile],
    keep: list[int],
    value_of: Callable[[RankFile], object],
    said: Callable[[object], str],
    messages: list[str],
) -> list[int]:
    values = {i: value_of(files[i]) for i in keep}
    known = [v for v in values.values() if v is not None]
    if not known:
        return keep
    counts: dict[object, int] = {}
    for v in known:
        counts[v] = counts.get(v, 0) + 1
    top, top_n = max(counts.items(), key=lambda kv: kv[1])
    if top_n * 2 <= len(known) or len(counts) == 1:
        return keep  # one value throughout, or no strict majority: nothing to decide
    out = []
    for i in keep:
        v = values[i]
        if v is None or v == top:
            out.append(i)
            continue
        messages.append(
            f"{shown(files[i].path)}: {said(v)}, where {top_n} of the folder's {len(known)} rank files "
            f"have {said(top)}: a rank of another job; left out"
        )
    return out


def _clock_filter(files: Sequence[RankFile], keep: list[int], messages: list[str]) -> list[int]:
    times: dict[int, int] = {i: t for i in keep if (t := files[i].base_time_ns) is not None}
    if len(times) < 3:
        return keep
    ordered = sorted(times.values())
    median = ordered[len(ordered) // 2]
    far = {i for i, t in times.items() if abs(t - median) > CLOCK_DOMAIN_NS}
    if not far or len(far) * 2 >= len(times):
        return keep
    for i in sorted(far):
        hours = abs(times[i] - median) / 3.6e12
        messages.append(
            f"{shown(files[i].path)}: its trace starts {hours:.1f} h from the other rank files' "
            "(baseTimeNanoseconds): another run or another clock; left out"
        )
    return [i for i in keep if i not in far]
