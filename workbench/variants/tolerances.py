"""Tolerances by output dtype, and the rounding error each lower precision would leave.

An element passes when ``|got - ref| <= atol * scale + rtol * |ref|`` against the float64
reference, where ``scale = max(1, rms(ref))`` so that outputs of large magnitude with
cancellation are not judged against an absolute tolerance meant for values near 1.
The table is written into every comparison so a reader knows what "correct" meant.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# dtype name -> (rtol, atol). float32's rtol allows reordered sums (compiled, fused kernels)
# and still rejects float16/bfloat16/TF32 error levels (unit roundoff >= 4.9e-4).
DEFAULT_TOLERANCES: dict[str, tuple[float, float]] = {
    "float64": (1e-9, 1e-9),
    "float32": (1e-4, 1e-5),
    "float16": (5e-3, 1e-3),
    "bfloat16": (3e-2, 1e-2),
    "complex128": (1e-9, 1e-9),
    "complex64": (1e-4, 1e-5),
}
EXACT = (0.0, 0.0)  # integer and boolean outputs must match exactly

# unit roundoff of the precisions a variant might silently drop to (TF32 shares float16's mantissa)
UNIT_ROUNDOFF: dict[str, float] = {
    "float64": 2.0**-53,
    "float32": 2.0**-24,
    "float16": 2.0**-11,
    "tf32": 2.0**-11,
    "bfloat16": 2.0**-8,
}
LOWER_PRECISIONS: dict[str, tuple[str, ...]] = {
    "float64": ("float32", "float16", "bfloat16"),
    "float32": ("float16", "bfloat16"),
    "float16": (),
    "bfloat16": (),
}


@dataclass(frozen=True)
class Tolerance:
    dtype: str
    rtol: float
    atol: float

    def to_dict(self) -> dict[str, Any]:
        return {"dtype": self.dtype, "rtol": self.rtol, "atol": self.atol}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Tolerance":
        return cls(d["dtype"], float(d["rtol"]), float(d["atol"]))


def tolerance_for(dtype_name: str, overrides: dict[str, tuple[float, float]] | None = None) -> Tolerance:
    table = {**DEFAULT_TOLERANCES, **(overrides or {})}
    rtol, atol = table.get(dtype_name, EXACT)
    return Tolerance(dtype_name, float(rtol), float(atol))


def dtype_name(t: Any) -> str:
    return str(t.dtype).replace("torch.", "")


# gradients (training paths): backward sums over the batch and reduction dims, so float32 and
# lower precisions get twice the output tolerance; each gradient is also allowed 4x the
# baseline's own error against float64 (correctness.BASELINE_ERROR_FACTOR), as outputs are
GRADIENT_TOLERANCES: dict[str, tuple[float, float]] = {
    "float64": (1e-8, 1e-8),
    "float32": (2e-4, 2e-5),
    "float16": (1e-2, 2e-3),
    "bfloat16": (6e-2, 2e-2),
    "complex128": (1e-8, 1e-8),
    "complex64": (2e-4, 2e-5),
}


def gradient_tolerance_overrides(
    overrides: dict[str, tuple[float, float]] | None = None,
) -> dict[str, tuple[float, float]]:
    """The table gradients are checked against: GRADIENT_TOLERANCES, then the user's overrides."""
    return {**GRADIENT_TOLERANCES, **(overrides or {})}
