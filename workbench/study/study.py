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
"""

from __future__ import annotations

import dataclasses
import warnings
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Literal, Mapping, Sequence, TypeGuard

import workbench.study.files as files
import workbench.study.identity as identity
import workbench.study.measure as measure
import workbench.study.records as records
from workbench.errors import InvalidArgumentError, StudyError
from workbench.hypotheses.hypothesis import Hypothesis
from workbench.study.baseline import Baseline
from workbench.study.ledger import (
    LedgerEntry,
    fold,
    held_back,
    hypothesis_key,
    parse_event,
    proposal_event,
    reopen_when,
    same_scope,
)
from workbench.study.records import expect, expect_all
from workbench.study.residuals import classify_pair, combine, prediction
from workbench.study.summary import RoundSummary
from workbench.variants.decision import DecisionRecord
from workbench.variants.output_check import check_mode, resolve_mode

if TYPE_CHECKING:
    from workbench.capture.run import RunRecord
    from workbench.fixes import FixList
    from workbench.variants.results import Comparison, VariantResult
    from workbench.variants.spec import Variant, VariantLike
    from workbench.variants.sweep import ShapeSweep, SweepFactory

STUDY_FORMAT = "workbench-study"
STUDY_VERSION = 1
HEADER = "study.json"
BASELINES = "baselines.jsonl"
LEDGER = "ledger.jsonl"
ROUNDS = "rounds.jsonl"
RUNS = "runs"
BASE = "baseline"  # the baseline's row in every round's comparison
KEPT = ("keep", "keep_guarded")
DRIFT = 0.10  # a round's baseline median more than 10% off the recorded one (and outside its CI)


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


@dataclass(frozen=True)
class StudyRound:
    """One round: its summary, a DecisionRecord per variant and the comparison behind them."""

    index: int
    baseline_id: str
    summary: RoundSummary
    decisions: dict[str, DecisionRecord]
    comparison: Comparison | None = dataclasses.field(default=None, compare=False, repr=False)

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "baseline_id": self.baseline_id,
            "summary": self.summary.to_dict(),
            "decisions": {k: v.to_dict() for k, v in self.decisions.items()},
            "comparison": self.comparison.to_dict() if self.comparison is not None else None,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "StudyRound":
        comparison = None
        if d.get("comparison"):
            from workbench.variants.results import Comparison

            try:
                comparison = Comparison.from_dict(d["comparison"])
            except (KeyError, TypeError, ValueError):
                comparison = None
        return cls(
            int(d["index"]),
            d["baseline_id"],
            RoundSummary.from_dict(d["summary"]),
            {k: DecisionRecord.from_dict(v) for k, v in (d.get("decisions") or {}).items()},
            comparison,
        )

    def to_text(self) -> str:
        return self.summary.to_text()

    def _repr_markdown_(self) -> str:
        return self.summary.to_markdown()


class Study:
    """A study stored in ``folder`` (default ``studies/<name>``); see the module docstring."""

    def __init__(self, name: str, folder: str | Path | None = None) -> None:
        if not isinstance(name, str) or not name.strip():
            raise InvalidArgumentError(f"a study needs a non-empty name; got {name!r}")
        self.name = name
        self.folder = Path(folder) if folder is not None else Path("studies") / name
        self._live: dict[str, tuple[Callable[..., Any], Callable[[], Any] | None]] = {}
        self._round_variants: dict[int, dict[str, VariantLike]] = {}
        self._sweeps: dict[
            str, ShapeSweep | SweepFactory
        ] = {}  # baseline ID -> its sweep factory (live only, like callables)
        header = self.folder / HEADER
        if header.exists():
            data = files.read_json(header, "study header")
            files.check_format(data, kind=STUDY_FORMAT, version=STUDY_VERSION, path=header)
            if data.get("name") != name:
                raise StudyError(
                    f"the folder {str(self.folder)!r} holds the study {data.get('name')!r}, not "
                    f"{name!r}: open it with wb.Study.open({str(self.folder)!r}) or choose another "
                    f"folder; nothing was changed"
                )
            self.created_at = str(data.get("created_at", ""))
        else:
            if self.folder.exists() and not self.folder.is_dir():
                raise StudyError(f"{str(self.folder)!r} is a file; a study needs a folder")
            self.created_at = _now()
            files.write_json(
                header, {"format": STUDY_FORMAT, "version": STUDY_VERSION, "name": name, "created_at": self.created_at}
            )
        self._load()

    @classmethod
    def open(cls, folder: str | Path) -> "Study":
        """Reopen the study in ``folder`` (baselines, rounds, ledger); StudyError where there is none."""
        header = Path(folder) / HEADER
        if not header.exists():
            raise StudyError(
                f"no study in {str(folder)!r} (it has no {HEADER}); create one with "
                f"wb.Study(name, folder={str(folder)!r})"
            )
        data = files.read_json(header, "study header")
        files.check_format(data, kind=STUDY_FORMAT, version=STUDY_VERSION, path=header)
        return cls(str(data.get("name", "")), folder)

    # -- reading ----------------------------------------------------------------------------
    def _load(self) -> None:
        """Read the folder's records, each line type-checked; an unreadable line is skipped with a
        StudyWarning naming its file and line (``records.read_jsonl``), never a raw exception."""
        lines, _ = records.read_jsonl(self.folder / BASELINES, "study baselines", Baseline.parse, stacklevel=4)
        self._baselines: list[Baseline] = [ln.value for ln in lines]
        lines, _ = records.read_jsonl(self.folder / LEDGER, "study ledger", parse_event, stacklevel=4)
        self._events = [ln.record for ln in lines]
        self._plans: dict[int, dict[str, Any]] = {}
        self._rounds: dict[int, StudyRound] = {}
        self._closed: list[StudyRound] = []  # every closed round, in file order (duplicates too)
        self._aborted: dict[int, dict[str, Any]] = {}
        rounds_path = self.folder / ROUNDS
        lines, _ = records.read_jsonl(rounds_path, "study rounds", _parse_round_record, stacklevel=4)
        closed_at: dict[int, int] = {}
        for line in lines:
            rec, n = line.record, line.value["round"]
            if rec["event"] == "planned":
                self._plans[n] = rec
            elif rec["event"] == "closed":
                rnd = line.value["outcome"]
                if line.value["comparison_error"]:
                    warnings.warn(
                        f"study rounds {str(rounds_path)!r}, line {line.number}: round {n}'s comparison "
                        f"is not readable ({line.value['comparison_error']}); the round, its summary and "
                        f"decisions are read without it",
                        files.StudyWarning,
                        stacklevel=3,
                    )
                if n in closed_at:
                    warnings.warn(
                        f"study rounds {str(rounds_path)!r}, lines {closed_at[n]} and {line.number}: round "
                        f"{n} is recorded twice (two processes ran a round at once, before rounds were "
                        f"numbered under the file's lock); both are kept in study.rounds, and "
                        f"study.accept(..., round={n}) takes the one on line {line.number}",
                        files.StudyWarning,
                        stacklevel=3,
                    )
                closed_at[n] = line.number
                self._rounds[n] = rnd
                self._closed.append(rnd)
            elif rec["event"] == "aborted":
                self._aborted[n] = rec

    def _append_event(self, event: dict[str, Any]) -> None:
        files.append_line(self.folder / LEDGER, event, "study ledger")
        self._events.append(files.plain(event))

    def _check_writable(self, action: str) -> None:
        """Refuse a folder that cannot be written before any profile or round runs."""
        records.check_writable(
            self.folder,
            "study folder",
            files=(HEADER, BASELINES, LEDGER, ROUNDS),
            folders=(RUNS,),
            action=f"nothing was {action} and nothing was changed",
        )

    @property
    def baselines(self) -> tuple[Baseline, ...]:
        return tuple(self._baselines)

    @property
    def baseline(self) -> Baseline | None:
        """The current baseline (the last one set or accepted), None before the first."""
        return self._baselines[-1] if self._baselines else None

    @property
    def ledger(self) -> tuple[LedgerEntry, ...]:
        return tuple(fold(self._events))

    @property
    def rounds(self) -> tuple[StudyRound, ...]:
        """Every closed round, by number (a number recorded twice by an older workbench: both)."""
        return tuple(sorted(self._closed, key=lambda r: r.index))

    @property
    def hypotheses(self) -> tuple[Hypothesis, ...]:
        """The current baseline's ranked hypotheses, each with its status from the ledger."""
        base = self.baseline
        if base is None:
            return ()
        status = {e.key: e for e in self.ledger if e.baseline_id == base.baseline_id}
        out = []
        for h in base.hypotheses:
            entry = status.get(hypothesis_key(h))
            if entry is not None:
                h = dataclasses.replace(h, status=entry.hypothesis.status, confidence=entry.confidence)
            out.append(h)
        return tuple(out)

    def run_of(self, baseline: Baseline | None = None) -> RunRecord:
        """The baseline's run bundle, loaded (``wb.load_run``)."""
        from workbench.capture.run import RunRecord

        base = baseline or self._require_baseline()
        return RunRecord.load(self.folder / base.run_path)

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
        if not callable(fn):
            raise InvalidArgumentError(f"set_baseline needs the callable itself; got {type(fn).__name__}")
        if make_inputs is not None and not callable(make_inputs):
            raise InvalidArgumentError(
                "make_inputs must be a zero-argument callable returning the argument tuple "
                "(fresh values each call), e.g. lambda: (torch.randn(1024, 1024),)"
            )
        check_mode(mode)
        base = self._new_baseline(fn, make_inputs, seed=seed, label=label, options=profile_options, mode=mode)
        if sweep_inputs is not None:
            self._sweeps[base.baseline_id] = sweep_inputs
        return base

    def _new_baseline(
        self,
        fn: Callable[..., Any],
        make_inputs: Callable[[], Any] | None,
        *,
        seed: int,
        label: str | None,
        options: Mapping[str, Any],
        parent: Baseline | None = None,
        accepted_from: dict[str, Any] | None = None,
        mode: str | None = None,
    ) -> Baseline:
        self._check_writable("profiled")
        args = measure.seeded_inputs(make_inputs, seed)
        mode = resolve_mode(mode, fn, args)
        # profiled exactly as its rounds time it (a training path: forward + backward), so the drift
        # check compares like with like and the hypotheses see the whole step
        run = measure.profile_callable(measure.timed_callable(fn, args, mode), args, options)
        ranked = measure.ranked_hypotheses(run)
        env = dict(run.environment or {})
        ref = identity.callable_ref(fn)
        variant = _variant_info(fn)
        if parent is not None and parent.variant.get("kind") == "compiled" and variant.get("kind") != "compiled":
            variant = {**variant, "on": parent.variant}  # composed on top of an accepted compile
        inputs = {
            "seed": int(seed),
            "signature": identity.tensor_signature(args),
            "inputs_ref": identity.callable_ref(make_inputs) if make_inputs is not None else None,
        }
        git = identity.git_state(ref.get("file"))
        src = identity.source_hash(fn)
        identity_variant = {k: variant.get(k) for k in ("kind", "options", "on")}
        if mode == "training":  # the same code as a training path is another baseline
            identity_variant["mode"] = mode
        bid = identity.baseline_id(
            source=src,
            variant=identity_variant,
            inputs={"seed": inputs["seed"], "signature": inputs["signature"]},
            environment=env,
            git=git,
            parent=parent.baseline_id if parent else None,
        )
        existing = next((b for b in self._baselines if b.baseline_id == bid), None)
        if existing is not None and existing is self.baseline:
            self._live[bid] = (fn, make_inputs)  # the same baseline again (a rerun cell): attach, nothing new
            return existing
        device = identity.device_of(env) if env else run.device
        scope_base = {
            "inputs": identity.digest(inputs["signature"]),
            "device": device,
            "environment_key": identity.environment_key(env),
            "baseline_id": bid,
        }
        proposed, held = [], []
        entries = self.ledger
        for h in ranked:
            key = hypothesis_key(h)
            scope = {"key": key, **scope_base}
            blocker = held_back(entries, key, scope)
            if blocker is not None:
                held.append(
                    {
                        "key": key,
                        "title": h.title,
                        "rejected_in_round": blocker.round,
                        "rejected_under": blocker.baseline_id,
                        "reopen_when": blocker.reopen_when,
                        "reason": f"rejected in round {blocker.round} under the same scope (inputs, device); "
                        f"not proposed again until {blocker.reopen_when}",
                    }
                )
                continue
            proposed.append(h)
        timing = run.timing
        index = len(self._baselines) + 1
        run_rel = f"{RUNS}/{bid}"
        if not (self.folder / run_rel).exists():
            run.save(self.folder / run_rel)
        base = Baseline(
            baseline_id=bid,
            index=index,
            label=label or getattr(fn, "__name__", None) or variant.get("kind", "fn"),
            created_at=_now(),
            source_hash=src,
            callable_ref=ref,
            variant=variant,
            inputs=inputs,
            environment_key=scope_base["environment_key"],
            device=device,
            git=git,
            reset_procedure=measure.reset_procedure(seed, make_inputs, run.settings or {}),
            settings=dict(run.settings or {}),
            profile_options=_plain_options(options),
            run_path=run_rel,
            median_ms=float(timing.median_ms),
            p95_ms=float(timing.p95_ms),
            iqr_ms=float(timing.iqr_ms),
            n=int(timing.n),
            hypotheses=tuple(proposed),
            held_back=tuple(held),
            parent_id=parent.baseline_id if parent else None,
            accepted_from=accepted_from,
            notes=tuple(run.notes or ()),
            mode=mode,
        )
        at = _now()
        for entry in entries:  # a rejection under another scope may now be tried again
            if entry.status != "rejected":
                continue
            for h in proposed:
                if hypothesis_key(h) == entry.key and not same_scope(
                    entry.evidence_scope, {"key": entry.key, **scope_base}
                ):
                    self._append_event(
                        {
                            "event": "reopenable",
                            "key": entry.key,
                            "baseline_id": entry.baseline_id,
                            "status": "reopenable",
                            "round": None,
                            "at": at,
                            "reason": f"proposed again under baseline {bid}, whose scope differs",
                        }
                    )
        for h in proposed:
            self._append_event(
                proposal_event(h, baseline_id=bid, scope={"key": hypothesis_key(h), **scope_base}, at=at)
            )
        with records.locked(self.folder / BASELINES, "study baselines") as log:  # numbered under the lock
            on_file = [r.get("index") for r in log.records()]
            index = max([len(self._baselines), *(i for i in on_file if _is_int(i))]) + 1
            base = dataclasses.replace(base, index=index)
            log.append(base.to_dict(), files.dumps)
        self._baselines.append(base)
        self._live[bid] = (fn, make_inputs)
        return base

    def attach(self, fn: Callable[..., Any], make_inputs: Callable[[], Any] | None = None) -> Baseline:
        """Hand the current baseline's callable back after a restart (its source must match)."""
        base = self._require_baseline()
        src = identity.source_hash(fn)
        if src != base.source_hash:
            raise StudyError(
                f"the callable's source differs from baseline {base.baseline_id}'s (source hash {src} "
                f"vs {base.source_hash}): this is other code; record it with study.set_baseline(fn, "
                f"make_inputs) (the study keeps the old baseline and its rounds)"
            )
        if make_inputs is None:
            make_inputs = self._resolve_inputs(base)
        if base.variant.get("kind") == "compiled" and identity.unwrap(fn) is fn:
            from workbench.variants.builders import compiled

            fn = compiled(fn, **(base.variant.get("options") or {}))
        self._live[base.baseline_id] = (fn, make_inputs)
        return base

    def _require_baseline(self) -> Baseline:
        base = self.baseline
        if base is None:
            raise StudyError(f"study {self.name!r} has no baseline yet: call study.set_baseline(fn, make_inputs)")
        return base

    def _resolve_inputs(self, base: Baseline) -> Callable[[], Any] | None:
        ref = base.inputs.get("inputs_ref")
        if ref is None:
            return None
        try:
            return identity.resolve_ref(ref, "inputs factory")
        except StudyError as exc:
            raise StudyError(
                f"{exc}. Baseline {base.baseline_id} needs it: hand it back with "
                f"study.attach(fn, make_inputs), or start a new baseline with "
                f"study.set_baseline(fn, make_inputs); the study's records are unchanged"
            ) from None

    def _callables(self, base: Baseline) -> tuple[Callable[..., Any], Callable[[], Any] | None]:
        if base.baseline_id in self._live:
            return self._live[base.baseline_id]
        try:
            fn = identity.resolve_ref(base.callable_ref, "baseline callable")
        except StudyError as exc:
            raise StudyError(
                f"{exc}. Baseline {base.baseline_id} ({base.label}) cannot be run without it: hand it "
                f"back with study.attach(fn, make_inputs) (same source), or start a new baseline with "
                f"study.set_baseline(fn, make_inputs); the study's records are unchanged"
            ) from None
        if identity.source_hash(fn) != base.source_hash:
            raise StudyError(
                f"the baseline callable {base.callable_ref.get('module')}.{base.callable_ref.get('qualname')} "
                f"exists but its source changed since baseline {base.baseline_id} was recorded: set a "
                f"new baseline with study.set_baseline(fn, make_inputs); the records are unchanged"
            )
        if base.variant.get("fix") and base.variant.get("registry"):  # a catalog fix, rebuilt by its name
            from workbench.fixes.registry import build

            fn = build(str(base.variant["registry"]), fn)
        elif base.variant.get("kind") == "compiled":
            from workbench.variants.builders import compiled

            fn = compiled(fn, **(base.variant.get("options") or {}))
        live = (fn, self._resolve_inputs(base))
        self._live[base.baseline_id] = live
        return live

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
        base = self._require_baseline()
        sweep = sweep if sweep is not None else self._sweeps.get(base.baseline_id)
        variants, candidates = _split_candidates(variants, candidates)
        if candidates is None and (not isinstance(variants, Mapping) or not variants):
            raise InvalidArgumentError(
                "run_round needs a non-empty dict of name -> callable, e.g. {'compiled': wb.variants.compiled(fn)}, "
                "or candidates=run.fixes"
            )
        if BASE in variants:
            raise InvalidArgumentError(
                f"{BASE!r} names the baseline's row in every round; call the variant something else"
            )
        self._check_writable("run")
        fn, make_inputs = self._callables(base)
        if candidates is not None:
            variants = {**variants, **{n: v for n, v in _fix_variants(candidates, fn).items() if n not in variants}}
        hyps = [h for h in self.hypotheses if h.status != "rejected"]
        testing = _testing(hyps, variants, tests or {})
        predictions = [
            prediction(h, testing[hypothesis_key(h)], base.median_ms) for h in hyps if testing[hypothesis_key(h)]
        ]
        started = _now()
        described = [
            {
                "name": n,
                **_variant_info(v),
                **_tested_code(v),
                "tests": [p["key"] for p in predictions if n in p["variants"]],
            }
            for n, v in variants.items()
        ]
        # the round's number is read and written under the rounds file's lock: two processes running a
        # round on one study at once get two numbers, and both rounds are kept
        with records.locked(self.folder / ROUNDS, "study rounds") as log:
            on_file = [r.get("round") for r in log.records()]
            index = max([0, *self._plans, *self._rounds, *self._aborted, *(n for n in on_file if _is_int(n))]) + 1
            log.append(
                {
                    "event": "planned",
                    "round": index,
                    "baseline_id": base.baseline_id,
                    "at": started,
                    "predictions": predictions,
                    "variants": described,
                    "reset_procedure": list(base.reset_procedure),
                    "compare_options": _plain_options(compare_options),
                },
                files.dumps,
            )
        self._plans[index] = {"predictions": predictions}
        baseline_obj = dataclasses.replace(fn, name=BASE) if _is_variant(fn) else fn
        try:
            with measure.restored(base.settings):
                measure.seed_everything(base.seed)
                options = dict(compare_options)
                options.setdefault("mode", base.mode)
                if sweep is not False and sweep is not None:
                    options["sweep"] = _shape_sweep(sweep, make_inputs, dtypes)
                    options["sweep_kept_only"] = True
                if predictions and "hypothesis" not in options:  # the round's lead hypothesis, for the record
                    options["hypothesis"] = next(h for h in hyps if hypothesis_key(h) == predictions[0]["key"])
                cmp = measure.compare_variants({BASE: baseline_obj, **variants}, make_inputs, BASE, options)
        except BaseException as exc:
            files.append_line(
                self.folder / ROUNDS,
                {"event": "aborted", "round": index, "at": _now(), "reason": f"{type(exc).__name__}: {exc}"},
                "study rounds",
            )
            self._aborted[index] = {"reason": f"{type(exc).__name__}: {exc}"}
            raise
        rnd = self._close_round(
            index, base, cmp, hyps, predictions, described, started, swept=bool(options.get("sweep"))
        )
        self._round_variants[index] = dict(variants)
        return rnd

    def _close_round(
        self,
        index: int,
        base: Baseline,
        cmp: Comparison,
        hyps: list[Hypothesis],
        predictions: list[dict[str, Any]],
        described: list[dict[str, Any]],
        started: str,
        swept: bool = False,
    ) -> StudyRound:
        base_row = cmp[BASE]
        names = [d["name"] for d in described]
        rows = {n: cmp[n] for n in names}
        min_effect = float((cmp.settings or {}).get("min_effect", 0.03) or 0.03)
        by_key = {hypothesis_key(h): h for h in hyps}
        residuals, updates, at = [], [], _now()
        for pred in predictions:
            h = by_key[pred["key"]]
            pairs = [classify_pair(h, base_row, rows[v], pred, min_effect=min_effect) for v in pred["variants"]]
            residuals += pairs
            update = combine(h, pairs)
            updates.append(update)
            if update["residual"] != "untested" or update["status_after"] != update["status_before"]:
                tested = [
                    {
                        "name": r.variant,
                        "residual": r.residual,
                        "speedup": r.measured_speedup,
                        "speedup_ci": list(r.speedup_ci),
                    }
                    for r in pairs
                ]
                self._append_event(
                    {
                        "event": "tested",
                        "key": pred["key"],
                        "baseline_id": base.baseline_id,
                        "round": index,
                        "status": update["status_after"],
                        "confidence": update["confidence_after"],
                        "residual": update["residual"],
                        "reason": update["reason"],
                        "at": at,
                        "evidence_scope": {"round": index, "variants": tested},
                    }
                )
        lead = {
            n: next((by_key[p["key"]] for p in predictions if n in p["variants"]), hyps[0] if hyps else None)
            for n in names
        }
        decisions = {n: _unswept(self._decision(cmp, base_row, rows[n], lead[n]), swept) for n in names}
        summary = RoundSummary(
            study=self.name,
            round=index,
            baseline_id=base.baseline_id,
            reset_procedure=base.reset_procedure,
            hypotheses=tuple(predictions),
            variants=tuple(described),
            baseline_checks=tuple(_baseline_check(base, base_row, rows[n]) for n in names),
            results=tuple(_result(rows[n]) for n in names),
            confidence_updates=tuple(updates),
            residuals=tuple(r.to_dict() for r in residuals),
            disposition=tuple(_disposition(rows[n]) for n in names),
            next_step=_next_step(rows, names),
            reopen_conditions=tuple(
                {"key": u["key"], "status": u["status_after"], "reopen_when": reopen_when(by_key[u["key"]])}
                for u in updates
                if u["status_after"] in ("rejected", "weakened")
            ),
            started_at=started,
            finished_at=_now(),
            timing=str(((cmp.settings or {}).get("timing") or {}).get("text", "")),
            notes=tuple(str(n) for n in (cmp.settings or {}).get("notes", ()) or ()),
        )
        rnd = StudyRound(index, base.baseline_id, summary, decisions, cmp)
        files.append_line(
            self.folder / ROUNDS, {"event": "closed", "round": index, "outcome": rnd.to_dict()}, "study rounds"
        )
        self._rounds[index] = rnd
        self._closed.append(rnd)
        return rnd

    @staticmethod
    def _decision(
        cmp: Comparison, base_row: VariantResult, row: VariantResult, hypothesis: Hypothesis | None
    ) -> DecisionRecord:
        """The comparison's own record for the variant it picked; for every other variant a record
        of its row against the baseline's, on the hypothesis it tested (else the baseline's lead)."""
        if cmp.decision.variant == row.name:
            return cmp.decision
        from workbench.variants.record_builder import build_record

        settings = dict(cmp.settings or {})
        return build_record(
            [base_row, row],
            base_row.name,
            hypothesis=hypothesis,
            problem=str(settings.get("problem", "") or ""),
            notes=list(settings.get("notes", ()) or ()),
            settings=settings,
        )

    # -- accept -------------------------------------------------------------------------------
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
        base = self._require_baseline()
        if not self._rounds:
            raise StudyError(
                f"study {self.name!r} has run no round yet: nothing can be accepted; run study.run_round({{...}}) first"
            )
        if round is not None and not _is_int(round):
            raise InvalidArgumentError(f"round= takes a round number; got {round!r}")
        index = round if round is not None else max(self._rounds)
        if index not in self._rounds:
            raise StudyError(f"study {self.name!r} has no closed round {index}; it has {sorted(self._rounds)}")
        rnd = self._rounds[index]
        if rnd.baseline_id != base.baseline_id:
            raise StudyError(
                f"round {index} was run against baseline {rnd.baseline_id}, but the current baseline is "
                f"{base.baseline_id}: run a round against the current baseline before accepting"
            )
        results = {r["variant"]: r for r in rnd.summary.results}
        if name not in results:
            raise StudyError(f"round {index} has no variant {name!r}; its variants are {sorted(results)}")
        decision = results[name].get("decision")
        if decision not in KEPT:
            raise StudyError(
                f"{name!r} was not kept in round {index}: it was decided {decision!r} "
                f"({results[name].get('reason', '')}); only a kept variant (keep, keep_guarded) "
                f"can become the baseline; nothing was changed"
            )
        if fn is not None and not callable(fn):
            raise InvalidArgumentError(f"accept(fn=...) takes the variant's callable; got {type(fn).__name__}")
        tested = fn is None or self._tested_in_round(rnd, name, fn, untested=untested)
        target = fn or self._round_variants.get(index, {}).get(name)
        if target is None:
            target = self._rebuild_variant(rnd, name)
        if isinstance(target, str):
            from workbench.variants.registry import build

            target = build(target, self._callables(base)[0], name=name)
        _, make_inputs = self._callables(base)
        accepted = {
            "round": index,
            "variant": name,
            "decision": decision,
            "reason": results[name].get("reason", ""),
            "speedup": results[name].get("speedup"),
            "from": base.baseline_id,
        }
        if not tested:
            accepted.update(
                speedup=None,
                untested=True,
                reason=f"accepted with untested=True: this code is not the one round {index} tested, "
                f"so the round's speedup does not carry over; run a round against it",
            )
        if decision == "keep_guarded":
            accepted["guard"] = rnd.decisions[name].guard if name in rnd.decisions else ""
        new = self._new_baseline(
            target,
            make_inputs,
            seed=base.seed,
            label=name,
            options=base.profile_options,
            parent=base,
            accepted_from=accepted,
            mode=base.mode,
        )
        if base.baseline_id in self._sweeps:
            self._sweeps.setdefault(new.baseline_id, self._sweeps[base.baseline_id])
        return new

    def _tested_in_round(self, rnd: StudyRound, name: str, fn: Callable[..., Any], *, untested: bool) -> bool:
        """True when ``fn`` is the code round ``rnd`` tested as ``name``; with ``untested`` False
        where it is not (or cannot be told); a StudyError otherwise."""
        live = self._round_variants.get(rnd.index, {}).get(name)
        if (
            live is not None
            and not isinstance(live, str)
            and (fn is live or identity.unwrap(fn) is identity.unwrap(live))
        ):
            return True
        info = next((v for v in rnd.summary.variants if v.get("name") == name), {})
        recorded_hash, recorded_name = info.get("source_hash"), info.get("qualname")
        given = _tested_code(fn)
        kind = _variant_info(fn).get("kind")
        same_kind = kind == info.get("kind") or (kind == "function" and info.get("kind") in (None, "function", "user"))
        if recorded_hash:
            same = given.get("source_hash") == recorded_hash and given.get("qualname") == recorded_name and same_kind
            why = (
                f"its code (source hash {given.get('source_hash')}, {given.get('qualname')}, {kind}) is not the "
                f"code round {rnd.index} tested as {name!r} (source hash {recorded_hash}, {recorded_name}, "
                f"{info.get('kind')})"
            )
        else:  # a round recorded before source hashes were: the name alone cannot vouch for it
            same = False
            why = (
                f"round {rnd.index} did not record the code of {name!r} (an older workbench wrote it), so "
                f"it cannot be told that this callable is the one it tested"
            )
        if same:
            return True
        if untested:
            return False
        raise StudyError(
            f"study.accept({name!r}, fn=...): {why}. Untested code would become the baseline carrying "
            f"the round's speedup: run a round with it first (study.run_round({{{name!r}: fn}})), or "
            f"pass untested=True to accept it recorded as untested, with no speedup carried; nothing "
            f"was changed"
        )

    def _rebuild_variant(self, rnd: StudyRound, name: str) -> VariantLike:
        info = next((v for v in rnd.summary.variants if v.get("name") == name), {})
        if info.get("fix") and info.get("registry"):  # a catalog fix: rebuilt from its name
            return info["registry"]
        if info.get("kind") == "compiled":
            from workbench.variants.builders import compiled

            base_fn = identity.unwrap(self._callables(self._require_baseline())[0])
            return compiled(base_fn, **(info.get("options") or {}))
        if info.get("registry"):
            return info["registry"]
        raise StudyError(
            f"the callable of variant {name!r} from round {rnd.index} is not in this process (the "
            f"study was reopened): pass it again with study.accept({name!r}, fn=...)"
        )

    # -- display ------------------------------------------------------------------------------
    def to_text(self) -> str:
        lines = [
            f"Study {self.name!r} in {str(self.folder)!r}: {len(self._baselines)} baseline(s), "
            f"{len(self._rounds)} round(s), {len(self._events)} ledger event(s)"
        ]
        for b in self._baselines:
            lines.append(f"  baseline {b.index}: {b.describe()}")
        if self.hypotheses:
            lines.append("  hypotheses of the current baseline:")
            lines += [f"    - [{h.status}, {h.confidence}] {h.category}: {h.title}" for h in self.hypotheses[:5]]
        if self._rounds:
            last = self.rounds[-1]
            lines.append(
                f"  last round {last.index}: " + ", ".join(f"{n} {d.decision}" for n, d in last.decisions.items())
            )
        if self._events:
            lines.append("  ledger:")
            lines += [f"    - {e.describe()}" for e in self.ledger]
        return "\n".join(lines)

    def _repr_markdown_(self) -> str:
        return "```\n" + self.to_text() + "\n```"

    def __repr__(self) -> str:
        base = self.baseline.baseline_id if self.baseline else "none"
        return f"Study({self.name!r}, folder={str(self.folder)!r}, baseline={base}, rounds={len(self._rounds)})"


