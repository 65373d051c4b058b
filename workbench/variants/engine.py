"""One comparison run, phase by phase: correctness, then timing rounds extended while undecided,
then what changed, then a decision per row.  ``wb.compare`` (compare.py) adds the shape sweep,
the hypothesis verdict and the DecisionRecord; the sweep (sweep.py) runs its cases through here,
so neither imports the other.

Every call of a variant is isolated: an exception, ``sys.exit``, a hang (``time_limit_s``, in the
timed rounds too), an output that cannot be read (meta, sparse) or a changed input end up in that
variant's row with the reason, and the rest of the comparison goes on.  ``Phases`` records what
finished, so that a KeyboardInterrupt can say so (``ComparisonInterrupted``).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from typing import AbstractSet, Any, Callable, Mapping

import workbench.fixes.registry as registry
import workbench.variants.cheats as cheats
from workbench.errors import InvalidArgumentError
from workbench.measurement import Measurement
from workbench.variants.bandwidth import copy_gbps, machine_copy_gbps
from workbench.variants.correctness_phase import (
    Live,
    describe_exception,
    guarded_call,
    reference_callable,
    run_checks,
    state_change_flags,
)
from workbench.variants.decision import CHEAT_PREFIXES, classify
from workbench.variants.footprint import footprint_delta, profile_footprint
from workbench.variants.isolation import StateGuard
from workbench.variants.output_check import (
    TRAINING,
    check_mode,
    check_training,
    reached_params,
    resolve_mode,
    training_paths,
    training_step,
)
from workbench.variants.reach import explicit, find_reach, merge
from workbench.variants.results import VariantResult
from workbench.variants.settings import INTERIM_CONFIDENCE, CompareSettings
from workbench.variants.spec import Variant, as_variant
from workbench.variants.state import NOTHING_REACHED_TEXT, STATE_TEXT, STATELESS_TEXT, StateTracker
from workbench.variants.stats import PairedEvidence, family_speedups, holm
from workbench.variants.timing import (
    InterleavedResult,
    Timed,
    Timer,
    TimingSession,
    pick_timer,
    shared_calls_per_sample,
)
from workbench.variants.tree import clone_tensors, tensor_leaves

Progress = Callable[[str, str], None]  # (stage, variant name) -> None


class ComparisonInterrupted(KeyboardInterrupt):
    """The user interrupted a comparison; the message says what had finished (``.finished``)."""

    def __init__(self, message: str, finished: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.finished = finished


@dataclass
class Phases:
    """What has finished so far, in words (for an interrupted comparison)."""

    done: list[str] = field(default_factory=list)
    current: str = "preparing the variants"

    def start(self, what: str) -> None:
        self.current = what

    def finish(self, what: str) -> None:
        self.done.append(what)

    def interrupted(self) -> ComparisonInterrupted:
        finished = "; ".join(self.done) or "nothing yet"
        return ComparisonInterrupted(
            f"comparison interrupted during {self.current}; finished: {finished}", tuple(self.done)
        )


@dataclass
class Outcome:
    """A run's rows and what the record needs besides them."""

    results: list[VariantResult]
    lives: list[Live]
    base: Live
    precision: str
    notes: list[str]
    timing: dict[str, Any]
    roofs: dict[str, Any]
    fresh: bool
    mode: str = "inference"  # "training": gradients checked, forward + backward timed
    state: str = ""  # how reached state was handled (settings["state"])
    reach: dict[str, Any] = field(default_factory=dict)  # what the variants reach, counted
    reduced: dict[str, Any] = field(default_factory=dict)  # variant -> the tolerance rows it was judged with
    trace_paths: dict[str, str] = field(default_factory=dict)  # variant -> its profiled call's Chrome trace


