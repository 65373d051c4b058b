"""Compare a variant's outputs with the float64 reference, element by element.

Reported per output: max abs error, max and mean relative error, the share of elements outside
tolerance, NaN/Inf mismatches, the worst element, the tolerance used.  An output whose
magnitude is below its absolute tolerance is flagged, not passed: the check could not tell it
from zero.  Structure, shape and dtype mismatches fail with the reason.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from workbench.variants.tolerances import Tolerance, dtype_name, tolerance_for
from workbench.variants.tree import leaves_with_paths, structure

if TYPE_CHECKING:
    from workbench.variants.correctness_phase import Live

BASELINE_ERROR_FACTOR = 4.0  # a variant may err up to 4x what the baseline errs (plus tolerance)


@dataclass(frozen=True)
class OutputCheck:
    """The check of one output tensor (or leaf) against the reference."""

    path: str
    passed: bool
    reason: str = ""
    dtype: str = ""
    max_abs_err: float = 0.0
    max_rel_err: float = 0.0
    mean_rel_err: float = 0.0
    frac_outside_tol: float = 0.0
    nonfinite_mismatch: int = 0
    worst_index: tuple[int, ...] = ()
    worst_got: float = 0.0
    worst_expected: float = 0.0
    tolerance: Tolerance | None = None
    below_tolerance: bool = False

    @property
    def cannot_judge(self) -> bool:
        """Not passed only because the reference is below the absolute tolerance: no element is
        outside tolerance, none mismatched, but the check cannot tell the output from zero."""
        return not self.passed and self.below_tolerance and self.frac_outside_tol == 0 and self.nonfinite_mismatch == 0

    def with_path(self, path: str) -> "OutputCheck":
        from dataclasses import replace

        return replace(self, path=path)

    def to_dict(self) -> dict[str, Any]:
        d = {k: getattr(self, k) for k in self.__dataclass_fields__ if k != "tolerance"}
        d["worst_index"] = list(self.worst_index)
        d["tolerance"] = self.tolerance.to_dict() if self.tolerance else None
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "OutputCheck":
        kw = dict(d)
        kw["worst_index"] = tuple(kw.get("worst_index", ()))
        kw["tolerance"] = Tolerance.from_dict(d["tolerance"]) if d.get("tolerance") else None
        return cls(**kw)


@dataclass(frozen=True)
class CorrectnessResult:
    """All outputs of one or more checks (fresh inputs each); passed only if every one passed."""

    passed: bool
    outputs: tuple[OutputCheck, ...] = ()
    checks: int = 0
    reference_precision: str = "float64"
    flags: tuple[str, ...] = field(default_factory=tuple)

    @property
    def reason(self) -> str:
        bad = [o for o in self.outputs if not o.passed]
        return "; ".join(f"{o.path}: {o.reason}" for o in bad[:3]) or "; ".join(self.flags)

    @property
    def cannot_judge(self) -> bool:
        """Failed only for outputs too small to judge (see ``OutputCheck.cannot_judge``)."""
        return not self.passed and all(o.passed or o.cannot_judge for o in self.outputs)

    @property
    def max_abs_err(self) -> float:
        return max((o.max_abs_err for o in self.outputs), default=0.0)

    @property
    def max_rel_err(self) -> float:
        return max((o.max_rel_err for o in self.outputs), default=0.0)

    def to_dict(self) -> dict[str, Any]:
        return {
            "passed": self.passed,
            "outputs": [o.to_dict() for o in self.outputs],
            "checks": self.checks,
            "reference_precision": self.reference_precision,
            "flags": list(self.flags),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "CorrectnessResult":
        return cls(
            passed=bool(d["passed"]),
            outputs=tuple(OutputCheck.from_dict(o) for o in d["outputs"]),
            checks=int(d.get("checks", 0)),
            reference_precision=d.get("reference_precision", "float64"),
            flags=tuple(d.get("flags", ())),
        )


def check_outputs(
    got: Any, expected_ref: Any, expected_native: Any, overrides: dict[str, tuple[float, float]] | None = None
) -> list[OutputCheck]:
    """Check every leaf of ``got`` against the reference (float64) with the baseline's dtypes.

    ``expected_native`` is the baseline's output in its own precision: it fixes which dtype
    and shape each output should have.
    """
    if structure(got) != structure(expected_native):
        return [
            OutputCheck(
                "out",
                False,
                f"output structure {structure(got)} differs from the baseline's {structure(expected_native)}",
            )
        ]
    pairs = zip(leaves_with_paths(got), leaves_with_paths(expected_ref), leaves_with_paths(expected_native))
    return [_check_leaf(p, g, r, n, overrides) for (p, g), (_, r), (_, n) in pairs]


def _check_leaf(path: str, got: Any, ref: Any, native: Any, overrides) -> OutputCheck:
    if not hasattr(got, "dtype"):
        same = got == native if not isinstance(got, float) else np.isclose(got, native)
        return OutputCheck(path, bool(same), "" if same else f"value {got!r} != baseline {native!r}")
    layout, device = getattr(got, "layout", None), getattr(got, "device", None)
    if layout != getattr(native, "layout", None):
        return OutputCheck(
            path,
            False,
            f"layout {str(layout).replace('torch.', '')} != expected "
            f"{str(native.layout).replace('torch.', '')} (a variant must return the "
            f"baseline's layout; call .to_dense() if it computes sparsely)",
            dtype=dtype_name(got),
        )
    if device is not None and getattr(device, "type", None) == "meta" and native.device.type != "meta":
        return OutputCheck(
            path,
            False,
            f"device meta != expected {native.device}: a meta tensor has a shape "
            f"but no data, so the variant computed nothing",
            dtype=dtype_name(got),
        )
    if device != getattr(native, "device", None):
        return OutputCheck(path, False, f"device {device} != expected {native.device}", dtype=dtype_name(got))
    if tuple(got.shape) != tuple(native.shape):
        return OutputCheck(path, False, f"shape {tuple(got.shape)} != expected {tuple(native.shape)}")
    if got.dtype != native.dtype:
        return OutputCheck(
            path,
            False,
            f"dtype {dtype_name(got)} != expected {dtype_name(native)} (a variant must return the baseline's dtype)",
            dtype=dtype_name(got),
        )
    tol = tolerance_for(dtype_name(native), overrides)
    if not (native.is_floating_point() or native.is_complex()):
        ref = native  # integers and booleans: exactly the baseline's values
    if tuple(ref.shape) != tuple(native.shape):
        return OutputCheck(
            path,
            False,
            f"reference shape {tuple(ref.shape)} differs from the baseline's "
            f"{tuple(native.shape)}: the float64 reference is not comparable",
        )
    g = got.detach().cpu().double().numpy() if got.numel() else np.zeros(0)
    r = ref.detach().cpu().double().numpy() if ref.numel() else np.zeros(0)
    n = native.detach().cpu().double().numpy() if native.numel() else np.zeros(0)
    return _compare_arrays(path, np.asarray(g), np.asarray(r), tol, np.asarray(n))


def _baseline_allowance(r: np.ndarray, n: np.ndarray, both: np.ndarray) -> np.ndarray:
    """Error the baseline itself makes against float64, per element plus its RMS, times
    BASELINE_ERROR_FACTOR: ill-conditioned elements (cancellation, sqrt near 0) allow what the
    original code in its own precision also gets wrong there."""
    n_err = np.where(both & np.isfinite(n), np.abs(n - r), 0.0)
    rms = float(np.sqrt(np.mean(n_err**2))) if n_err.size else 0.0
    return BASELINE_ERROR_FACTOR * (n_err + rms)


def _compare_arrays(path: str, g: np.ndarray, r: np.ndarray, tol: Tolerance, n: np.ndarray) -> OutputCheck:
    if g.size == 0:
        return OutputCheck(path, True, "", tol.dtype, tolerance=tol)
    g_fin, r_fin = np.isfinite(g), np.isfinite(r)
    same_nonfinite = (~g_fin & ~r_fin) & ((np.isnan(g) & np.isnan(r)) | (g == r))
    mismatch = int(np.count_nonzero((g_fin != r_fin) | (~g_fin & ~r_fin & ~same_nonfinite)))
    both = g_fin & r_fin
    err = np.where(both, np.abs(g - r), 0.0)
    mag = np.abs(np.where(both, r, 0.0))
    scale = max(1.0, float(np.sqrt(np.mean(mag[both] ** 2)))) if both.any() else 1.0
    allowed = tol.atol * scale + tol.rtol * mag + _baseline_allowance(r, n, both)
    outside = (err > allowed) | ~(both | same_nonfinite)
    rel = err / np.maximum(mag, tol.atol * scale if tol.atol else np.finfo(float).tiny)
    worst = np.unravel_index(
        int(np.argmax(np.where(outside, np.inf, err - allowed))) if outside.any() else int(np.argmax(err)), g.shape
    )
    below = bool(both.any() and float(mag.max()) <= tol.atol and tol.atol > 0)
    n_out = int(np.count_nonzero(outside))
    reason = _leaf_reason(n_out, g.size, mismatch, below, tol)
    return OutputCheck(
        path,
        passed=(n_out == 0 and mismatch == 0 and not below),
        reason=reason,
        dtype=tol.dtype,
        max_abs_err=float(err.max()),
        max_rel_err=float(rel.max()),
        mean_rel_err=float(rel[both].mean()) if both.any() else 0.0,
        frac_outside_tol=n_out / g.size,
        nonfinite_mismatch=mismatch,
        worst_index=tuple(int(i) for i in worst),
        worst_got=float(g[worst]),
        worst_expected=float(r[worst]),
        tolerance=tol,
        below_tolerance=below,
    )


def _leaf_reason(n_out: int, size: int, mismatch: int, below: bool, tol: Tolerance) -> str:
    parts = []
    if n_out:
        parts.append(f"{n_out}/{size} elements outside tolerance (rtol {tol.rtol:g}, atol {tol.atol:g})")
    if mismatch:
        parts.append(f"{mismatch} NaN/Inf mismatches against the reference")
    if below and not n_out and not mismatch:
        smaller = f"{{'{tol.dtype}': ({tol.rtol:g}, {tol.atol / 1e4:g})}}"
        parts.append(
            f"cannot judge: the reference output's magnitude is below the absolute tolerance "
            f"{tol.atol:g}, so the check cannot tell it from zero; scale the inputs up or pass "
            f"tolerances={smaller}"
        )
    return "; ".join(parts)


# -- training paths: gradients ---------------------------------------------------------------
TRAINING, INFERENCE = "training", "inference"
MODES = (TRAINING, INFERENCE)
COTANGENT_SEED = 20261201  # the fixed random cotangent every variant's backward receives


def check_mode(mode: str | None) -> str | None:
    if mode is not None and mode not in MODES:
        from workbench.errors import InvalidArgumentError

        raise InvalidArgumentError(
            f"mode must be 'training', 'inference' or None (decided from the baseline: "
            f"training when its output requires grad); got {mode!r}"
        )
    return mode


def needs_grad(out: Any) -> bool:
    """Whether an output takes part in autograd (a floating leaf that requires grad)."""
    from workbench.variants.tree import tensor_leaves

    return any(getattr(t, "requires_grad", False) for _, t in tensor_leaves(out, "out"))


def grad_paths(args: Any) -> list[str]:
    """Paths of the floating inputs that require grad (the leaves whose gradients are checked)."""
    from workbench.variants.tree import tensor_leaves

    return [p for p, t in tensor_leaves(args) if t.requires_grad and (t.is_floating_point() or t.is_complex())]


def module_parameters(fn: Any) -> dict[str, Any]:
    """The trainable parameters of ``fn`` when it is an ``nn.Module`` (a compiled one included)
    or a bound method of one, by name; {} for a plain function."""
    import torch

    owner = fn if isinstance(fn, torch.nn.Module) else getattr(fn, "__self__", None)
    if not isinstance(owner, torch.nn.Module):
        inner = getattr(fn, "_torchdynamo_orig_callable", None) or getattr(fn, "__wrapped__", None)
        return module_parameters(inner) if inner is not None and inner is not fn else {}
    return {name.replace("_orig_mod.", ""): p for name, p in owner.named_parameters() if p.requires_grad}


def _with_grad_inputs(args: Any, paths: list[str], cast: Any = None) -> Any:
    """A copy of the inputs (cast by ``cast``, e.g. to float64): the tensors at ``paths`` fresh
    leaves that require grad."""
    from workbench.variants.tree import map_tensors, tensor_leaves

    wanted = set(paths)
    order = iter([p for p, _ in tensor_leaves(args)])

    def copy(t: Any) -> Any:
        path = next(order, None)
        c = t.detach().clone() if cast is None else cast(t)
        if path in wanted:
            c.requires_grad_(True)
        return c

    return map_tensors(args, copy)


def backward_grads(
    fn: Any, args: Any, paths: list[str], *, cotangent_dtype: Any = None, params: dict[str, Any] | None = None
) -> tuple[Any, dict[str, Any]]:
    """Run ``fn`` on ``args`` (already holding grad leaves at ``paths``), backpropagate a fixed
    random cotangent through every floating output that requires grad, and return (outputs,
    {"grad <input path>" / "grad <parameter>": gradient or None}). Parameter gradients are
    cleared before and after, so variants sharing a module do not add to each other's.  ``params``:
    the parameters whose gradients are read, by name (default: ``fn``'s module's)."""
    import torch

    from workbench.variants.tree import tensor_leaves

    params = module_parameters(fn) if params is None else params
    saved = {n: p.grad for n, p in params.items()}
    for p in params.values():
        p.grad = None
    try:
        with torch.enable_grad():
            out = fn(*args)
            outs = [t for _, t in tensor_leaves(out, "out") if t.requires_grad]
            gen = torch.Generator().manual_seed(COTANGENT_SEED)
            cots = [
                torch.randn(tuple(t.shape), generator=gen, dtype=torch.float64).to(device=t.device, dtype=t.dtype)
                for t in outs
            ]
            if outs:
                torch.autograd.backward(outs, cots)
        leaves = dict(tensor_leaves(args))
        grads: dict[str, Any] = {
            f"grad {p}": (leaves[p].grad.detach().clone() if leaves[p].grad is not None else None) for p in paths
        }
        grads.update(
            {f"grad {n}": (p.grad.detach().clone() if p.grad is not None else None) for n, p in params.items()}
        )
        return out, grads
    finally:
        for n, p in params.items():
            p.grad = saved[n]


def compare_gradients(
    got: dict[str, Any],
    ref: dict[str, Any] | None,
    native: dict[str, Any],
    overrides: dict[str, tuple[float, float]] | None = None,
) -> list[OutputCheck]:
    """Each of the baseline's gradients (inputs and parameters) against the variant's, as outputs
    are checked (the float64 reference, the baseline's own error allowed); a gradient the
    variant does not produce, or produces where the baseline has none, fails."""
    from workbench.variants.tolerances import gradient_tolerance_overrides

    tol = gradient_tolerance_overrides(overrides)
    checks = []
    for path, expected in native.items():
        if path not in got:
            continue  # a parameter of the baseline's module the variant does not hold (a plain function)
        mine = got[path]
        if expected is None and mine is None:
            continue
        if expected is None:
            checks.append(OutputCheck(path, False, "a gradient where the baseline has none"))
            continue
        if mine is None:
            checks.append(
                OutputCheck(
                    path,
                    False,
                    "no gradient reached it (the baseline's does): the variant "
                    "cuts the autograd graph (detach, no_grad, a forward-only "
                    "kernel); a training path needs its backward too",
                    dtype=dtype_name(expected),
                )
            )
            continue
        reference = ref.get(path) if ref is not None else None
        checks += [
            c.with_path(path) for c in scaled_checks(mine, expected if reference is None else reference, expected, tol)
        ]
    return checks


def grad_rel_error(got: Any, expected: Any) -> float | None:
    """max|got - expected| / max|expected| (None: not comparable)."""
    try:
        if tuple(got.shape) != tuple(expected.shape) or expected.numel() == 0:
            return None
        e = expected.detach().double()
        scale = float(e.abs().max())
        err = float((got.detach().double() - e).abs().max())
        return err / scale if scale > 0 else (0.0 if err == 0 else float("inf"))
    except Exception:  # noqa: BLE001
        return None


def scaled_checks(
    got: Any, ref: Any, native: Any, overrides: dict[str, tuple[float, float]] | None
) -> list[OutputCheck]:
    """``check_outputs`` of one gradient (or state tensor) in units of the baseline's largest |value|:
    a gradient's size depends on the loss's scale, not on its accuracy, so the absolute tolerance is a
    share of that gradient's largest value (and a small gradient is judged, not called "cannot judge").
    The errors reported are in the tensor's own units again."""
    from dataclasses import replace

    try:
        floating = all(hasattr(t, "is_floating_point") and t.is_floating_point() for t in (got, ref, native))
        s = float(native.detach().abs().max()) if floating and native.numel() else 0.0
    except Exception:  # noqa: BLE001 - unreadable: the plain check says why
        floating, s = False, 0.0
    if not floating or not (s > 0 and np.isfinite(s)) or got.shape != native.shape or ref.shape != native.shape:
        return check_outputs(got, ref, native, overrides)
    found = check_outputs(got.detach() / s, ref.detach() / s, native.detach() / s, overrides)
    return [
        replace(c, max_abs_err=c.max_abs_err * s, worst_got=c.worst_got * s, worst_expected=c.worst_expected * s)
        for c in found
    ]


def resolve_mode(
    mode: str | None,
    baseline_fn: Callable[..., Any],
    args: tuple[Any, ...],
    *,
    tracker: Any = None,
    self_backward: bool = False,
) -> str:
    """The comparison's mode: as given, else training when the baseline's call computed gradients
    itself (a training step) or its output requires grad.  With a ``tracker`` the call starts from
    the comparison's snapshot and the snapshot is put back after it."""
    checked = check_mode(mode)
    if checked is not None:
        return checked
    if self_backward:
        return TRAINING
    if tracker is not None:
        tracker.restore()
    try:
        out = baseline_fn(*_with_grad_inputs(args, grad_paths(args)))  # under the caller's grad mode
    finally:
        if tracker is not None:
            tracker.restore()
    return TRAINING if needs_grad(out) else INFERENCE


NO_GRADIENTS_FLAG = (
    "cannot judge: no parameters reached; pass model=… or params=… (training mode, but no gradient "
    "of an input or a parameter could be compared)"
)


def reached_params(live: "Live") -> dict[str, Any] | None:
    """The parameters (requiring grad) ``live``'s callable reaches, under the baseline's names where
    shared (None: no reach known, the module's own are used)."""
    if live.reach is None:
        return None
    out: dict[str, Any] = {}
    extra: set[int] = getattr(live, "extra_ids", set())
    for own_pass in (True, False):  # its own tensors first: a model=/params= override never shadows them
        for n, p in live.reach.params.items():
            name = live.names.get(id(p), n)
            if p.requires_grad and (id(p) not in extra) == own_pass and name not in out:
                out[name] = p
    return out


def _backward_of(
    live: "Live",
    args: Any,
    paths: list[str],
    params: dict[str, Any] | None,
    fn: Any = None,
    cast: Any = None,
    cast_model: bool = False,
) -> tuple[Any, dict[str, Any]]:
    tracker = live.tracker
    if tracker is not None:
        tracker.restore()
        if cast_model:
            tracker.cast_to_float64()  # the float64 reference of a closure over a float32 model
    try:
        return backward_grads(fn or live.variant.fn, _with_grad_inputs(args, paths, cast), paths, params=params)
    finally:
        if tracker is not None:
            tracker.restore()


def check_training(
    lives: list["Live"],
    base: "Live",
    make_inputs: Callable[[], tuple[Any, ...]],
    *,
    checks: int,
    tolerances: dict[str, tuple[float, float]] | None,
    reference: Callable[..., Any] | None,
    reference_fn: Callable[[Any, Any], tuple[Callable[..., Any], str]],
    precision: str = "float64",
) -> list[str]:
    """The gradient checks of a training path: on ``checks`` fresh inputs, every runnable
    candidate's gradients of each input that requires grad and each parameter its callable reaches
    (``reach.py``: a closure over the model too) against the baseline's (and a float64 reference's,
    where one runs). A candidate whose gradient differs is failed as incorrect, the gradient named in
    its reason.  A baseline whose call ran its own backward is not backwarded again (its gradients
    were compared as effects of the call); with no gradient to compare at all, every candidate is
    flagged "cannot judge". Returns notes."""
    from workbench.variants.tree import to_reference_precision

    notes: list[str] = []
    cands = [lv for lv in lives if lv is not base]
    if base.self_backward:
        notes.append(
            "the baseline's call runs its own backward: its gradients (and any parameter, optimizer "
            "and buffer changes) were compared as the effects of each checked call; no call was "
            "backwarded again"
        )
        return notes
    base_params = reached_params(base)
    for _ in range(max(1, checks)):
        args = make_inputs()
        if base.tracker is not None:
            base.tracker.begin_check()
        paths = training_paths(base.variant.fn, args, params=base_params)
        try:
            _, native = _backward_of(base, args, paths, base_params)
        except Exception as exc:  # noqa: BLE001
            from workbench.errors import InvalidArgumentError

            raise InvalidArgumentError(
                f"the baseline {base.name!r} has no backward on a training path "
                f"({type(exc).__name__}: {str(exc)[:160]}); pass mode='inference' "
                f"if only the forward matters"
            ) from None
        if not any(g is not None for g in native.values()):
            for live in cands:
                if live.runnable:
                    live.add_flags([NO_GRADIENTS_FLAG])
            notes.append(
                "training mode, but the baseline's output reaches no input or parameter through autograd "
                "and its call computes no gradient itself: no gradient was compared (pass model= or params=)"
            )
            return notes
        ref = None
        if precision == "float64":
            ref_fn, note = reference_fn(base.variant, reference)
            ref_params = base_params if ref_fn is base.variant.fn else None
            try:
                _, ref = _backward_of(
                    base,
                    args,
                    paths,
                    ref_params,
                    fn=ref_fn,
                    cast=to_reference_precision,
                    cast_model=getattr(base, "reference_mode", "fn") == "cast",
                )
            except Exception as exc:  # noqa: BLE001 - no float64 backward: the baseline's own gradients
                note = note or (
                    f"gradients compared with the baseline's own (the float64 backward failed: {type(exc).__name__})"
                )
        else:
            note = "gradients compared with the baseline's own (no float64 reference runs for it)"
        if note and note not in notes:
            notes.append(note)
        for live in cands:
            if not live.runnable or live.self_backward:
                continue  # a call that ran backward itself: its gradients were its effects
            try:
                _, got = _backward_of(live, args, paths, reached_params(live))
            except Exception as exc:  # noqa: BLE001 - the variant's backward failed: its failure
                live.checks.append(
                    OutputCheck("grad", False, f"its backward raised {type(exc).__name__}: {str(exc)[:160]}")
                )
                live.fail("incorrect", f"gradient: its backward raised {type(exc).__name__}: {str(exc)[:160]}")
                continue
            if live.reach is None:
                got = _as_baseline_names(got, live.variant.fn, base.variant.fn)
            missing = [k for k, g in native.items() if g is not None and k not in got]
            found = compare_gradients(got, ref, native, live.grad_tolerances or tolerances)
            live.checks += found
            for k, g in got.items():
                exp = (ref or {}).get(k) if ref is not None and (ref or {}).get(k) is not None else native.get(k)
                if g is not None and exp is not None:
                    rel = grad_rel_error(g, exp)
                    if rel is not None:
                        live.note_grad_error(rel)
            bad = [c for c in found if not c.passed]
            if bad:
                live.fail("incorrect", "; ".join(f"{c.path}: {c.reason}" for c in bad[:3]))
            elif missing:
                shown = ", ".join(m.replace("grad ", "") for m in missing[:3])
                more = f" and {len(missing) - 3} more" if len(missing) > 3 else ""
                live.add_flags(
                    [
                        f"cannot judge the gradients of {len(missing)} parameter(s) of the baseline "
                        f"({shown}{more}): the variant reaches none of them by identity or name; pass "
                        f"model=… or params=…"
                    ]
                )
    return notes


def _as_baseline_names(grads: dict[str, Any], fn: Any, baseline_fn: Any) -> dict[str, Any]:
    """The variant's parameter gradients under the baseline's parameter names: a parameter the
    two share (a compiled or wrapped module) by identity, else by the same name."""
    mine = module_parameters(fn)
    theirs = module_parameters(baseline_fn)
    renamed = {}
    for name, p in mine.items():
        shared = next((n for n, q in theirs.items() if q is p), name)
        renamed[f"grad {name}"] = f"grad {shared}"
    return {renamed.get(k, k): v for k, v in grads.items()}


def training_paths(fn: Any, args: Any, params: dict[str, Any] | None = None) -> list[str]:
    """The inputs a training path takes gradients of: those that require grad; with none, and no
    parameters reached (``params``, default ``fn``'s module's; mode="training" on plain inputs),
    every floating input."""
    paths = grad_paths(args)
    if not paths and not (module_parameters(fn) if params is None else params):
        paths = [p for p, _ in _float_leaves(args)]
    return paths


def _float_leaves(args: Any) -> list[tuple[str, Any]]:
    from workbench.variants.tree import tensor_leaves

    return [(p, t) for p, t in tensor_leaves(args) if t.is_floating_point() or t.is_complex()]


def training_step(fn: Callable[..., Any], paths: list[str]) -> Callable[..., Any]:
    """``fn`` as a training path is timed: forward, then backward of every output that requires
    grad (a forward-only speedup is not a training step's speedup). The tensors at ``paths``
    are made grad leaves on each call; their gradients are dropped after it."""
    import torch

    from workbench.variants.tree import tensor_leaves

    def step(*args: Any) -> Any:
        leaves = dict(tensor_leaves(args))
        for p in paths:
            if p in leaves and leaves[p].is_leaf:
                leaves[p].requires_grad_(True)
        with torch.enable_grad():
            out = fn(*args)
            outs = [t for _, t in tensor_leaves(out, "out") if t.requires_grad]
            if outs:
                torch.autograd.backward(outs, [torch.ones_like(t) for t in outs])
        for p in paths:
            if p in leaves:
                leaves[p].grad = None
        return out

    step.__name__ = getattr(fn, "__name__", "step")
    return step
