"""A study's rounds run and accepted: ``run`` (a round of one-factor variants against the current
baseline through ``wb.compare``: its plan written before it runs, its outcome after, the ledger's
hypotheses it tested updated), ``accept`` (a kept variant made the new baseline, re-profiled) and
the pieces of a round's summary (results, baseline checks, dispositions, next step).

What is written is the store's (``workbench.study.store``); the ledger's events are written through
``workbench.study.ledger_view``; baselines are made by ``workbench.study.baselining``.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, Callable, Literal, Mapping, Sequence

import workbench.study.identity as identity
import workbench.study.measure as measure
from workbench.errors import InvalidArgumentError, StudyError
from workbench.study.ledger import hypothesis_key, reopen_when
from workbench.study.residuals import classify_pair, combine, prediction
from workbench.study.rounds import StudyRound
from workbench.study.store import is_int, now
from workbench.study.summary import RoundSummary
from workbench.study.variant_info import is_variant, plain_options, tested_code, variant_info
from workbench.variants.decision import DecisionRecord

if TYPE_CHECKING:
    from workbench.fixes import FixList
    from workbench.hypotheses.hypothesis import Hypothesis
    from workbench.study.baseline import Baseline
    from workbench.study.baselining import Baselines
    from workbench.study.ledger_view import LedgerView
    from workbench.study.store import StudyStore
    from workbench.variants.results import Comparison, VariantResult
    from workbench.variants.spec import VariantLike
    from workbench.variants.sweep import ShapeSweep, SweepFactory

BASE = "baseline"  # the baseline's row in every round's comparison
KEPT = ("keep", "keep_guarded")
DRIFT = 0.10  # a round's baseline median more than 10% off the recorded one (and outside its CI)


class RoundRunner:
    """The rounds of the study in ``store``: run against ``baselines``' current one, accepted as
    the next; ``round_variants`` keeps each round's variants of this process (for ``accept``)."""

    def __init__(self, store: StudyStore, ledger: LedgerView, baselines: Baselines) -> None:
        self.store = store
        self.ledger = ledger
        self.baselines = baselines
        self.round_variants: dict[int, dict[str, VariantLike]] = {}

    # -- rounds -------------------------------------------------------------------------------
    def run(
        self,
        variants: Mapping[str, VariantLike] | FixList | None = None,
        *,
        candidates: FixList | None = None,
        tests: Mapping[str, str | Sequence[str]] | None = None,
        sweep: ShapeSweep | SweepFactory | Literal[False] | None = None,
        dtypes: Sequence[str] | None = None,
        **compare_options: Any,
    ) -> StudyRound:
        """``Study.run_round`` (see there): the round planned, run, closed and recorded."""
        base = self.baselines.require()
        sweep = sweep if sweep is not None else self.baselines.sweeps.get(base.baseline_id)
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
        self.store.check_writable("run")
        fn, make_inputs = self.baselines.callables(base)
        if candidates is not None:
            variants = {**variants, **{n: v for n, v in _fix_variants(candidates, fn).items() if n not in variants}}
        hyps = [h for h in self.ledger.hypotheses(base) if h.status != "rejected"]
        testing = _testing(hyps, variants, tests or {})
        predictions = [
            prediction(h, testing[hypothesis_key(h)], base.median_ms) for h in hyps if testing[hypothesis_key(h)]
        ]
        started = now()
        described = [
            {
                "name": n,
                **variant_info(v),
                **tested_code(v),
                "tests": [p["key"] for p in predictions if n in p["variants"]],
            }
            for n, v in variants.items()
        ]
        # the plan is written before the round runs, numbered under the rounds file's lock
        index = self.store.plan_round(
            {
                "baseline_id": base.baseline_id,
                "at": started,
                "predictions": predictions,
                "variants": described,
                "reset_procedure": list(base.reset_procedure),
                "compare_options": plain_options(compare_options),
            }
        )
        baseline_obj = dataclasses.replace(fn, name=BASE) if is_variant(fn) else fn
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
            self.store.abort_round(index, f"{type(exc).__name__}: {exc}")
            raise
        rnd = self.close(index, base, cmp, hyps, predictions, described, started, swept=bool(options.get("sweep")))
        self.round_variants[index] = dict(variants)
        return rnd

    def close(
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
        """Round ``index`` closed: each hypothesis it tested updated in the ledger, each variant
        decided, its summary written (``rounds.jsonl``)."""
        base_row = cmp[BASE]
        names = [d["name"] for d in described]
        rows = {n: cmp[n] for n in names}
        min_effect = float((cmp.settings or {}).get("min_effect", 0.03) or 0.03)
        by_key = {hypothesis_key(h): h for h in hyps}
        residuals, updates, at = [], [], now()
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
                self.ledger.record_test(
                    pred["key"], baseline_id=base.baseline_id, round=index, update=update, tested=tested, at=at
                )
        lead = {
            n: next((by_key[p["key"]] for p in predictions if n in p["variants"]), hyps[0] if hyps else None)
            for n in names
        }
        decisions = {n: _unswept(self.decision(cmp, base_row, rows[n], lead[n]), swept) for n in names}
        summary = RoundSummary(
            study=self.store.name,
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
            finished_at=now(),
            timing=str(((cmp.settings or {}).get("timing") or {}).get("text", "")),
            notes=tuple(str(n) for n in (cmp.settings or {}).get("notes", ()) or ()),
        )
        rnd = StudyRound(index, base.baseline_id, summary, decisions, cmp)
        self.store.close_round(rnd)
        return rnd

    @staticmethod
    def decision(
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
        """``Study.accept`` (see there): the kept variant ``name`` of a round re-profiled as the new baseline."""
        base = self.baselines.require()
        rounds = self.store.rounds
        if not rounds:
            raise StudyError(
                f"study {self.store.name!r} has run no round yet: nothing can be accepted; run study.run_round({{...}}) first"
            )
        if round is not None and not is_int(round):
            raise InvalidArgumentError(f"round= takes a round number; got {round!r}")
        index = round if round is not None else max(rounds)
        if index not in rounds:
            raise StudyError(f"study {self.store.name!r} has no closed round {index}; it has {sorted(rounds)}")
        rnd = rounds[index]
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
        tested = fn is None or self.tested_in_round(rnd, name, fn, untested=untested)
        target = fn or self.round_variants.get(index, {}).get(name)
        if target is None:
            target = self.rebuild_variant(rnd, name)
        if isinstance(target, str):
            from workbench.variants.registry import build

            target = build(target, self.baselines.callables(base)[0], name=name)
        _, make_inputs = self.baselines.callables(base)
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
        new = self.baselines.new(
            target,
            make_inputs,
            seed=base.seed,
            label=name,
            options=base.profile_options,
            parent=base,
            accepted_from=accepted,
            mode=base.mode,
        )
        if base.baseline_id in self.baselines.sweeps:
            self.baselines.sweeps.setdefault(new.baseline_id, self.baselines.sweeps[base.baseline_id])
        return new

    def tested_in_round(self, rnd: StudyRound, name: str, fn: Callable[..., Any], *, untested: bool) -> bool:
        """True when ``fn`` is the code round ``rnd`` tested as ``name``; with ``untested`` False
        where it is not (or cannot be told); a StudyError otherwise."""
        live = self.round_variants.get(rnd.index, {}).get(name)
        if (
            live is not None
            and not isinstance(live, str)
            and (fn is live or identity.unwrap(fn) is identity.unwrap(live))
        ):
            return True
        info = next((v for v in rnd.summary.variants if v.get("name") == name), {})
        recorded_hash, recorded_name = info.get("source_hash"), info.get("qualname")
        given = tested_code(fn)
        kind = variant_info(fn).get("kind")
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

    def rebuild_variant(self, rnd: StudyRound, name: str) -> VariantLike:
        """The variant ``name`` of round ``rnd`` made again where its callable is not in this process:
        a catalog fix or a registry variant by its name, a compile of the baseline's callable."""
        info = next((v for v in rnd.summary.variants if v.get("name") == name), {})
        if info.get("fix") and info.get("registry"):  # a catalog fix: rebuilt from its name
            return info["registry"]
        if info.get("kind") == "compiled":
            from workbench.variants.builders import compiled

            base_fn = identity.unwrap(self.baselines.callables(self.baselines.require())[0])
            return compiled(base_fn, **(info.get("options") or {}))
        if info.get("registry"):
            return info["registry"]
        raise StudyError(
            f"the callable of variant {name!r} from round {rnd.index} is not in this process (the "
            f"study was reopened): pass it again with study.accept({name!r}, fn=...)"
        )


# -- helpers ------------------------------------------------------------------------------------
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
        elif is_variant(obj):
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
