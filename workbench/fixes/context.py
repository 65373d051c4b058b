"""What a recogniser reads: ``FixContext``, the user's live code (when there is some), what it reaches
(modules, optimizers: ``workbench.variants.reach``), the run's trace tables and its hypotheses.

Built from a run (``FixContext.from_run(run, fn)``: ``run.fixes``) or from a callable alone
(``FixContext.from_callable(fn)``: a fix named in ``wb.compare({"x": "sdpa_attention"})``).  The reach
is walked once, on first use; the recognisers only read.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Callable, Iterator


@dataclass
class FixContext:
    fn: Callable[..., Any] | None = None
    trace: Any = None  # workbench.trace.data.TraceData or None
    hypotheses: tuple[Any, ...] = ()
    device: str = "cpu"
    run: Any = None  # the RunRecord it came from, or None
    model: Any = None  # explicit overrides, as wb.compare(model=, optimizer=) takes them
    optimizer: Any = None
    notes: list[str] = field(default_factory=list)

    @classmethod
    def from_callable(cls, fn: Callable[..., Any] | None, **kw: Any) -> FixContext:
        return cls(fn=fn, **kw)

    @classmethod
    def from_run(cls, run: Any, fn: Callable[..., Any] | None = None, **kw: Any) -> FixContext:
        hyps: tuple[Any, ...] = ()
        try:
            hyps = tuple(run.hypotheses)
        except Exception as exc:  # a run without a trace still has its timing
            kw.setdefault("notes", []).append(f"no hypotheses: {type(exc).__name__}: {exc}")
        return cls(
            fn=fn if fn is not None else getattr(run, "code", None),
            trace=getattr(run, "trace", None),
            hypotheses=hyps,
            device=str(getattr(run, "device", "cpu") or "cpu"),
            run=run,
            **kw,
        )

    # -- the live code ----------------------------------------------------------------------------
    @property
    def live(self) -> bool:
        return self.fn is not None

    @cached_property
    def reach(self) -> Any:
        """What ``fn`` reaches (``workbench.variants.reach.Reach``); empty without live code."""
        import workbench.variants.reach as reach

        extra = (
            reach.explicit(self.model, self.optimizer) if (self.model is not None or self.optimizer is not None) else []
        )
        if self.fn is None and not extra:
            return reach.Reach()
        return reach.find_reach(*(() if self.fn is None else (self.fn,)), extra=extra)

    def modules(self) -> Iterator[tuple[str, Any]]:
        """Every module the code reaches, by dotted path (a second top module prefixed by its name)."""
        seen: set[int] = set()
        tops = self.reach.modules
        for i, (top_name, top) in enumerate(tops):
            prefix = "" if i == 0 else f"{top_name}."
            for path, module in top.named_modules():
                if id(module) in seen:
                    continue
                seen.add(id(module))
                yield (prefix + path if path else (top_name if i else "")), module

    @property
    def optimizers(self) -> list[Any]:
        return list(self.reach.optimizers)

    @property
    def cuda(self) -> bool:
        """Whether this run's device (or, without a run, this machine) is a CUDA/ROCm GPU."""
        if self.device.startswith("cuda"):
            return True
        if self.run is not None:
            return False
        try:
            import torch

            return bool(torch.cuda.is_available())
        except ImportError:
            return False

    # -- the trace ----------------------------------------------------------------------------------
    @cached_property
    def op_counts(self) -> dict[str, int]:
        """CPU op name -> how many times it ran in the traced pass ({} without a trace)."""
        if self.trace is None:
            return {}
        ops = self.trace.cpu_ops
        if ops is None or len(ops) == 0 or "name" not in ops:
            return {}
        return {str(k): int(v) for k, v in ops["name"].value_counts().items()}

    def ran(self, *op_names: str) -> int:
        """How many of the traced pass's CPU ops had one of these names."""
        counts = self.op_counts
        return sum(counts.get(n, 0) for n in op_names)

    # -- the hypotheses -----------------------------------------------------------------------------
    def hypotheses_for(self, fix: Any) -> list[Any]:
        """The hypotheses ``fix`` tests: it is among their suggestions, or their rule is one of its
        mechanisms, or (for fixes that list categories) their category is one of its categories."""
        out = []
        for h in self.hypotheses:
            suggested = fix.name in tuple(getattr(h, "suggested_variants", ()) or ())
            rule = getattr(h, "rule", "") in fix.mechanisms
            category = bool(fix.categories) and getattr(h, "category", None) in fix.categories and not fix.mechanisms
            if suggested or rule or category:
                out.append(h)
        return out
