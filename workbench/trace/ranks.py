"""Which rank each file of a trace is.

The rank is ``distributedInfo.rank``. A single file without one is rank 0. Several files
without a rank, or two files claiming the same rank, are all kept as distinct ranks with a
TraceWarning saying what was done (Holistic Trace Analysis silently keeps only one of them).
A rank that is not a whole number from 0 to 2**31 - 1 (2**70, -3, "0", 1.5) counts as absent,
with a warning.
"""
from __future__ import annotations

from workbench.trace.paths import TRACE_SUFFIXES, shown, trace_paths

__all__ = ["TRACE_SUFFIXES", "assign_ranks", "declared_rank", "rank_problem", "trace_paths"]

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
    return (f"{shown(path)}: distributedInfo.rank {value} is not a rank (a whole number from 0 to "
            f"{MAX_RANK}); read as if absent")


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
            messages.append(f"{shown(path)}: claims rank {rank}, as does {shown(owner[rank])}; kept as rank "
                            f"{next_free} so neither is dropped")
        next_free += 1
    return [int(r) for r in ranks], messages  # type: ignore[arg-type]
