"""The optimization study: baselines with an ID, rounds of one-factor variants, a ledger of
hypotheses, accept and re-profile, and per-cell history with change points.

    import workbench as wb
    study = wb.Study("chain", folder="studies/chain")
    study.set_baseline(fn, make_inputs)
    rnd = study.run_round({"compiled": wb.variants.compiled(fn)})
    study.accept("compiled"); study.ledger; study.baselines
    wb.Study.open("studies/chain")

History (for ``%%gpuprofile`` and ``wb.profile``): ``record_run(run, source=..., notebook=...)``,
``append_run(path, run, key)``, ``load_history(path, key)``,
``history_key(source, environment, notebook=...)``, ``change_points(entries)``.
"""

from __future__ import annotations

from workbench.study.baseline import Baseline
from workbench.study.files import StudyWarning
from workbench.study.history import (
    History,
    HistoryEntry,
    append_run,
    change_points,
    default_history_path,
    history_key,
    history_keys,
    load_history,
    record_run,
)
from workbench.study.ledger import LEDGER_STATUSES, LedgerEntry
from workbench.study.residuals import RESIDUALS
from workbench.study.study import Study, StudyRound
from workbench.study.summary import RoundSummary

__all__ = [
    "Study",
    "StudyRound",
    "Baseline",
    "LedgerEntry",
    "RoundSummary",
    "StudyWarning",
    "History",
    "HistoryEntry",
    "append_run",
    "load_history",
    "record_run",
    "history_keys",
    "default_history_path",
    "history_key",
    "change_points",
    "LEDGER_STATUSES",
    "RESIDUALS",
]
