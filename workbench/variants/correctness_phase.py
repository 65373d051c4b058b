"""The correctness phase of a comparison: fresh inputs per check, a float64 reference, poisoned
outputs, every variant's call guarded (time limit, exceptions, global state), cheat checks.

Works on ``Live`` records, the mutable working state of each variant during one comparison.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import workbench.variants.cheats as cheats
from workbench.errors import InvalidArgumentError
from workbench.variants.isolation import StateGuard, VariantTimeout, call_with_limit
from workbench.variants.output_check import CorrectnessResult, OutputCheck, check_outputs, grad_rel_error
from workbench.variants.spec import Variant
from workbench.variants.tolerances import DEFAULT_TOLERANCES, gradient_tolerance_overrides
from workbench.variants.tree import (
    clone_tensors,
    poison_allocator,
    poison_tensors,
    tensor_leaves,
    to_reference_precision,
)


@dataclass
class Live:
    variant: Variant
    status: str = "ok"
    reason: str = ""
    first_call_ms: float | None = None
    warm_call_ms: float | None = None
    checks: list[OutputCheck] = field(default_factory=list)
    flags: list[str] = field(default_factory=list)
    calls: int = 0
    mutated: list[str] = field(default_factory=list)  # input paths the call changed in place
    max_diff_vs_baseline: float = 0.0  # largest |output - baseline's output|
    compared_with_baseline: bool = False
    last_inputs: Any = None  # its copy of the inputs after the last call
    tracker: Any = None  # the comparison's StateTracker (state.py)
    reach: Any = None  # what its callable reaches (reach.Reach)
    names: dict[int, str] = field(default_factory=dict)  # id of a reached tensor -> its name in the baseline's terms
    extra_ids: set[int] = field(default_factory=set)  # tensors reached only through model=/params=/optimizer=
    last_effects: dict[str, Any] = field(default_factory=dict)  # what its last call changed (state.py)
    effect_paths: set[str] = field(default_factory=set)  # every effect any of its checked calls made
    census: Any = None  # precision.Census of one call (None: not observed)
    reduced: tuple[str, str] | None = None  # (dtype, what it does) when it computes in reduced precision
    reference_mode: str = "fn"  # baseline: "fn" (as given / module twin), "cast", "native"
    out_tolerances: dict | None = None  # its output tolerance table (reduced precision: that dtype's)
    grad_tolerances: dict | None = None  # its gradient tolerance table
    max_grad_rel_err: float | None = None  # largest gradient error / that gradient's largest |value|

    @property
    def stateful(self) -> bool:
        """Its calls changed reached state (gradients, parameters, optimizer state, buffers)."""
        return bool(self.effect_paths)

    @property
    def self_backward(self) -> bool:
        """Its call computed gradients itself (called backward): it is never backwarded again."""
        return any(p.startswith("grad ") for p in self.effect_paths)

    def note_grad_error(self, value: float) -> None:
        self.max_grad_rel_err = value if self.max_grad_rel_err is None else max(self.max_grad_rel_err, value)

    @property
    def name(self) -> str:
        return self.variant.name

    @property
    def runnable(self) -> bool:
        return self.status == "ok"

    def fail(self, status: str, reason: str) -> None:
        self.status, self.reason = status, reason

    def add_flags(self, flags: list[str]) -> None:
        self.flags += [f for f in flags if f not in self.flags]

    def correctness(self, n_checks: int, ref_precision: str) -> CorrectnessResult | None:
        if not self.checks:
            return None
        passed = all(c.passed for c in self.checks)
        return CorrectnessResult(
            passed, tuple(_worst_per_path(self.checks)), n_checks, ref_precision, tuple(self.flags)
        )

    @property
    def setup_ms(self) -> float | None:
        if self.first_call_ms is None or self.warm_call_ms is None:
            return None
        return max(0.0, self.first_call_ms - self.warm_call_ms)

    @property
    def bit_identical(self) -> bool | None:
        """True when every checked output equalled the baseline's bit for bit (None: not compared)."""
        return None if not self.compared_with_baseline else self.max_diff_vs_baseline == 0.0


