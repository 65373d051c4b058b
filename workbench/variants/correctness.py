"""Compare a variant's outputs with the float64 reference, element by element.

Reported per output: max abs error, max and mean relative error, the share of elements outside
tolerance, NaN/Inf mismatches, the worst element, the tolerance used.  An output whose
magnitude is below its absolute tolerance is flagged, not passed: the check could not tell it
from zero.  Structure, shape and dtype mismatches fail with the reason.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from workbench.variants.tolerances import Tolerance, dtype_name, tolerance_for
from workbench.variants.tree import leaves_with_paths, structure

BASELINE_ERROR_FACTOR = 4.0   # a variant may err up to 4x what the baseline errs (plus tolerance)


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
        return (not self.passed and self.below_tolerance and self.frac_outside_tol == 0
                and self.nonfinite_mismatch == 0)

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
        return {"passed": self.passed, "outputs": [o.to_dict() for o in self.outputs],
                "checks": self.checks, "reference_precision": self.reference_precision,
                "flags": list(self.flags)}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "CorrectnessResult":
        return cls(passed=bool(d["passed"]), outputs=tuple(OutputCheck.from_dict(o) for o in d["outputs"]),
                   checks=int(d.get("checks", 0)), reference_precision=d.get("reference_precision", "float64"),
                   flags=tuple(d.get("flags", ())))


def check_outputs(got: Any, expected_ref: Any, expected_native: Any,
                  overrides: dict[str, tuple[float, float]] | None = None) -> list[OutputCheck]:
    """Check every leaf of ``got`` against the reference (float64) with the baseline's dtypes.

    ``expected_native`` is the baseline's output in its own precision: it fixes which dtype
    and shape each output should have.
    """
    if structure(got) != structure(expected_native):
        return [OutputCheck("out", False, f"output structure {structure(got)} differs from the "
                                          f"baseline's {structure(expected_native)}")]
    pairs = zip(leaves_with_paths(got), leaves_with_paths(expected_ref), leaves_with_paths(expected_native))
    return [_check_leaf(p, g, r, n, overrides) for (p, g), (_, r), (_, n) in pairs]


def _check_leaf(path: str, got: Any, ref: Any, native: Any, overrides) -> OutputCheck:
    if not hasattr(got, "dtype"):
        same = got == native if not isinstance(got, float) else np.isclose(got, native)
        return OutputCheck(path, bool(same), "" if same else f"value {got!r} != baseline {native!r}")
    layout, device = getattr(got, "layout", None), getattr(got, "device", None)
    if layout != getattr(native, "layout", None):
        return OutputCheck(path, False, f"layout {str(layout).replace('torch.', '')} != expected "
                                        f"{str(native.layout).replace('torch.', '')} (a variant must return the "
                                        f"baseline's layout; call .to_dense() if it computes sparsely)",
                           dtype=dtype_name(got))
    if device is not None and getattr(device, "type", None) == "meta" and native.device.type != "meta":
        return OutputCheck(path, False, f"device meta != expected {native.device}: a meta tensor has a shape "
                                        f"but no data, so the variant computed nothing", dtype=dtype_name(got))
    if device != getattr(native, "device", None):
        return OutputCheck(path, False, f"device {device} != expected {native.device}", dtype=dtype_name(got))
    if tuple(got.shape) != tuple(native.shape):
        return OutputCheck(path, False, f"shape {tuple(got.shape)} != expected {tuple(native.shape)}")
    if got.dtype != native.dtype:
        return OutputCheck(path, False, f"dtype {dtype_name(got)} != expected {dtype_name(native)} "
                                        f"(a variant must return the baseline's dtype)", dtype=dtype_name(got))
    tol = tolerance_for(dtype_name(native), overrides)
    if not (native.is_floating_point() or native.is_complex()):
        ref = native          # integers and booleans: exactly the baseline's values
    if tuple(ref.shape) != tuple(native.shape):
        return OutputCheck(path, False, f"reference shape {tuple(ref.shape)} differs from the baseline's "
                                        f"{tuple(native.shape)}: the float64 reference is not comparable")
    g = got.detach().cpu().double().numpy() if got.numel() else np.zeros(0)
    r = ref.detach().cpu().double().numpy() if ref.numel() else np.zeros(0)
    n = native.detach().cpu().double().numpy() if native.numel() else np.zeros(0)
    return _compare_arrays(path, np.asarray(g), np.asarray(r), tol, np.asarray(n))


def _baseline_allowance(r: np.ndarray, n: np.ndarray, both: np.ndarray) -> np.ndarray:
    """Error the baseline itself makes against float64, per element plus its RMS, times
    BASELINE_ERROR_FACTOR: ill-conditioned elements (cancellation, sqrt near 0) allow what the
    original code in its own precision also gets wrong there."""
    n_err = np.where(both & np.isfinite(n), np.abs(n - r), 0.0)
    rms = float(np.sqrt(np.mean(n_err ** 2))) if n_err.size else 0.0
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
    worst = np.unravel_index(int(np.argmax(np.where(outside, np.inf, err - allowed)))
                             if outside.any() else int(np.argmax(err)), g.shape)
    below = bool(both.any() and float(mag.max()) <= tol.atol and tol.atol > 0)
    n_out = int(np.count_nonzero(outside))
    reason = _leaf_reason(n_out, g.size, mismatch, below, tol)
    return OutputCheck(
        path, passed=(n_out == 0 and mismatch == 0 and not below), reason=reason, dtype=tol.dtype,
        max_abs_err=float(err.max()), max_rel_err=float(rel.max()),
        mean_rel_err=float(rel[both].mean()) if both.any() else 0.0,
        frac_outside_tol=n_out / g.size, nonfinite_mismatch=mismatch,
        worst_index=tuple(int(i) for i in worst), worst_got=float(g[worst]),
        worst_expected=float(r[worst]), tolerance=tol, below_tolerance=below)


def _leaf_reason(n_out: int, size: int, mismatch: int, below: bool, tol: Tolerance) -> str:
    parts = []
    if n_out:
        parts.append(f"{n_out}/{size} elements outside tolerance (rtol {tol.rtol:g}, atol {tol.atol:g})")
    if mismatch:
        parts.append(f"{mismatch} NaN/Inf mismatches against the reference")
    if below and not n_out and not mismatch:
        smaller = f"{{'{tol.dtype}': ({tol.rtol:g}, {tol.atol / 1e4:g})}}"
        parts.append(f"cannot judge: the reference output's magnitude is below the absolute tolerance "
                     f"{tol.atol:g}, so the check cannot tell it from zero; scale the inputs up or pass "
                     f"tolerances={smaller}")
    return "; ".join(parts)
