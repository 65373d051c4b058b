"""A study's baselines in this process: making one (profiled as its rounds time it, given an ID,
its ranked hypotheses screened by the ledger, recorded in the store) and the live callables each
baseline runs (handed back with ``attach``, or imported again by where they live, in a fresh
process) with the shape sweep it was given.

Callables cannot be stored: a baseline records where its function lives (module and name) and its
source hash (``workbench.study.identity``); a callable whose source changed is refused.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Mapping

import workbench.study.identity as identity
import workbench.study.measure as measure
from workbench.errors import InvalidArgumentError, StudyError
from workbench.study.baseline import Baseline
from workbench.study.store import now
from workbench.study.variant_info import plain_options, variant_info
from workbench.variants.output_check import check_mode, resolve_mode

if TYPE_CHECKING:
    from workbench.study.ledger_view import LedgerView
    from workbench.study.store import StudyStore
    from workbench.variants.sweep import ShapeSweep, SweepFactory


class Baselines:
    """The baselines of the study in ``store``, with the callables and sweeps of this process."""

    def __init__(self, store: StudyStore, ledger: LedgerView) -> None:
        self.store = store
        self.ledger = ledger
        self.live: dict[str, tuple[Callable[..., Any], Callable[[], Any] | None]] = {}
        self.sweeps: dict[str, ShapeSweep | SweepFactory] = {}  # baseline ID -> its sweep (live only, like callables)

    @property
    def current(self) -> Baseline | None:
        """The last one set or accepted, None before the first."""
        return self.store.baselines[-1] if self.store.baselines else None

    def require(self) -> Baseline:
        base = self.current
        if base is None:
            raise StudyError(f"study {self.store.name!r} has no baseline yet: call study.set_baseline(fn, make_inputs)")
        return base

    # -- making one ---------------------------------------------------------------------------
    def set(
        self,
        fn: Callable[..., Any],
        make_inputs: Callable[[], Any] | None,
        *,
        seed: int,
        label: str | None,
        mode: str | None,
        sweep_inputs: ShapeSweep | SweepFactory | None,
        profile_options: Mapping[str, Any],
    ) -> Baseline:
        """``Study.set_baseline``: the arguments checked, then a new baseline (see there)."""
        if not callable(fn):
            raise InvalidArgumentError(f"set_baseline needs the callable itself; got {type(fn).__name__}")
        if make_inputs is not None and not callable(make_inputs):
            raise InvalidArgumentError(
                "make_inputs must be a zero-argument callable returning the argument tuple "
                "(fresh values each call), e.g. lambda: (torch.randn(1024, 1024),)"
            )
        check_mode(mode)
        base = self.new(fn, make_inputs, seed=seed, label=label, options=profile_options, mode=mode)
        if sweep_inputs is not None:
            self.sweeps[base.baseline_id] = sweep_inputs
        return base

    def new(
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
        """Profile ``fn(*make_inputs())`` and record it as the new baseline (the current one again,
        attached, where it is the same baseline)."""
        self.store.check_writable("profiled")
        args = measure.seeded_inputs(make_inputs, seed)
        mode = resolve_mode(mode, fn, args)
        # profiled exactly as its rounds time it (a training path: forward + backward), so the drift
        # check compares like with like and the hypotheses see the whole step
        run = measure.profile_callable(measure.timed_callable(fn, args, mode), args, options)
        ranked = measure.ranked_hypotheses(run)
        env = dict(run.environment or {})
        ref = identity.callable_ref(fn)
        variant = variant_info(fn)
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
        existing = next((b for b in self.store.baselines if b.baseline_id == bid), None)
        if existing is not None and existing is self.current:
            self.live[bid] = (fn, make_inputs)  # the same baseline again (a rerun cell): attach, nothing new
            return existing
        device = identity.device_of(env) if env else run.device
        scope_base = {
            "inputs": identity.digest(inputs["signature"]),
            "device": device,
            "environment_key": identity.environment_key(env),
            "baseline_id": bid,
        }
        entries = self.ledger.entries
        proposed, held = self.ledger.screen(entries, ranked, scope_base)
        timing = run.timing
        run_rel = self.store.save_run(run, bid)
        base = Baseline(
            baseline_id=bid,
            index=len(self.store.baselines) + 1,  # numbered again under the file's lock (store.add_baseline)
            label=label or getattr(fn, "__name__", None) or variant.get("kind", "fn"),
            created_at=now(),
            source_hash=src,
            callable_ref=ref,
            variant=variant,
            inputs=inputs,
            environment_key=scope_base["environment_key"],
            device=device,
            git=git,
            reset_procedure=measure.reset_procedure(seed, make_inputs, run.settings or {}),
            settings=dict(run.settings or {}),
            profile_options=plain_options(options),
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
        self.ledger.propose(entries, proposed, scope_base, now())
        base = self.store.add_baseline(base)
        self.live[bid] = (fn, make_inputs)
        return base

    # -- the live callables -------------------------------------------------------------------
    def attach(self, fn: Callable[..., Any], make_inputs: Callable[[], Any] | None = None) -> Baseline:
        """Hand the current baseline's callable back after a restart (its source must match)."""
        base = self.require()
        src = identity.source_hash(fn)
        if src != base.source_hash:
            raise StudyError(
                f"the callable's source differs from baseline {base.baseline_id}'s (source hash {src} "
                f"vs {base.source_hash}): this is other code; record it with study.set_baseline(fn, "
                f"make_inputs) (the study keeps the old baseline and its rounds)"
            )
        if make_inputs is None:
            make_inputs = self.resolve_inputs(base)
        if base.variant.get("kind") == "compiled" and identity.unwrap(fn) is fn:
            from workbench.variants.builders import compiled

            fn = compiled(fn, **(base.variant.get("options") or {}))
        self.live[base.baseline_id] = (fn, make_inputs)
        return base

    def resolve_inputs(self, base: Baseline) -> Callable[[], Any] | None:
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

    def callables(self, base: Baseline) -> tuple[Callable[..., Any], Callable[[], Any] | None]:
        """``base``'s callable and inputs factory: those of this process, else imported again by
        where they live (its source must be the recorded one) and rebuilt as its variant."""
        if base.baseline_id in self.live:
            return self.live[base.baseline_id]
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
        live = (fn, self.resolve_inputs(base))
        self.live[base.baseline_id] = live
        return live