def run(
    variants: Mapping[str, Any],
    inputs: Any,
    settings: CompareSettings,
    *,
    baseline: str | None = None,
    reference: Callable[..., Any] | None = None,
    progress: Progress | None = None,
    phases: Phases | None = None,
    mode: str | None = None,
    model: Any = None,
    optimizer: Any = None,
    params: Any = None,
) -> Outcome:
    """One comparison; ``model``/``optimizer``/``params``: state to snapshot and compare besides what
    the variants' callables are found to reach (reach.py)."""
    phases = phases or Phases()
    check_mode(mode)
    lives, base = prepare(variants, baseline)
    tracker = attach_state(lives, base, explicit(model, optimizer, params))
    try:
        out = _run(lives, base, inputs, settings, reference=reference, progress=progress, phases=phases, mode=mode)
    finally:
        tracker.final_restore()  # the user's objects as they were before the comparison
    if tracker.failed_restore:
        out.notes.append("could not restore: " + "; ".join(tracker.failed_restore))
    return out


def attach_state(lives: list[Live], base: Live, extra: list[Any]) -> StateTracker:
    """Find what each variant reaches, snapshot all of it once, and give every Live the tracker and
    its names (a tensor shared with the baseline under the baseline's name)."""
    for lv in lives:
        try:
            lv.reach = find_reach(lv.variant.fn, extra=extra)
            own = find_reach(lv.variant.fn) if extra else lv.reach
        except Exception:  # noqa: BLE001 - a walk that fails reaches nothing
            lv.reach = own = find_reach(extra=extra)
        own_ids = {id(t) for t in list(own.params.values()) + list(own.buffers.values())}
        lv.extra_ids = {
            id(t) for t in list(lv.reach.params.values()) + list(lv.reach.buffers.values()) if id(t) not in own_ids
        }
    tracker = StateTracker(merge([base.reach] + [lv.reach for lv in lives if lv is not base]))
    base_names = base.reach.names_by_id()
    base.names = dict(base_names)
    for lv in lives:
        if lv is not base:
            own = list(lv.reach.params.values()) + list(lv.reach.buffers.values()) + list(lv.reach.data.values())
            lv.names = {id(t): base_names[id(t)] for t in own if id(t) in base_names}
        lv.tracker = tracker
    return tracker


def _run(
    lives: list[Live], base: Live, inputs: Any, settings: CompareSettings, *, reference, progress, phases, mode
) -> Outcome:
    say = progress or (lambda stage, name: None)
    tracker = base.tracker
    make_inputs, fresh = input_factory(inputs)
    phases.start("the correctness checks")
    say("correctness", "")
    precision, notes = run_checks(
        lives,
        base,
        make_inputs,
        checks=settings.checks,
        limit_s=settings.time_limit_s,
        tolerances=settings.tolerance_overrides,
        reference=reference,
    )
    notes += [n for n in tracker.notes if n not in notes]
    if not fresh:
        notes.append("fixed inputs: every check used the same values; pass a callable for fresh ones")
    _mark_incorrect(lives, precision, settings.checks)
    phases.finish(f"correctness checks of {', '.join(lv.name for lv in lives)}")
    timing_args = make_inputs()
    tracker.begin_check()
    mode = resolve_mode(mode, base.variant.fn, timing_args, tracker=tracker, self_backward=base.self_backward)
    train_paths: list[str] | None = None
    if mode == TRAINING:
        phases.start("the gradient checks (training path)")
        say("gradients", "")
        notes += [
            n
            for n in check_training(
                lives,
                base,
                make_inputs,
                checks=settings.checks,
                tolerances=settings.tolerance_overrides,
                reference=reference,
                reference_fn=reference_callable,
                precision=precision,
            )
            if n not in notes
        ]
        _mark_incorrect(lives, precision, settings.checks)
        train_paths = training_paths(base.variant.fn, timing_args, params=reached_params(base))
        notes.append(
            "training path: " + _gradients_compared_text(lives, base) + "; each variant is timed as a "
            "training step (forward and backward; a call that runs its own backward is timed as it is)"
        )
        phases.finish("the gradient checks")
    phases.start("the timed rounds")
    say("timing", "")
    timed, bytes_moved, roofs, summary = time_all(
        lives, base, timing_args, settings, notes, phases, say, train_paths=train_paths
    )
    phases.finish(f"timing ({summary['rounds']} rounds)")
    footprints: dict[str, dict[str, Any]] = {}
    trace_paths: dict[str, str] = {}
    if settings.profile:
        phases.start("the profiled call of each variant")
        footprints = _footprints(lives, timing_args, say, trace_paths)
        phases.finish("the profiled calls")
    speedups = _family(timed, base.name, settings)
    results = [
        _result(lv, base, timed, speedups, footprints, bytes_moved, roofs, precision, settings, mode) for lv in lives
    ]
    results = [_say_budget(r, summary) for r in results]
    stateful = [lv.name for lv in lives if lv.stateful]
    state = STATE_TEXT if stateful else STATELESS_TEXT if tracker.holds_state else NOTHING_REACHED_TEXT
    reduced = {lv.name: _reduced_rows(lv) for lv in lives if lv.reduced is not None}
    return Outcome(
        results,
        lives,
        base,
        precision,
        notes,
        summary,
        roofs,
        fresh,
        mode,
        state=state,
        reach=tracker.reach.describe(),
        reduced=reduced,
        trace_paths=trace_paths,
    )


