"""``wb.Study``: the method of DESIGN.md made durable, as plain files in a folder.

    study = wb.Study("chain", folder="studies/chain")       # creates it, or reopens it
    study.set_baseline(fn, make_inputs)                      # profiled; a Baseline with an ID
    study.hypotheses                                         # ranked, rejected-under-this-scope left out
    rnd = study.run_round({"compiled": wb.variants.compiled(fn), "mine": g})
    rnd = study.run_round(run.fixes)                         # or candidates=run.fixes: each fix that applies
    rnd.decisions["compiled"].decision, print(rnd.summary)
    study.accept("compiled")                                 # the new baseline: re-profiled, re-ranked
    study.ledger, study.baselines
    wb.Study.open("studies/chain")                           # in a fresh kernel: all of it back

A training path (``set_baseline(..., mode="training")``, or a baseline whose output requires
grad) has every round check the gradients of each input and parameter as well as the outputs,
and time forward and backward (``wb.compare(mode=...)``); its records say ``mode="training"``.
The baseline itself is profiled as that same training step (``measure.timed_callable``: the
wrapper the rounds time), so its recorded median, trace and hypotheses include the backward pass
and each round's baseline check compares like with like.
``run_round(..., sweep=make(shape, dtype), dtypes=...)`` (or ``set_baseline(..., sweep_inputs=)``)
sweeps a keep over small, target, large and non-power-of-two sizes before it is decided: what
fails there becomes its failure cases and guard; a keep without a sweep says "not swept".

The folder::

    study.json          the header: format, version, name, created
    baselines.jsonl     one Baseline per line, in order
    ledger.jsonl        the ledger's events (proposed, tested, reopenable), appended
    rounds.jsonl        per round: the plan (predictions, written before it runs) and the outcome
    runs/<baseline_id>/ each baseline's run bundle (``run.save``)

Files are only appended to, under each file's lock (``workbench.study.records``): round and baseline
numbers are assigned under it, so two processes running a round at once get two numbers and both
rounds are kept. Every line is type-checked on reading; one that cannot be read is skipped with a
warning naming the file and the line. A folder that cannot be written is refused before any profile.
Callables cannot be stored: a baseline records where its function lives (module and name) and
its source hash; in a fresh process it is imported again, or handed back with ``attach``.

``Study`` composes four parts, each a module of its own: the folder's files
(``workbench.study.store``), the ledger's view (``workbench.study.ledger_view``), the baselines and
their live callables (``workbench.study.baselining``) and the rounds run and accepted
(``workbench.study.orchestration``; a round's record, ``StudyRound``, is ``workbench.study.rounds``).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Literal, Mapping, Sequence

from workbench.errors import InvalidArgumentError
from workbench.study.baseline import Baseline
from workbench.study.baselining import Baselines
from workbench.study.ledger import LedgerEntry
from workbench.study.ledger_view import LedgerView
from workbench.study.orchestration import BASE, DRIFT, KEPT, NOT_SWEPT, RoundRunner
from workbench.study.rounds import StudyRound, parse_round_record
from workbench.study.store import (
    BASELINES,
    HEADER,
    LEDGER,
    ROUNDS,
    RUNS,
    STUDY_FORMAT,
    STUDY_VERSION,
    StudyStore,
    study_name,
)

if TYPE_CHECKING:
    from workbench.capture.run import RunRecord
    from workbench.fixes import FixList
    from workbench.hypotheses.hypothesis import Hypothesis
    from workbench.variants.spec import VariantLike
    from workbench.variants.sweep import ShapeSweep, SweepFactory

__all__ = [
    "Study",
    "StudyRound",
    "parse_round_record",
    "STUDY_FORMAT",
    "STUDY_VERSION",
    "HEADER",
    "BASELINES",
    "LEDGER",
    "ROUNDS",
    "RUNS",
    "BASE",
    "KEPT",
    "DRIFT",
    "NOT_SWEPT",
]


class Study:
    """A study stored in ``folder`` (default ``studies/<name>``); see the module docstring."""

    def __init__(self, name: str, folder: str | Path | None = None) -> None:
        if not isinstance(name, str) or not name.strip():
            raise InvalidArgumentError(f"a study needs a non-empty name; got {name!r}")
        self._store = StudyStore(name, Path(folder) if folder is not None else Path("studies") / name)
        self._ledger = LedgerView(self._store)
        self._baselining = Baselines(self._store, self._ledger)
        self._runner = RoundRunner(self._store, self._ledger, self._baselining)

    @classmethod
    def open(cls, folder: str | Path) -> "Study":
        """Reopen the study in ``folder`` (baselines, rounds, ledger); StudyError where there is none."""
        return cls(study_name(folder), folder)

    # -- what it holds ------------------------------------------------------------------------
    @property
    def name(self) -> str:
        return self._store.name

    @property
    def folder(self) -> Path:
        return self._store.folder

    @property
    def created_at(self) -> str:
        return self._store.created_at

    @property
    def baselines(self) -> tuple[Baseline, ...]:
        return tuple(self._store.baselines)

    @property
    def baseline(self) -> Baseline | None:
        """The current baseline (the last one set or accepted), None before the first."""
        return self._baselining.current

    @property
    def ledger(self) -> tuple[LedgerEntry, ...]:
        return self._ledger.entries

    @property
    def rounds(self) -> tuple[StudyRound, ...]:
        """Every closed round, by number (a number recorded twice by an older workbench: both)."""
        return tuple(sorted(self._store.closed, key=lambda r: r.index))

    @property
    def hypotheses(self) -> tuple[Hypothesis, ...]:
        """The current baseline's ranked hypotheses, each with its status from the ledger."""
        return self._ledger.hypotheses(self.baseline)

    def run_of(self, baseline: Baseline | None = None) -> RunRecord:
        """The baseline's run bundle, loaded (``wb.load_run``)."""
        return self._store.load_run(baseline or self._baselining.require())

    # -- baselines ----------------------------------------------------------------------------
    def set_baseline(
        self,
        fn: Callable[..., Any],
        make_inputs: Callable[[], Any] | None = None,
        *,
        seed: int = 0,
        label: str | None = None,
        mode: str | None = None,
        sweep_inputs: ShapeSweep | SweepFactory | None = None,
        **profile_options: Any,
    ) -> Baseline:
        """Profile ``fn(*make_inputs())`` (``wb.profile``; ``profile_options`` go to it) and record
        it as the new baseline, with its ID, reset procedure and ranked hypotheses.

        ``mode``: "training" (every round checks the gradients of each input and parameter as
        well as the outputs, and times forward and backward), "inference", or None: training
        when the baseline's output requires grad. ``sweep_inputs``: ``make(shape, dtype) -> args``
        (or a ``ShapeSweep``), the shape sweep every round of this baseline (and of the baselines
        accepted from it) runs before a keep."""
        return self._baselining.set(
            fn,
            make_inputs,
            seed=seed,
            label=label,
            mode=mode,
            sweep_inputs=sweep_inputs,
            profile_options=profile_options,
        )

    def attach(self, fn: Callable[..., Any], make_inputs: Callable[[], Any] | None = None) -> Baseline:
        """Hand the current baseline's callable back after a restart (its source must match)."""
        return self._baselining.attach(fn, make_inputs)

    def _require_baseline(self) -> Baseline:
        return self._baselining.require()

    def _callables(self, base: Baseline) -> tuple[Callable[..., Any], Callable[[], Any] | None]:
        """``base``'s callable and inputs factory (this process's, else imported again)."""
        return self._baselining.callables(base)

    # -- rounds -------------------------------------------------------------------------------
    def run_round(
        self,
        variants: Mapping[str, VariantLike] | FixList | None = None,
        *,
        candidates: FixList | None = None,
        tests: Mapping[str, str | Sequence[str]] | None = None,
        sweep: ShapeSweep | SweepFactory | Literal[False] | None = None,
        dtypes: Sequence[str] | None = None,
        **compare_options: Any,
    ) -> StudyRound:
        """Run one-factor ``variants`` (name -> callable, ``Variant`` or registry name) against the
        current baseline through ``wb.compare`` (the baseline first: every variant is timed
        interleaved with a fresh baseline check). ``tests``: variant name -> the hypotheses
        (keys, categories or rule names) it tests, besides those whose ``suggested_variants``
        name it. ``compare_options`` go to ``wb.compare`` (``budget_s=``, ``checks=``, ...).

        Before a keep, a short shape sweep: ``sweep`` is a ``make(shape, dtype) -> args`` factory
        (swept over small, target, large and non-power-of-two sizes of the first input's leading
        dimension, in ``dtypes``, default the first input's dtype), or a ``wb.variants.ShapeSweep``;
        default: the one given to ``set_baseline(..., sweep_inputs=)``. Its failures become the
        keep's failure cases and guard (a keep_guarded); a keep with no sweep says "not swept".

        ``candidates`` (or ``variants``) may be a ``FixList`` (``run.fixes``): each fix that applies
        becomes a one-factor variant named by the fix, built on the baseline's callable with where it
        applies (``variant.options["fix_where"]``); the round records the fix's name (``registry``)
        so that a later round, or ``accept`` in a reopened study, rebuilds it."""
        return self._runner.run(
            variants, candidates=candidates, tests=tests, sweep=sweep, dtypes=dtypes, **compare_options
        )

    def accept(
        self, name: str, *, fn: Callable[..., Any] | None = None, round: int | None = None, untested: bool = False
    ) -> Baseline:
        """Make the kept variant ``name`` of the last round (or ``round``) the new baseline: re-profiled,
        with a new ID and its hypotheses ranked afresh. A variant that was not kept is refused.

        ``fn``: the variant's callable, where this process did not run the round (a reopened
        study). It must be the code the round tested: the same object, or the same qualified name
        and source hash as recorded in the round; other code is refused (run a round with it
        first). ``untested=True`` accepts other code anyway, recorded as untested: its baseline
        carries no speedup from the round."""
        return self._runner.accept(name, fn=fn, round=round, untested=untested)

    def _rebuild_variant(self, rnd: StudyRound, name: str) -> VariantLike:
        """Round ``rnd``'s variant ``name`` made again where its callable is not in this process."""
        return self._runner.rebuild_variant(rnd, name)

    # -- display ------------------------------------------------------------------------------
    def to_text(self) -> str:
        store = self._store
        lines = [
            f"Study {self.name!r} in {str(self.folder)!r}: {len(store.baselines)} baseline(s), "
            f"{len(store.rounds)} round(s), {len(store.events)} ledger event(s)"
        ]
        for b in store.baselines:
            lines.append(f"  baseline {b.index}: {b.describe()}")
        if self.hypotheses:
            lines.append("  hypotheses of the current baseline:")
            lines += [f"    - [{h.status}, {h.confidence}] {h.category}: {h.title}" for h in self.hypotheses[:5]]
        if store.rounds:
            last = self.rounds[-1]
            lines.append(
                f"  last round {last.index}: " + ", ".join(f"{n} {d.decision}" for n, d in last.decisions.items())
            )
        if store.events:
            lines.append("  ledger:")
            lines += [f"    - {e.describe()}" for e in self.ledger]
        return "\n".join(lines)

    def __repr__(self) -> str:
        base = self.baseline.baseline_id if self.baseline else "none"
        return f"Study({self.name!r}, folder={str(self.folder)!r}, baseline={base}, rounds={len(self._store.rounds)})"
