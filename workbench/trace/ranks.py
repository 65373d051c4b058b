"""Which files make a trace, and which rank each file is.

The rank is ``distributedInfo.rank``. A single file without one is rank 0. Several files
without a rank, or two files claiming the same rank, are all kept as distinct ranks with a
TraceWarning saying what was done (Holistic Trace Analysis silently keeps only one of them).
"""
from __future__ import annotations

import os
from collections.abc import Sequence

from workbench.errors import TraceFormatError

TRACE_SUFFIXES = (".json", ".json.gz")


def trace_paths(source: str | os.PathLike | Sequence[str | os.PathLike]) -> list[str]:
    """The files named by a path, a folder (its trace files, sorted) or a list of paths."""
    if isinstance(source, (str, os.PathLike)):
        path = os.fspath(source)
        if os.path.isdir(path):
            found = sorted(os.path.join(path, n) for n in os.listdir(path)
                           if n.endswith(TRACE_SUFFIXES) and os.path.isfile(os.path.join(path, n)))
            if not found:
                raise TraceFormatError("the folder has no .json or .json.gz trace files; pass a "
                                       "trace file or a folder of rank files", path=path)
            return found
        return [path]
    paths = [os.fspath(p) for p in source]
    if not paths:
        raise TraceFormatError("an empty list of trace paths was given; pass at least one file")
    return paths


def declared_rank(distributed_info: object) -> int | None:
    if isinstance(distributed_info, dict):
        rank = distributed_info.get("rank")
        if type(rank) is int and rank >= 0:
            return rank
    return None


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
            messages.append(f"{path}: no distributedInfo.rank; kept as rank {next_free}")
        else:
            messages.append(f"{path}: claims rank {rank}, as does {owner[rank]}; kept as rank "
                            f"{next_free} so neither is dropped")
        next_free += 1
    return [int(r) for r in ranks], messages  # type: ignore[arg-type]