def _reduced_rows(lv: Live) -> dict[str, Any]:
    assert lv.reduced is not None, "only a reduced-precision variant has these rows"
    out_r, out_a = (lv.out_tolerances or {}).get("float32", (0.0, 0.0))
    g_r, g_a = (lv.grad_tolerances or {}).get("float32", (0.0, 0.0))
    return {
        "dtype": lv.reduced[0],
        "what": lv.reduced[1],
        "outputs": {"rtol": float(out_r), "atol": float(out_a)},
        "gradients": {"rtol": float(g_r), "atol": float(g_a)},
    }


def compared_counts(lv: Live) -> dict[str, int]:
    """How many distinct outputs, gradients, parameter values, optimizer states and buffers its checks compared."""
    counts = {
        "outputs": 0,
        "input_gradients": 0,
        "parameter_gradients": 0,
        "parameter_values": 0,
        "optimizer_states": 0,
        "buffers": 0,
    }
    for path in {c.path for c in lv.checks}:
        if path.startswith("grad arg"):
            counts["input_gradients"] += 1
        elif path.startswith("grad "):
            counts["parameter_gradients"] += 1
        elif path.startswith("value "):
            counts["parameter_values"] += 1
        elif path.startswith("optimizer state "):
            counts["optimizer_states"] += 1
        elif path.startswith("buffer "):
            counts["buffers"] += 1
        elif path != "grad":
            counts["outputs"] += 1
    return counts


def _gradients_compared_text(lives: list[Live], base: Live) -> str:
    cands = [lv for lv in lives if lv is not base and lv.checks]
    if not cands:
        return "no candidate's gradients were compared"
    c = compared_counts(cands[0])
    return describe_counts(c)


def describe_counts(c: dict[str, int]) -> str:
    parts = []
    for key, word in (
        ("input_gradients", "input gradient"),
        ("parameter_gradients", "parameter gradient"),
        ("parameter_values", "updated parameter value"),
        ("optimizer_states", "optimizer state"),
        ("buffers", "buffer"),
    ):
        n = c.get(key, 0)
        if n:
            parts.append(f"{n} {word}{'s' if n != 1 else ''}")
    return (", ".join(parts) + " compared against the baseline's") if parts else "no gradient was compared"


def prepare(variants: Mapping[str, Any], baseline: str | None) -> tuple[list[Live], Live]:
    if not isinstance(variants, Mapping) or not variants:
        raise InvalidArgumentError(
            "compare() needs a non-empty dict of name -> callable, e.g. "
            "{'eager': f, 'compiled': wb.variants.compiled(f)}"
        )
    names = list(variants)
    base_name = baseline or ("eager" if "eager" in variants else names[0])
    if base_name not in variants:
        raise InvalidArgumentError(f"baseline {base_name!r} is not among the variants {names}")
    base_obj = variants[base_name]
    if isinstance(base_obj, str):
        raise InvalidArgumentError(f"the baseline {base_name!r} must be a callable, not a registry name")
    base_variant = as_variant(base_name, base_obj)
    built: dict[str, Variant] = {}
    for name, obj in variants.items():
        if isinstance(obj, str):
            built[name] = _built_from_catalog(obj, base_variant.fn, name)
        else:
            built[name] = base_variant if name == base_name else as_variant(name, obj)
    lives = [Live(built[base_name])] + [Live(v) for n, v in built.items() if n != base_name]
    for live in lives:
        reason = live.variant.applicability()
        if reason:
            live.fail("not_applicable", reason)
    if not lives[0].runnable:
        raise InvalidArgumentError(
            f"the baseline {base_name!r} cannot run here ({lives[0].reason}); "
            f"choose a baseline that runs on this machine"
        )
    return lives, lives[0]


