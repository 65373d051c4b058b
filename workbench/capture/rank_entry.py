"""What torchrun runs on each rank for ``workbench profile``: ``python -m workbench.capture.rank_entry
SCRIPT [ARGS...]`` (see ``workbench.capture.distributed.rank_main``). A module of its own so that the
profiler state lives in ``workbench.capture.distributed``, where the script's
``workbench.api.distributed.step()`` finds it (not in a ``__main__`` copy)."""

from __future__ import annotations

from workbench.capture.distributed import exit_now, rank_main

if __name__ == "__main__":
    exit_now(rank_main())