# -- helpers ------------------------------------------------------------------------------------
def _is_variant(obj: object) -> TypeGuard[Variant]:
    return type(obj).__name__ == "Variant" and dataclasses.is_dataclass(obj) and hasattr(obj, "fn")


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _tested_code(obj: VariantLike) -> dict[str, Any]:
    """What identifies a round's variant code afterwards: its source hash and qualified name
    (nothing for a registry name, which the round rebuilds)."""
    if isinstance(obj, str):
        return {}
    return {"source_hash": identity.source_hash(obj), "qualname": identity.callable_ref(obj).get("qualname")}


def _parse_round_record(rec: dict[str, Any]) -> dict[str, Any]:
    """A rounds.jsonl record, type-checked: {round, outcome (a StudyRound for a closed round),
    comparison_error}; ValueError naming what is wrong."""
    expect_all(rec, {"event": "str", "round": "round"})
    n = rec["round"]
    out: dict[str, Any] = {"round": n, "outcome": None, "comparison_error": None}
    if rec["event"] == "planned":
        expect_all(rec, {"baseline_id": "str?", "at": "str?"})
        from workbench.study.records import expect_items

        expect_items(rec, "predictions", {"key": "str"})
        expect_items(rec, "variants", {"name": "str"})
    elif rec["event"] == "aborted":
        expect_all(rec, {"reason": "str?", "at": "str?"})
    elif rec["event"] == "closed":
        outcome = expect(rec, "outcome", "dict")
        expect_all(
            outcome,
            {"index": "round", "baseline_id": "str", "summary": "dict", "decisions": "dict?", "comparison": "dict?"},
            where="outcome",
        )
        if outcome["index"] != n:
            raise ValueError(f"the outcome is of round {outcome['index']}, the line says round {n}")
        summary = RoundSummary.parse(outcome["summary"])
        decisions = {}
        for name, d in (outcome.get("decisions") or {}).items():
            expect_all(
                d,
                {
                    "decision": "str",
                    "variant": "str",
                    "reason": "str",
                    "problem": "str?",
                    "bottleneck": "str?",
                    "change": "str?",
                    "numerical_class": "str?",
                    "why_safe": "str?",
                    "guard": "str?",
                    "fallback": "str?",
                    "result": "str?",
                    "evidence": "strs?",
                    "rejected_alternatives": "strs?",
                    "remaining_risk": "strs?",
                    "failure_cases": "strs?",
                    "environment": "dict?",
                    "settings": "dict?",
                    "mode": "str?",
                    "fix": "dict?",
                },
                where=f"decisions[{name!r}]",
            )
            decisions[name] = DecisionRecord.from_dict(d)
            decisions[name].to_markdown()
        comparison = None
        if outcome.get("comparison"):
            from workbench.variants.results import Comparison

            try:
                comparison = Comparison.from_dict(outcome["comparison"])
            except Exception as exc:  # noqa: BLE001 - the round stands without it; the reader warns
                out["comparison_error"] = f"{type(exc).__name__}: {exc}"[:300]
        out["outcome"] = StudyRound(n, outcome["baseline_id"], summary, decisions, comparison)
    return out