def _built_from_catalog(fix_name: str, fn: Callable[..., Any], name: str) -> Variant:
    """The catalog's fix ``fix_name`` of the baseline's function; a fix that cannot be built from this code
    (a model it cannot copy or trace, a transform that failed or changed the model in place) is a row that
    never runs, with the reason: the rest of the comparison goes on. An unknown name is the caller's error."""
    from workbench.errors import RegistryError
    from workbench.fixes.listing import not_applicable_variant

    try:
        return registry.build(fix_name, fn, name=name)
    except RegistryError:
        raise
    except Exception as exc:  # noqa: BLE001 - the fix's own failure goes into its row
        made = not_applicable_variant(
            registry.get(fix_name), fn, f"it could not be built from this code: {type(exc).__name__}: {exc}", ""
        )
        made.name = name
        return made


def input_factory(inputs: Any) -> tuple[Callable[[], tuple[Any, ...]], bool]:
    def as_args(value: Any) -> tuple[Any, ...]:
        return value if isinstance(value, tuple) else (value,)

    if inputs is None:
        return (lambda: ()), True
    if callable(inputs):
        return (lambda: as_args(inputs())), True
    fixed = as_args(tuple(inputs) if isinstance(inputs, list) else inputs)
    return (lambda: clone_tensors(fixed)), False


def _mark_incorrect(lives: list[Live], precision: str, checks: int) -> None:
    for live in lives[1:]:
        result = live.correctness(checks, precision)
        if not live.runnable or result is None or result.passed:
            continue
        if result.cannot_judge:
            live.add_flags([f"cannot judge correctness: {result.reason}"])
        else:
            live.fail("incorrect", result.reason)


# -- timing -------------------------------------------------------------------------------------
def time_all(
    lives: list[Live],
    base: Live,
    args: tuple[Any, ...],
    settings: CompareSettings,
    notes: list[str],
    phases: Phases,
    say: Progress | None = None,
    train_paths: list[str] | None = None,
) -> tuple[Any, int, dict[str, Any], dict[str, Any]]:
    """Calibrate, run the rounds, extend them while undecided; returns (result, compulsory bytes,
    roofs, a summary of the rounds for the record). ``train_paths``: a training path, timed as
    forward and backward (the inputs at those paths take gradients)."""
    ok, out = guarded_call(base, args, settings.time_limit_s)
    if not ok:
        raise InvalidArgumentError(
            f"the baseline {base.name!r} failed before timing ({base.status}: "
            f"{base.reason}); fix it or choose another baseline= variant"
        )
    on_cuda = any(t.device.type == "cuda" for _, t in tensor_leaves(args))
    timer = settings.make_timer() or pick_timer(on_cuda)
    runnable = [lv for lv in lives if lv.runnable]
    mutating = tuple(lv.name for lv in runnable if lv.mutated)
    items = [
        Timed(
            lv.name,
            lv.variant.fn if train_paths is None or lv.self_backward else training_step(lv.variant.fn, train_paths),
            clone_tensors(args),
        )
        for lv in runnable
    ]
    tracker = base.tracker
    restore = tracker.restore if tracker is not None and any(lv.stateful for lv in lives) else None
    session = TimingSession(
        items, timer, seed=settings.seed, limit_s=settings.time_limit_s, mutating=mutating, before_sample=restore
    )
    pristine = clone_tensors(args)
    settled = {
        lv.name
        for lv in runnable
        if not lv.variant.timing_meaningful
        or any(f.startswith(CHEAT_PREFIXES + ("changed global state", "cannot judge")) for f in lv.flags)
    }
    with StateGuard():
        _calibrate(session, {lv.name: lv for lv in runnable}, timer)
        session.run(min_rounds=settings.min_rounds, max_rounds=settings.round_cap, budget_s=settings.budget_s)
        extensions = _extend(session, base.name, settings, phases, settled, say)
    if tracker is not None:
        tracker.restore()
    result = session.result()
    _apply_timing_failures(lives, result, base)
    if any(_inputs_changed(pristine, pooled) for pooled in session.pool):
        notes.append(
            "the inputs changed during the timed rounds: a variant writes them on later calls; "
            "the timings after that ran on other values"
        )
    if mutating:
        notes.append(
            f"{', '.join(mutating)} change their inputs in place: each was timed on its own copy, "
            f"restored before every sample"
        )
    nbytes = cheats.compulsory_bytes(args, out)
    device = "cuda" if on_cuda else "cpu"
    roofs = {"machine_gbps": machine_copy_gbps(device), "same_size_gbps": copy_gbps(max(nbytes, 1), device)}
    summary = {
        "rounds": result.rounds,
        "spent_s": round(result.spent_s, 3),
        "budget_s": settings.budget_s,
        "cap_s": settings.timing_cap_s,
        "round_cap": settings.round_cap,
        "extensions": extensions,
        "looks": list(result.looks),
        "timer": getattr(timer, "timer", type(timer).__name__),
        "family_size": max(0, len(result.measurements) - 1),
        "confidence": settings.confidence,
        "interim_confidence": INTERIM_CONFIDENCE,
        "min_effect": settings.min_effect,
    }
    share = getattr(timer, "waited_share", lambda: None)()
    summary["cpu_wait_share"] = share
    if share is not None and share >= 0.05:
        notes.append(
            f"the machine is loaded: {share:.0%} of the timed wall time went to other processes "
            f"(run-queue wait, read from /proc schedstat); it was taken out of each sample"
        )
    summary["text"] = _summary_text(summary)
    return result, nbytes, roofs, summary