def _worst_per_path(checks: list[OutputCheck]) -> list[OutputCheck]:
    worst: dict[str, OutputCheck] = {}
    for c in checks:
        cur = worst.get(c.path)
        if cur is None or _badness(c) > _badness(cur):
            worst[c.path] = c
    return list(worst.values())


def _badness(c: OutputCheck) -> tuple:
    return (not c.passed, c.nonfinite_mismatch, c.frac_outside_tol, c.max_abs_err)


def describe_exception(exc: BaseException) -> str:
    if isinstance(exc, SystemExit):
        return f"called sys.exit({exc.code!r})"
    text = str(exc).splitlines()[0][:200] if str(exc) else ""
    return f"raised {type(exc).__name__}: {text}" if text else f"raised {type(exc).__name__}"


def guarded_call(live: Live, args: tuple[Any, ...], limit_s: float, poison_like: Any = None) -> tuple[bool, Any]:
    """Call the variant on its own copy of the inputs; record failures and state changes.

    Its own output buffers (``Variant.poison``) and freed blocks of the expected output sizes
    (``poison_like``) are filled with NaN first, so elements it forgets to write show.  The input
    paths the call changed in place are left in ``live.mutated``; ``live.last_inputs`` holds its
    copy of the inputs after the call."""
    own = clone_tensors(args)
    fn = live.variant.fn

    def poisoned_call(*a: Any) -> Any:
        if live.variant.poison is not None:
            live.variant.poison()
        keeper = poison_allocator(poison_like) if poison_like is not None else None  # per-thread arenas
        out = fn(*a)
        del keeper
        return out

    live.calls += 1
    worker_changes: list[str] = []
    tracker = live.tracker
    if tracker is not None:
        tracker.restore()  # every checked call starts from the same state and RNG
    live.last_effects = {}
    start = time.perf_counter()
    guard = None
    try:
        with StateGuard() as guard:
            try:
                out = call_with_limit(poisoned_call, own, limit_s, changed=worker_changes)
            finally:
                if tracker is not None and live.reach is not None:
                    try:
                        live.last_effects = tracker.effects(live.reach, live.names)
                    except Exception:  # noqa: BLE001 - unreadable state: no effects recorded
                        live.last_effects = {}
                    live.effect_paths.update(live.last_effects)
                if tracker is not None:
                    tracker.restore()
    except VariantTimeout as exc:
        live.fail("timeout", str(exc))
        return False, None
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # noqa: BLE001 - the variant's own error (sys.exit too) goes into its row
        from workbench.errors import NotApplicableError

        if isinstance(exc, NotApplicableError):
            live.fail("not_applicable", exc.reason)
        else:
            when = f" on call {live.calls}" if live.calls > 1 else ""
            live.fail("error", f"{describe_exception(exc)}{when}")
        return False, None
    finally:
        _record_state_changes(live, guard, worker_changes)
    ms = (time.perf_counter() - start) * 1e3
    if live.first_call_ms is None:
        live.first_call_ms = ms
    else:
        live.warm_call_ms = ms if live.warm_call_ms is None else min(live.warm_call_ms, ms)
    live.mutated = changed_inputs(args, own)
    live.last_inputs = own
    return True, out


def changed_inputs(before: Any, after: Any) -> list[str]:
    """Paths of the tensor inputs whose shape or values differ between the two copies."""
    out = []
    for (path, a), (_, b) in zip(tensor_leaves(before), tensor_leaves(after)):
        try:
            if a.device.type == "meta" or a.layout != b.layout or a.is_sparse:
                continue
            if tuple(a.shape) != tuple(b.shape) or a.dtype != b.dtype or not cheats.same_values(a, b):
                out.append(path)
        except Exception:  # noqa: BLE001 - an input we cannot compare is not called changed
            continue
    return out