def _variant_info(obj: VariantLike | None) -> dict[str, Any]:
    if isinstance(obj, str):
        return {"kind": obj, "registry": obj, "options": {}, "description": f"registry variant {obj!r}"}
    if _is_variant(obj):
        info = {
            "kind": obj.kind,
            "options": _plain_options(obj.options),
            "description": obj.description,
            "numerical_class": obj.numerical_class,
            "requires": list(obj.requires),
        }
        fix = (obj.options or {}).get("fix")
        if fix and fix != "eager":  # built from a catalog fix: its name rebuilds it (as a registry name does)
            info.update(fix=str(fix), registry=str(fix), where=str(obj.options.get("fix_where", "") or ""))
            if obj.not_applicable_reason:
                info["not_applicable"] = obj.not_applicable_reason
        return info
    return {"kind": "function", "options": {}, "description": getattr(obj, "__qualname__", "") or type(obj).__name__}


NOT_SWEPT = (
    "not swept: no shape sweep ran before this keep, so where it stops helping is unknown; pass "
    "run_round(..., sweep=make(shape, dtype)) or set_baseline(..., sweep_inputs=...)"
)


def _unswept(record: DecisionRecord, swept: bool) -> DecisionRecord:
    """A keep decided without a sweep says so in its failure cases, rather than "none"."""
    if swept or record.decision != "keep" or record.failure_cases:
        return record
    return dataclasses.replace(record, failure_cases=(NOT_SWEPT,))