def _calibrate(session: TimingSession, lives: dict[str, Live], timer: Timer) -> None:
    """Calls per sample for each variant (under the same guard as the rounds), then one shared
    count so that every variant's block warms caches alike."""
    from workbench.variants.isolation import CallDeadline, SettingsWatch, VariantTimeout
    from workbench.variants.timing import calibrate

    watch = SettingsWatch()
    with CallDeadline(session.limit_s or 1e9) as deadline:
        for item in list(session.items):
            lv = lives[item.name]
            if session.before_sample is not None:
                session.before_sample()
            deadline.arm()
            try:
                calibrate(item, timer, lv.warm_call_ms or lv.first_call_ms or 1.0)
                deadline.disarm()
            except VariantTimeout:
                deadline.disarm()
                session.failures[item.name] = (
                    "timeout",
                    f"a call while calibrating the timing did not return within {session.limit_s:g} s; not timed",
                )
            except KeyboardInterrupt:
                deadline.disarm()
                raise
            except BaseException as exc:  # noqa: BLE001
                deadline.disarm()
                session.failures[item.name] = (
                    "error",
                    f"{describe_exception(exc)} on a later call (while calibrating the timing)",
                )
            finally:
                changed = watch.restore()
                if changed:
                    session.state_changes.setdefault(item.name, []).extend(changed)
    active = session.active
    if active:
        shared_k = shared_calls_per_sample(active)
        for item in active:
            item.calls_per_sample = shared_k


def undecided(session: TimingSession, base_name: str, settings: CompareSettings) -> list[str]:
    """Candidates whose interval is too wide to decide: wider than ``min_effect`` and not
    excluding 1 at the interim level (Holm over the family)."""
    res = session.result()
    if base_name not in res.measurements:
        return []
    base = res.measurements[base_name].samples_ms
    cands = {n: m.samples_ms for n, m in res.measurements.items() if n != base_name}
    if not cands:
        return []
    evidence = {n: PairedEvidence(base, c) for n, c in cands.items()}
    p = {n: e.p_value() for n, e in evidence.items()}
    strong = holm(p, 1 - INTERIM_CONFIDENCE)
    final = holm(p, 1 - settings.confidence)
    out = []
    for name, e in evidence.items():
        if strong[name][0]:
            continue  # decided early, at the strict level
        lo, hi = e.log_interval(final[name][1])
        if hi - lo <= math.log1p(settings.min_effect):
            continue  # precise enough
        out.append(name)
    return out