def _record_state_changes(live: Live, guard: StateGuard | None, extra: Sequence[str] = ()) -> None:
    by_guard = guard.changed if guard is not None else []
    changed = list(by_guard) + [c for c in extra if c not in by_guard]
    live.add_flags(state_change_flags(changed))


def state_change_flags(changed: list[str]) -> list[str]:
    """Flags for process-wide settings a call changed (and that were restored after it)."""
    if not changed:
        return []
    flags = cheats.timer_patches(changed)
    lowered = [c for c in changed if "matmul_precision" in c or "allow_tf32" in c]
    if lowered:
        flags.append(f"precision lowered: the call switched matmul precision ({lowered[0]}; restored)")
    other = [c for c in changed if not c.startswith("time.") and c not in lowered]
    if other:
        flags.append(f"changed global state (restored): {', '.join(other)}")
    return flags


def reference_callable(baseline: Variant, reference: Callable[..., Any] | None) -> tuple[Callable[..., Any], str]:
    """The function the float64 reference runs, and a note when it is not the baseline as given.

    An ``nn.Module`` (or a bound method of one) with float32 weights cannot run on float64
    inputs: a deep copy of it cast to float64 runs instead."""
    if reference is not None:
        return reference, ""
    fn = baseline.fn
    module, attr = _module_of(fn)
    if module is None:
        return fn, ""
    import copy

    import torch

    try:
        twin = copy.deepcopy(module).to(torch.float64)
    except Exception as exc:  # noqa: BLE001
        return fn, (
            f"the float64 reference could not copy the module {type(module).__name__} "
            f"({type(exc).__name__}: {str(exc)[:100]}); pass reference= a float64 version"
        )
    return (twin if attr is None else getattr(twin, attr)), ""


def _module_of(fn: Any) -> tuple[Any, str | None]:
    try:
        import torch
    except ImportError:  # pragma: no cover
        return None, None
    if isinstance(fn, torch.nn.Module):
        return fn, None
    owner = getattr(fn, "__self__", None)
    if isinstance(owner, torch.nn.Module) and isinstance(getattr(fn, "__name__", None), str):
        return owner, fn.__name__
    return None, None


def _reference_run(
    fn: Callable[..., Any],
    args: tuple[Any, ...],
    limit_s: float,
    note: str = "",
    tracker: Any = None,
    observe_precision: bool = False,
):
    if tracker is not None:
        tracker.restore()
    try:
        with StateGuard():
            if observe_precision:
                from workbench.variants.precision import observe, prepare

                try:
                    prepare()
                    out, census = call_with_limit(observe, (fn, to_reference_precision(args)), limit_s)
                except VariantTimeout:
                    raise
                except Exception:  # noqa: BLE001 - it may not run under the census: run it plainly
                    if tracker is not None:
                        tracker.restore()
                    return call_with_limit(fn, to_reference_precision(args), limit_s), "float64", note
                if not census.empty and not census.dtypes() & {"float64", "complex128"}:
                    return (
                        None,
                        "native",
                        (
                            note
                            or "reference in the baseline's own precision: given float64 "
                            "inputs the baseline still computes in "
                            f"{', '.join(sorted(census.dtypes()))} (it closes over parameters or "
                            "tensors of its own); pass reference= a float64 version"
                        ),
                    )
                return out, "float64", note
            return call_with_limit(fn, to_reference_precision(args), limit_s), "float64", note
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # noqa: BLE001
        text = str(exc).splitlines()[0][:120] if str(exc) else ""
        why = ""
        if "dtype" in text.lower() or "double" in text.lower() or "float" in text.lower():
            why = (
                ": it holds float32 tensors or parameters of its own that the float64 inputs meet (the dtypes disagree)"
            )
        return (
            None,
            "native",
            (
                note
                or f"reference in the baseline's own precision: the float64 run failed "
                f"({type(exc).__name__}: {text}){why}; pass reference= a float64 version"
            ),
        )
    finally:
        if tracker is not None:
            tracker.restore()