def _shape_sweep(
    sweep: ShapeSweep | SweepFactory, make_inputs: Callable[[], Any] | None, dtypes: Sequence[str] | None
) -> ShapeSweep:
    """A ``ShapeSweep`` from a ``make(shape, dtype)`` factory: small, target, large and
    non-power-of-two sizes of the first input's leading dimension, in ``dtypes``."""
    from workbench.variants.sweep import ShapeSweep, sweep_shapes

    if isinstance(sweep, ShapeSweep):
        return sweep if not dtypes else dataclasses.replace(sweep, dtypes=tuple(dtypes))
    if not callable(sweep):
        raise InvalidArgumentError(
            f"sweep= takes make(shape, dtype) -> the argument tuple, or a "
            f"wb.variants.ShapeSweep; got {type(sweep).__name__}"
        )
    args = measure.seeded_inputs(make_inputs, 0)
    first = next((a for a in args if hasattr(a, "shape") and len(a.shape) > 0), None)
    if first is None:
        raise InvalidArgumentError(
            "a shape sweep needs a tensor input with at least one dimension to vary; "
            "pass a wb.variants.ShapeSweep with explicit shapes instead"
        )
    names = tuple(dtypes) if dtypes else (str(first.dtype).replace("torch.", ""),)
    return ShapeSweep(sweep, sweep_shapes(tuple(int(s) for s in first.shape)), names)