def _extend(
    session: TimingSession,
    base_name: str,
    settings: CompareSettings,
    phases: Phases,
    settled: AbstractSet[str] = frozenset(),
    say: Progress | None = None,
) -> list[dict]:
    """More rounds while a candidate is undecided (those whose verdict does not rest on the
    timing, ``settled``, do not count), up to the settings' cap."""
    extensions: list[dict] = []
    session.looks.append(session.rounds)
    while True:
        if base_name in session.failures:
            break
        wide = [n for n in undecided(session, base_name, settings) if n not in settled]
        left_s = settings.timing_cap_s - session.spent_s
        left_rounds = settings.round_cap - session.rounds
        if not wide or left_s <= 0 or left_rounds <= 0:
            break
        chunk_s = min(left_s, max(settings.budget_s / 2, session.spent_s / 2, 1e-3))
        phases.start(f"the timed rounds (extension {len(extensions) + 1}: {', '.join(wide)} undecided)")
        if say is not None:
            say("timing", f"more rounds: {', '.join(wide)} undecided after {session.rounds} rounds")
        before = session.rounds
        session.run(min_rounds=1, max_rounds=left_rounds, budget_s=chunk_s)
        session.looks.append(session.rounds)
        extensions.append({"undecided": wide, "rounds_added": session.rounds - before})
        phases.finish(f"timing extension {len(extensions)} ({session.rounds - before} more rounds)")
    return extensions


def _say_budget(r: VariantResult, summary: dict[str, Any]) -> VariantResult:
    """A verdict left within noise says when the budget, not the evidence, ended the rounds."""
    if r.decision != "need_more_evidence" or "within noise" not in r.decision_reason:
        return r
    spent_all = summary["spent_s"] >= 0.95 * summary["cap_s"] or summary["rounds"] >= summary["round_cap"]
    if not spent_all:
        return r
    return r.with_(
        decision_reason=f"{r.decision_reason} (the timing budget ended before it could decide: "
        f"{summary['rounds']} rounds in {summary['spent_s']:.3g} s of at most "
        f"{summary['cap_s']:g} s; raise budget_s or max_budget_s)"
    )


def _summary_text(s: dict[str, Any]) -> str:
    text = (
        f"{s['rounds']} interleaved rounds in {s['spent_s']:.3g} s of timing (budget {s['budget_s']:g} s, "
        f"extendable to {s['cap_s']:g} s / {s['round_cap']} rounds while undecided)"
    )
    if s["extensions"]:
        names = sorted({n for e in s["extensions"] for n in e["undecided"]})
        text += f"; extended {len(s['extensions'])} time(s) for {', '.join(names)}"
    if s["family_size"] > 1:
        text += (
            f"; {s['family_size']} candidates against one baseline: family-wise error held at "
            f"{1 - s['confidence']:.0%} (Holm)"
        )
    return text


def _inputs_changed(a: Any, b: Any) -> bool:
    from workbench.variants.correctness_phase import changed_inputs

    return bool(changed_inputs(a, b))


def _apply_timing_failures(lives: list[Live], result: InterleavedResult, base: Live) -> None:
    for lv in lives:
        changes = list(result.state_changes.get(lv.name, ()))
        if changes:
            lv.add_flags(
                [
                    f"{f} (while timed)" if not f.startswith("patched timer") else f"{f} (again while timed)"
                    for f in state_change_flags(changes)
                ]
            )
        failure = result.failures.get(lv.name)
        if failure and lv.runnable:
            if lv is base:
                raise InvalidArgumentError(
                    f"the baseline {base.name!r} failed during timing ({failure[0]}: "
                    f"{failure[1]}); fix it or choose another baseline= variant"
                )
            lv.fail(*failure)


