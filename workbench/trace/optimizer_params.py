"""Which parameters each optimizer stepped, in the order its step visits them (what the traced pass saw).

A trace holds an ``Optimizer.step#AdamW.step`` span and the ops inside it, but not which parameter an op
updated. The traced pass records it (``workbench.capture.optimizer_params``): for each optimizer whose
``step`` ran, its class, its ``foreach`` / ``fused`` settings and the parameters it visits (those with a
gradient, group by group, as ``torch.optim``'s ``_init_group`` collects them), each with the label of the
module that holds it (``Linear_6``, as the module scopes are labelled), its name in the model
(``blocks.1.mlp.fc.weight``) and its shape. ``workbench.analysis.optimizer_split`` reads the spans' ops
against it. Plain data: no torch here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class SteppedParam:
    module: str  # the label of the module holding it ("Linear_6"; "" where no module that ran holds it)
    name: str  # its name in the model ("blocks.1.mlp.fc.weight"; "" where unknown)
    shape: tuple[int, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"module": self.module, "name": self.name, "shape": list(self.shape)}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> SteppedParam:
        shape = d.get("shape")
        if not isinstance(shape, list) or not all(isinstance(n, int) for n in shape):
            raise ValueError(f"a stepped parameter's shape must be a list of ints; got {shape!r}")
        return cls(str(d.get("module", "") or ""), str(d.get("name", "") or ""), tuple(shape))


@dataclass(frozen=True)
class OptimizerStepParams:
    """One optimizer's step, as the traced pass saw its first call."""

    optimizer: str  # its class name, as the step's span names it ("AdamW")
    foreach: bool | None  # the groups' setting (None: torch's default, decided per call)
    fused: bool | None
    params: tuple[SteppedParam, ...]  # in the order the step visits them

    @property
    def span_name(self) -> str:
        """The name torch gives the step's span."""
        return f"Optimizer.step#{self.optimizer}.step"

    def to_dict(self) -> dict[str, Any]:
        return {
            "optimizer": self.optimizer,
            "foreach": self.foreach,
            "fused": self.fused,
            "params": [p.to_dict() for p in self.params],
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> OptimizerStepParams:
        if not isinstance(d, dict) or not isinstance(d.get("params"), list):
            raise ValueError(f"an optimizer step record needs a list of params; got {type(d).__name__}")
        flags = [d.get("foreach"), d.get("fused")]
        if not all(v is None or isinstance(v, bool) for v in flags):
            raise ValueError(f"foreach / fused must be true, false or null; got {flags}")
        return cls(
            str(d.get("optimizer", "")), flags[0], flags[1], tuple(SteppedParam.from_dict(p) for p in d["params"])
        )


def optimizer_params_from_list(value: Any) -> tuple[OptimizerStepParams, ...]:
    """A saved record's optimizer steps (() where an older record has none); a wrong one is a ValueError."""
    if value is None:
        return ()
    if not isinstance(value, list):
        raise ValueError(f"optimizer_params must be a list of optimizer steps; got {type(value).__name__}")
    return tuple(OptimizerStepParams.from_dict(d) for d in value)