def _plain_options(options: Mapping[str, Any]) -> dict[str, Any]:
    return {str(k): (v if isinstance(v, (int, float, str, bool)) or v is None else repr(v)) for k, v in options.items()}


def _testing(
    hyps: list[Hypothesis], variants: Mapping[str, VariantLike], tests: Mapping[str, str | Sequence[str]]
) -> dict[str, list[str]]:
    """hypothesis key -> the variants of this round that test it."""
    unknown = [n for n in tests if n not in variants]
    if unknown:
        raise InvalidArgumentError(
            f"tests= names variants that are not in this round: {unknown}; the round has {list(variants)}"
        )
    out: dict[str, list[str]] = {hypothesis_key(h): [] for h in hyps}
    for name, obj in variants.items():
        kinds = {name}
        rules: tuple[str, ...] = ()
        if isinstance(obj, str):
            kinds.add(obj)
            rules = _fix_rules(obj)
        elif _is_variant(obj):
            kinds.add(obj.kind)
            fix = (obj.options or {}).get("fix")
            if fix:  # a catalog fix tests what suggests it and the rules it is the fix for
                kinds.add(str(fix))
                rules = _fix_rules(str(fix))
        asked = tests.get(name, ())
        wanted = {asked} if isinstance(asked, str) else set(asked)
        for h in hyps:
            key = hypothesis_key(h)
            if kinds & set(h.suggested_variants) or wanted & {key, h.category, h.rule} or h.rule in rules:
                out[key].append(name)
        matched = {w for w in wanted if any(w in (hypothesis_key(h), h.category, h.rule) for h in hyps)}
        if wanted - matched:
            raise InvalidArgumentError(
                f"tests= for {name!r} names {sorted(wanted - matched)}, which the current "
                f"baseline does not propose; its hypotheses are "
                f"{[hypothesis_key(h) for h in hyps]}"
            )
    return out