def _footprints(
    lives: list[Live], args: tuple[Any, ...], say: Progress, trace_paths: dict[str, str] | None = None
) -> dict[str, dict[str, Any]]:
    """Each runnable variant's profiled call; its Chrome trace is kept in a temporary file (``trace_paths``)."""
    import tempfile

    out = {}
    folder = tempfile.mkdtemp(prefix="workbench-variants-") if trace_paths is not None else None
    if folder is not None:
        import atexit
        import shutil

        atexit.register(shutil.rmtree, folder, True)  # the traces live as long as the process
    for i, lv in enumerate(lives):
        if lv.runnable:
            say("profile", lv.name)
            if lv.tracker is not None:
                lv.tracker.restore()
            path = None if folder is None else os.path.join(folder, f"variant-{i}.pt.trace.json")
            try:
                with StateGuard():
                    out[lv.name] = profile_footprint(lv.variant.fn, clone_tensors(args), trace_to=path)
                if path is not None and trace_paths is not None and os.path.exists(path):
                    trace_paths[lv.name] = path
            except KeyboardInterrupt:
                raise
            except BaseException as exc:  # noqa: BLE001 - the variant's failure, in its row
                if lv is lives[0]:
                    continue  # the baseline's footprint is only context
                lv.fail("error", f"{describe_exception(exc)} on a later call (the profiled call)")
            finally:
                if lv.tracker is not None:
                    lv.tracker.restore()
    return out


# -- rows ---------------------------------------------------------------------------------------
def _family(timed: InterleavedResult, base_name: str, settings: CompareSettings) -> dict[str, Any]:
    base_timing = timed.measurements.get(base_name)
    cands = {n: m.samples_ms for n, m in timed.measurements.items() if n != base_name}
    if base_timing is None or not cands:
        return {}
    return family_speedups(base_timing.samples_ms, cands, settings.confidence)


def _result(
    lv: Live,
    base: Live,
    timed: InterleavedResult,
    speedups: dict,
    footprints: dict,
    nbytes: int,
    roofs: dict,
    precision: str,
    settings: CompareSettings,
    mode: str = "inference",
) -> VariantResult:
    v = lv.variant
    timing = timed.measurements.get(lv.name) if lv.runnable else None
    speedup = None
    flags = list(lv.flags)
    base_timing = timed.measurements.get(base.name)
    if timing is not None:
        flags += list(timing.warnings)
        if lv is not base and base_timing is not None:
            speedup = speedups[lv.name]
            if speedup.noisy:
                flags.append(f"noisy: the speedup interval spans {speedup.ci_high - speedup.ci_low:.2g}")
            roof = cheats.roofline_flag(nbytes, timing.median_ms, max(roofs.values()))
            base_over = cheats.roofline_flag(nbytes, base_timing.median_ms, max(roofs.values()))
            if roof and v.timing_meaningful and not base_over:
                flags.append(roof)
    fp = footprints.get(lv.name, {})
    if fp and lv is not base and base.name in footprints:
        fp = {**fp, "delta": footprint_delta(fp, footprints[base.name])}
    gbps = nbytes / (timing.median_ms * 1e-3) / 1e9 if timing is not None and timing.median_ms > 0 else None
    numerical = _numerical_class(lv)
    res = VariantResult(
        name=lv.name,
        kind=v.kind,
        status=lv.status,
        reason=lv.reason,
        numerical_class=numerical,
        requires=v.requires,
        correctness=lv.correctness(settings.checks, precision),
        timing=timing,
        setup_ms=lv.setup_ms,
        speedup=speedup,
        flags=tuple(flags),
        footprint=fp,
        bytes_moved=nbytes,
        achieved_gbps=gbps,
        bandwidth_share=(gbps / roofs["same_size_gbps"]) if gbps else None,
        timing_meaningful=v.timing_meaningful,
        max_diff_vs_baseline=(0.0 if lv is base else lv.max_diff_vs_baseline if lv.compared_with_baseline else None),
        max_grad_rel_err=lv.max_grad_rel_err,
        precision=lv.reduced[1] if lv.reduced else "",
        compared=compared_counts(lv),
        stateful=lv.stateful,
    )
    if lv.reduced is not None:
        res = res.with_(flags=res.flags + (_reduced_flag(lv),))
    if lv is base:
        return res.with_(decision="baseline", decision_reason="the reference the others are measured against")
    res = decide(res, base_timing, settings.end_to_end_ms, settings.min_effect)
    return _within_memory_budget(_judge_reduced(res, lv, mode), settings.memory_budget)