def run_checks(
    lives: list[Live],
    baseline: Live,
    make_inputs: Callable[[], tuple[Any, ...]],
    *,
    checks: int,
    limit_s: float,
    tolerances: dict | None,
    reference: Callable[..., Any] | None = None,
) -> tuple[str, list[str]]:
    """Run every check; returns the reference precision used and comparison-wide notes.

    Before the first check each variant's precision is observed (``precision.observe``) on that
    check's inputs: one computing in bfloat16/float16 where the baseline does not is judged with
    that precision's tolerances.  With a ``StateTracker`` on the lives, every call starts from the
    comparison's snapshot and this check's RNG state, and its effects are compared."""
    notes: list[str] = []
    precision = "float64"
    previous_args = None
    ref_fn, ref_note = reference_callable(baseline.variant, reference)
    tracker = baseline.tracker
    for live in lives:
        live.out_tolerances = dict(tolerances or {})
        live.grad_tolerances = gradient_tolerance_overrides(tolerances)
        _declared_tolerance(live, tolerances)
    closes_over_state = (
        reference is None
        and _module_of(baseline.variant.fn)[0] is None
        and tracker is not None
        and baseline.reach is not None
        and not baseline.reach.empty
    )
    baseline.reference_mode = "fn"
    for i in range(checks):
        args = make_inputs()
        if tracker is not None:
            tracker.begin_check()
        same = "inputs were identical in two checks: pass a make_inputs that draws fresh random values each call"
        if previous_args is not None and same not in notes and _same_inputs(previous_args, args):
            notes.append(same)

        def reference_thunk(args: tuple[Any, ...] = args, first: bool = (i == 0)) -> tuple[Any, str, str]:
            """The reference of this check, run after the baseline's call (whose census and effects say
            which reference can be trusted)."""
            if baseline.reference_mode == "native":
                return None, "native", ""  # the first check found no float64 reference: the baseline's own
            census = baseline.census
            if census is not None and census.random:
                baseline.reference_mode = "native"
                drawn = ", ".join(sorted(census.random))
                return (
                    None,
                    "native",
                    (
                        f"reference in the baseline's own precision: the baseline draws random numbers "
                        f"({drawn}) and a float64 run draws others; every call here starts from the "
                        f"same RNG state, so its own output is the reference"
                    ),
                )
            if closes_over_state and not baseline.stateful:
                found = _cast_reference_run(ref_fn, args, limit_s, tracker, observe_precision=first)
                if found is not None:
                    baseline.reference_mode = "cast"
                    return found
            found = _reference_run(ref_fn, args, limit_s, ref_note, tracker=tracker, observe_precision=first)
            if found[1] == "native":
                baseline.reference_mode = "native"
            return found

        precision, note = _one_check(
            lives, baseline, args, reference_thunk, limit_s, tolerances, last=(i == checks - 1), first=(i == 0)
        )
        if note and note not in notes:
            notes.append(note)
        previous_args = args
    unjudged = [lv.name for lv in lives if lv.runnable and _cannot_judge(lv)]
    if unjudged:
        notes.append(
            f"cannot judge correctness of {', '.join(unjudged)}: the reference output is below the "
            f"absolute tolerance; scale the inputs up or pass smaller tolerances"
        )
    if baseline.stateful:
        notes.append(
            "stateful step: the baseline's call changes "
            f"{_effect_summary(baseline.effect_paths)}; each candidate's changes were compared with "
            "the baseline's own (its float32 values are the reference for them)"
        )
    return precision, notes


def _cannot_judge(live: Live) -> bool:
    return (
        bool(live.checks)
        and not all(c.passed for c in live.checks)
        and all(c.passed or c.cannot_judge for c in live.checks)
    )


def _effect_summary(paths: set[str]) -> str:
    from workbench.variants.state import effect_kind

    kinds = [effect_kind(p) for p in paths]
    words = {
        "grad": "gradient",
        "value": "parameter value",
        "buffer": "buffer",
        "optimizer state": "optimizer state",
        "input": "input tensor",
    }
    parts = [f"{kinds.count(k)} {w}{'s' if kinds.count(k) != 1 else ''}" for k, w in words.items() if k in kinds]
    return ", ".join(parts) or "nothing"