def _fix_rules(name: str) -> tuple[str, ...]:
    """The hypothesis rules the catalog fix ``name`` is the fix for (``Fix.mechanisms``); () for a name
    the catalog does not have."""
    from workbench.fixes import registry

    try:
        return tuple(registry.get(name).mechanisms)
    except Exception:  # noqa: BLE001 - not a fix (an old registry name, a user's variant)
        return ()


def _split_candidates(variants: Any, candidates: Any) -> tuple[dict[str, VariantLike], FixList | None]:
    """``run_round(run.fixes)`` or ``run_round({...}, candidates=run.fixes)``: the named variants
    and the FixList whose fixes join them."""
    from workbench.fixes import FixList

    if isinstance(variants, FixList):
        if candidates is not None:
            raise InvalidArgumentError(
                "run_round got two lists of fixes: pass run.fixes once, as variants or as candidates="
            )
        variants, candidates = None, variants
    if candidates is not None and not isinstance(candidates, FixList):
        raise InvalidArgumentError(
            f"candidates= takes the fixes of a run (run.fixes, a wb.fixes.FixList); got {type(candidates).__name__}"
        )
    if candidates is not None and variants is not None and not isinstance(variants, Mapping):
        raise InvalidArgumentError(
            f"run_round(variants, candidates=...): variants must be a dict of name -> callable; got "
            f"{type(variants).__name__}"
        )
    if candidates is not None and not candidates.names and not variants:
        why = "; ".join(f"{r.fix}: {r.reason}" for r in candidates.not_applicable) or "no fix's pattern was found"
        raise InvalidArgumentError(f"no fix of these candidates applies, so the round has nothing to run ({why})")
    return dict(variants or {}) if candidates is not None else variants, candidates