def _within_memory_budget(res: VariantResult, budget: float | None) -> VariantResult:
    """``memory_budget=``: a variant kept for its speed whose peak memory is over the budget is kept only behind
    a guard (where the memory is there), with the baseline as the fallback; the reason says by how much."""
    if budget is None or res.decision not in ("keep", "micro_only", "keep_guarded"):
        return res
    peak = (res.footprint or {}).get("peak_memory_bytes")
    if peak is None:
        return res.with_(
            decision_reason=f"{res.decision_reason}; its peak memory was not measured (profile=False?), "
            f"so the memory budget of {int(budget):,} bytes could not be checked"
        )
    if peak <= budget:
        return res
    ratio = (res.footprint.get("delta") or {}).get("peak_memory_bytes")
    change = f" ({peak / (peak - ratio):.2f}x the baseline's)" if ratio is not None and peak - ratio > 0 else ""
    return res.with_(
        decision="keep_guarded",
        decision_reason=f"{res.decision_reason}; but its peak memory {int(peak):,} bytes{change} is over "
        f"the memory budget of {int(budget):,} bytes: use it only where that memory is "
        "free, else the baseline",
    )


def _reduced_flag(lv: Live) -> str:
    assert lv.reduced is not None, "only a reduced-precision variant has this flag"
    dtype, what = lv.reduced
    rows = _reduced_rows(lv)
    grads = (
        f"; gradients differ by up to {lv.max_grad_rel_err:.2%} of their largest value"
        if lv.max_grad_rel_err is not None
        else ""
    )
    return (
        f"reduced precision: {what}{grads}; judged with {dtype} tolerances (outputs rtol "
        f"{rows['outputs']['rtol']:g}, atol {rows['outputs']['atol']:g}; gradients rtol "
        f"{rows['gradients']['rtol']:g}, atol {rows['gradients']['atol']:g})"
    )


def _judge_reduced(res: VariantResult, lv: Live, mode: str) -> VariantResult:
    """A reduced-precision variant is never a silent keep: the reason says what it changes; on a
    training path without a gradient check it is not kept at all."""
    if lv.reduced is None or res.decision not in ("keep", "keep_guarded", "micro_only"):
        return res
    grads = res.compared.get("input_gradients", 0) + res.compared.get("parameter_gradients", 0)
    if mode == TRAINING and not grads:
        return res.with_(
            decision="need_more_evidence",
            decision_reason=f"{_reduced_flag(lv)}; on a training path it is not kept without a gradient "
            f"check, and no gradient was compared (pass model=… or params=…)",
        )
    return res.with_(decision_reason=f"{res.decision_reason}; {_reduced_flag(lv)}")


def _numerical_class(lv: Live) -> str:
    """The declared class, corrected by what was measured: "exact" only for outputs bit-identical
    to the baseline's; a declared-exact variant that differs is "reordered" (within tolerance)."""
    declared = lv.variant.numerical_class
    if lv.reduced is not None and declared in ("exact", "reordered"):
        return "reduced precision"
    if any(f.startswith("precision lowered") for f in lv.flags) and declared in ("exact", "reordered"):
        return "reduced precision"
    if declared == "exact" and lv.bit_identical is False:
        return "reordered"
    return declared


def decide(
    res: VariantResult, base_timing: Measurement | None, e2e_ms: float | None, min_effect: float = 0.0
) -> VariantResult:
    saving = (base_timing.median_ms - res.timing.median_ms) if (base_timing and res.timing) else 0.0
    verdict = classify(
        status=res.status,
        reason=res.reason,
        flags=res.flags,
        speedup=res.speedup,
        timing_meaningful=res.timing_meaningful,
        failure_cases=res.failure_cases,
        saving_ms=saving,
        setup_ms=res.setup_ms or 0.0,
        end_to_end_ms=e2e_ms,
        min_effect=min_effect,
    )
    return res.with_(decision=verdict.decision, decision_reason=verdict.reason)