NOT_OBSERVED_KINDS = ("cuda_graph",)  # a graph replay dispatches no ops (and must not be captured under a mode)


def _observe_precision(live: Live, args: tuple[Any, ...], limit_s: float) -> None:
    """The census of one more call of ``live`` (after its first checked call, so compile and setup
    times stay in that one), from the same state and RNG."""
    from workbench.variants.precision import observe, prepare

    if not live.runnable or live.variant.kind in NOT_OBSERVED_KINDS:
        return
    try:
        prepare()  # imported here, in this thread, not under the call's time limit
    except Exception:  # noqa: BLE001 - no census on this torch
        live.census = None
        return
    if live.tracker is not None:
        live.tracker.restore()
    try:
        with StateGuard():
            _, live.census = call_with_limit(observe, (live.variant.fn, clone_tensors(args)), limit_s)
    except KeyboardInterrupt:
        raise
    except BaseException:  # noqa: BLE001 - not observed: its checked calls say what is wrong
        live.census = None
    finally:
        if live.tracker is not None:
            live.tracker.restore()


def _judge_precision(live: Live, baseline: Live, tolerances: dict | None) -> None:
    """A candidate computing in reduced precision gets that precision's output and gradient
    tolerance rows in place of float32's."""
    from workbench.variants.precision import reduced_precision
    from workbench.variants.tolerances import DEFAULT_TOLERANCES, GRADIENT_TOLERANCES

    found = reduced_precision(baseline.census, live.census)
    if found is None:
        return
    live.reduced = found
    dtype = found[0]
    live.out_tolerances = {**(tolerances or {}), "float32": DEFAULT_TOLERANCES[dtype]}
    live.grad_tolerances = {**gradient_tolerance_overrides(tolerances), "float32": GRADIENT_TOLERANCES[dtype]}


def _nothing_to_compare(native: Any, baseline: Live) -> str | None:
    """Why there is nothing to check in the baseline's first call (None: there is something)."""
    from workbench.variants.tree import leaves_with_paths

    leaves = [x for _, x in leaves_with_paths(native)]
    empty = all(x is None or (hasattr(x, "numel") and x.numel() == 0) for x in leaves)
    if not empty or baseline.last_effects:
        return None
    returns = "returns None" if native is None else "returns nothing to check (no values)"
    reach = baseline.tracker.reach if baseline.tracker is not None else None
    if reach is None or reach.empty:
        return (
            f"nothing to compare: the baseline {returns} and reaches no model or optimizer; return the value "
            f"to check, or pass model=/params="
        )
    return (
        f"nothing to compare: the baseline {returns} and changes none of the {len(reach.params)} parameters, "
        f"{len(reach.buffers)} buffers and {len(reach.optimizers)} optimizers it reaches; return the value to "
        f"check, or pass model=/params="
    )


def _cast_reference_run(
    fn: Callable[..., Any], args: tuple[Any, ...], limit_s: float, tracker: Any, observe_precision: bool = False
) -> tuple[Any, str, str] | None:
    """The float64 reference of a callable that closes over a float32 model: every reached
    parameter and buffer cast to float64 for the run (then restored). None when that run fails or
    does not compute in float64 (the caller falls back)."""
    from workbench.variants.precision import observe, prepare

    tracker.restore()
    try:
        tracker.cast_to_float64()
        with StateGuard():
            if observe_precision:
                prepare()
                out, census = call_with_limit(observe, (fn, to_reference_precision(args)), limit_s)
                if census.empty or census.dtypes() - {"float64", "complex128"}:
                    return None  # something in it still computes in another precision
            else:
                out = call_with_limit(fn, to_reference_precision(args), limit_s)
        return out, "float64", ""
    except KeyboardInterrupt:
        raise
    except BaseException:  # noqa: BLE001 - no float64 run of it: the ordinary reference path
        return None
    finally:
        tracker.restore()