def _fix_variants(candidates: FixList, fn: Callable[..., Any]) -> dict[str, VariantLike]:
    """Each fix of ``candidates`` that applies, built on the baseline's callable ``fn`` as a one-factor
    variant named by the fix (``run.fixes.variants(fn=fn)``); one that cannot be built on ``fn`` is a
    not-applicable row saying why (the others still run)."""
    from workbench.fixes import registry
    from workbench.variants.spec import Variant

    out: dict[str, VariantLike] = {}
    for name in candidates.names:
        try:
            out[name] = candidates.variants([name], fn=fn, baseline=BASE)[name]
        except Exception as exc:  # noqa: BLE001 - its row says why; the round goes on
            fix = registry.get(name)
            row = candidates.row(name)
            out[name] = Variant(
                name=name,
                fn=fn,
                kind=fix.kind,
                numerical_class=fix.numerical_class,
                description=fix.changes,
                options={"fix": name, "fix_changes": fix.changes, "fix_where": row.where, "fix_reason": row.reason},
                not_applicable_reason=f"it could not be built on the baseline's callable: {type(exc).__name__}: {exc}",
            )
    return out


def _result(row: VariantResult) -> dict[str, Any]:
    s, t, c = row.speedup, row.timing, row.correctness
    parts = []
    if c is not None:
        parts.append("correct" if c.passed else f"incorrect ({row.reason or c.reason})")
    if t is not None:
        parts.append(f"median {t.median_ms:.4g} ms")
    if s is not None:
        parts.append(f"speedup {s.describe()}")
    parts.append(row.decision_reason or row.reason)
    return {
        "variant": row.name,
        "kind": row.kind,
        "status": row.status,
        "correct": None if c is None else c.passed,
        "max_abs_err": c.max_abs_err if c else None,
        "median_ms": t.median_ms if t else None,
        "speedup": s.point if s else None,
        "speedup_ci": [s.ci_low, s.ci_high] if s else None,
        "decision": row.decision,
        "reason": row.decision_reason or row.reason,
        "text": "; ".join(p for p in parts if p),
    }