def _one_check(
    lives: list[Live],
    baseline: Live,
    args: tuple[Any, ...],
    reference: Callable[[], tuple[Any, str, str]],
    limit_s: float,
    tolerances: dict | None,
    last: bool,
    first: bool = False,
) -> tuple[str, str]:
    """One check of every variant; ``reference()`` gives (float64 output or None, precision, note)
    after the baseline's call. Returns (precision, note)."""
    ok, native = guarded_call(baseline, args, limit_s)
    if not ok:
        raise InvalidArgumentError(
            f"the baseline {baseline.name!r} failed ({baseline.status}: "
            f"{baseline.reason}); fix it or choose another baseline= variant"
        )
    if first:
        nothing = _nothing_to_compare(native, baseline)
        if nothing:
            from workbench.errors import NothingToCompareError

            raise NothingToCompareError(nothing)
    base_effects = dict(baseline.last_effects)
    if first:
        _observe_precision(baseline, args, limit_s)
    ref, precision, note = reference()
    base_mutated = list(baseline.mutated)
    base_inputs = clone_tensors(baseline.last_inputs)
    native_raw, native = native, clone_tensors(native)
    poison_tensors(native_raw)
    ref = native if ref is None else ref
    baseline.checks += check_outputs(native, ref, native, tolerances)
    for live in lives:
        if live is baseline or not live.runnable:
            continue
        ok, out = guarded_call(live, args, limit_s, poison_like=native)
        if not ok:
            continue
        effects = live.last_effects
        if first:
            _observe_precision(live, args, limit_s)
            _judge_precision(live, baseline, tolerances)
            live.last_effects = effects
        try:
            found = check_outputs(out, ref, native, live.out_tolerances)
            found += _input_checks(live, base_mutated, base_inputs, live.out_tolerances)
            if base_effects or live.last_effects:
                from workbench.variants.state import compare_effects

                effect_checks = compare_effects(live.last_effects, base_effects, live.grad_tolerances)
                found += effect_checks
                _note_grad_errors(live, live.last_effects, base_effects)
            live.checks += found
            try:
                lowered = cheats.lowered_precision_flags(out, ref, native)
                declared = live.variant.numerical_class == "reduced precision"  # said up front (a TF32 fix)
                if live.reduced is not None or declared:  # computed in reduced precision, seen or declared:
                    lowered = [f for f in lowered if "rounding" not in f]  # its error profile is no secret
                live.add_flags(lowered)
            except Exception:  # noqa: BLE001 - an unreadable output already failed its check
                pass
            if all(c.passed or c.cannot_judge for c in found):
                _compare_with_baseline(live, out, native)
                _effects_vs_baseline(live, live.last_effects, base_effects)
        except Exception as exc:  # noqa: BLE001 - an output we cannot read is the variant's failure
            live.checks.append(
                OutputCheck("out", False, f"its output could not be checked ({type(exc).__name__}: {str(exc)[:160]})")
            )
            continue
        poison_tensors(out)  # poison-on-free: a later run reusing this memory shows gaps
        if last:
            _async_checks(live, args, limit_s)
    poison_tensors(native)
    return precision, note


def _declared_tolerance(live: Live, asked: dict | None) -> None:
    """A variant that declares its float32 tolerance (a catalog fix computing in TF32: ``options["tolerance"]``,
    (rtol, atol)) is judged with it, outputs and gradients, where it is looser than the default and the
    comparison's own ``tolerances=`` did not set float32; the record states the tolerance used."""
    declared = (getattr(live.variant, "options", None) or {}).get("tolerance")
    if not (isinstance(declared, (tuple, list)) and len(declared) == 2) or "float32" in (asked or {}):
        return
    rtol, atol = float(declared[0]), float(declared[1])
    for table in (live.out_tolerances, live.grad_tolerances):
        if table is None:
            continue
        base = table.get("float32", DEFAULT_TOLERANCES["float32"])
        table["float32"] = (max(rtol, base[0]), max(atol, base[1]))


def _effects_vs_baseline(live: Live, got: dict[str, Any], expected: dict[str, Any]) -> None:
    """Bit-identical means the state changes too: the largest difference of its effects from the baseline's."""
    for path, exp in expected.items():
        mine = got.get(path)
        if exp is None or mine is None or not hasattr(exp, "shape"):
            continue
        if mine.shape != exp.shape or mine.dtype != exp.dtype:
            live.max_diff_vs_baseline = float("inf")
        elif mine.numel() and not cheats.same_values(mine, exp):
            diff = (mine.double() - exp.double()).abs().nan_to_num(nan=float("inf"))
            live.max_diff_vs_baseline = max(live.max_diff_vs_baseline, float(diff.max()))


def _note_grad_errors(live: Live, got: dict[str, Any], expected: dict[str, Any]) -> None:
    """The largest gradient error as a share of that gradient's largest |value|."""
    for path, exp in expected.items():
        mine = got.get(path)
        if not path.startswith("grad ") or exp is None or mine is None or not hasattr(exp, "shape"):
            continue
        rel = grad_rel_error(mine, exp)
        if rel is not None:
            live.note_grad_error(rel)


def _input_checks(live: Live, base_mutated: list[str], base_inputs: Any, tolerances: dict | None) -> list[OutputCheck]:
    """A candidate must leave its inputs as the baseline does: unchanged, or changed alike."""
    found = []
    for path in live.mutated:
        if path not in base_mutated:
            found.append(
                OutputCheck(
                    path,
                    False,
                    "input changed in place by the call (the baseline leaves it "
                    "unchanged): a caller reusing its inputs gets other values",
                )
            )
    if base_mutated:
        mine = dict(tensor_leaves(live.last_inputs))
        theirs = dict(tensor_leaves(base_inputs))
        for path in base_mutated:
            if path in mine and path in theirs:
                found += [
                    c.with_path(f"{path} (input changed in place)")
                    for c in check_outputs(mine[path], theirs[path], theirs[path], tolerances)
                ]
    return found


def _compare_with_baseline(live: Live, out: Any, native: Any) -> None:
    """Largest difference from the baseline's own output (exact means 0 here, not vs float64)."""
    import torch

    live.compared_with_baseline = True
    for (_, g), (_, n) in zip(tensor_leaves(out, "out"), tensor_leaves(native, "out")):
        if g.shape != n.shape or g.dtype != n.dtype or g.layout != n.layout or g.device != n.device:
            live.max_diff_vs_baseline = float("inf")
            continue
        if g.numel() == 0:
            continue
        if g.is_floating_point() or g.is_complex():
            if not cheats.same_values(g, n):
                diff = (g.detach().double() - n.detach().double()).abs().nan_to_num(nan=float("inf"))
                live.max_diff_vs_baseline = max(live.max_diff_vs_baseline, float(diff.max()))
        elif not torch.equal(g, n):
            live.max_diff_vs_baseline = float("inf")


def _async_checks(live: Live, args: tuple[Any, ...], limit_s: float) -> None:
    live.calls += 1
    if live.tracker is not None:
        live.tracker.restore()
    try:
        with StateGuard():
            flags = call_with_limit(cheats.async_work_flags, (live.variant.fn, clone_tensors(args)), limit_s)
        live.add_flags(flags)
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # noqa: BLE001
        if all(c.passed or c.cannot_judge for c in live.checks):
            live.fail("error", f"{describe_exception(exc)} on a repeated call (call {live.calls})")
        # else: its output already failed the check (an unreadable output makes this call fail too)
    finally:
        if live.tracker is not None:
            live.tracker.restore()


def _same_inputs(a: tuple[Any, ...], b: tuple[Any, ...]) -> bool:
    import torch

    ta, tb = tensor_leaves(a), tensor_leaves(b)
    floats = [
        (x, y)
        for (_, x), (_, y) in zip(ta, tb)
        if x.is_floating_point() and x.numel() > 1 and x.layout == torch.strided and x.device.type != "meta"
    ]
    return bool(floats) and all(x.shape == y.shape and torch.equal(x, y) for x, y in floats)