def _baseline_check(base: Baseline, base_row: VariantResult, row: VariantResult) -> dict[str, Any]:
    """The baseline as measured alongside this variant: the paired rounds and its drift from the
    recorded baseline median."""
    bt = base_row.timing
    if bt is None:
        return {"variant": row.name, "status": "not timed", "text": "the baseline was not timed in this round"}
    ratio = bt.median_ms / base.median_ms if base.median_ms > 0 else None
    lo, hi = bt.median_ci_ms()
    rec_lo, rec_hi = _recorded_median_ci(base)
    # drifted: more than DRIFT off, and the two medians' intervals apart (the recorded one from its
    # IQR and n, as a box plot's notch), so the spread of either measurement is not called drift
    drifted = ratio is not None and abs(ratio - 1) > DRIFT and (hi < rec_lo or lo > rec_hi)
    pairs = row.speedup.n_pairs if row.speedup is not None else 0
    status = "drifted" if drifted else "ok"
    text = (
        f"{pairs} interleaved rounds paired with the baseline; baseline median {bt.median_ms:.4g} ms here vs "
        f"{base.median_ms:.4g} ms recorded (x{ratio:.3g})"
        if ratio
        else "baseline median not comparable"
    )
    if drifted:
        text += ": the baseline drifted (machine load or state); the paired speedup still holds, absolute times do not"
    if row.speedup is None:
        text = f"not timed against the baseline ({row.status}: {row.reason}); " + text.split("; ", 1)[-1]
    return {
        "variant": row.name,
        "status": status,
        "pairs": pairs,
        "baseline_median_ms": bt.median_ms,
        "recorded_median_ms": base.median_ms,
        "drift": ratio,
        "text": text,
    }


def _recorded_median_ci(base: Baseline) -> tuple[float, float]:
    """An approximate 95% interval of the recorded baseline median: median ± 1.58 IQR / sqrt(n)
    (McGill, Tukey and Larsen's notch), the median itself where the spread was not recorded."""
    if base.n <= 0 or base.iqr_ms <= 0:
        return base.median_ms, base.median_ms
    half = 1.58 * base.iqr_ms / base.n**0.5
    return base.median_ms - half, base.median_ms + half


def _disposition(row: VariantResult) -> dict[str, Any]:
    d = row.decision
    action = {
        "keep": f"kept: accept it with study.accept({row.name!r}); it becomes the new baseline, re-profiled",
        "keep_guarded": f"kept behind a guard: accept it with study.accept({row.name!r}) and keep the guard",
        "micro_only": "not accepted: the gain is negligible end to end",
        "reject": f"rejected ({row.decision_reason or row.reason}); kept in the round's record as evidence",
        "need_more_evidence": "undecided: " + (row.decision_reason or row.reason or "rerun with a longer budget"),
    }.get(d, d)
    return {"variant": row.name, "decision": d, "action": action}


def _next_step(rows: Mapping[str, VariantResult], names: list[str]) -> str:
    kept = [n for n in names if rows[n].decision in KEPT]
    if kept:
        best = max(kept, key=lambda n: speedup.point if (speedup := rows[n].speedup) else 0.0)
        return (
            f"accept {best!r} (study.accept({best!r})): the study re-profiles it as the new baseline and ranks "
            f"its hypotheses afresh before the next round"
        )
    undecided = [n for n in names if rows[n].decision == "need_more_evidence"]
    if undecided:
        return (
            f"no change kept; {', '.join(undecided)} undecided: rerun them with a longer budget_s or a larger "
            f"input, against the same baseline"
        )
    return "no change kept: the baseline stays; try the next hypothesis's suggested variants"
