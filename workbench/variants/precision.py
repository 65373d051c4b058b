"""Which precision a call computes in: a census of the dtypes of the floating results of the ops it
runs (a ``TorchDispatchMode``), so that a variant computing in bfloat16/float16 (autocast, or a
``.to(torch.bfloat16)`` inside) where the baseline does not is classed "reduced precision" and judged
with that precision's tolerances, whatever dtype it finally returns.

Autocast shows here as matmul/linear ops with bfloat16 or float16 results (the casts autocast inserts
run below it, as ordinary ops).  A compiled variant is observed through the callable it compiles
(``_torchdynamo_orig_callable``, ``_orig_mod``); a replayed CUDA graph dispatches no ops and shows none.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable

REDUCED = ("bfloat16", "float16")
_MATMUL_WORDS = ("mm", "matmul", "linear", "conv", "scaled_dot_product", "einsum", "addmv", "mv", "dot")


def _is_matmul(name: str) -> bool:
    return (
        name
        in (
            "mm",
            "addmm",
            "bmm",
            "baddbmm",
            "addbmm",
            "matmul",
            "linear",
            "mv",
            "addmv",
            "dot",
            "einsum",
            "_addmm_activation",
        )
        or "conv" in name
        or "scaled_dot_product" in name
    )


_RANDOM_WORDS = (
    "bernoulli",
    "dropout",
    "rand",
    "normal",
    "uniform",
    "multinomial",
    "exponential",
    "cauchy",
    "geometric",
    "log_normal",
    "poisson",
)


def _is_random(name: str) -> bool:
    return any(w in name for w in _RANDOM_WORDS)


@dataclass
class Census:
    """Counts of floating op results by dtype: matmul-like ops apart from the others."""

    matmul: Counter = field(default_factory=Counter)
    other: Counter = field(default_factory=Counter)
    random: Counter = field(default_factory=Counter)  # random ops by name (dropout, rand, bernoulli, ...)

    @property
    def empty(self) -> bool:
        return not (self.matmul or self.other)

    def dtypes(self) -> set[str]:
        return set(self.matmul) | set(self.other)

    def to_dict(self) -> dict[str, Any]:
        return {"matmul": dict(self.matmul), "other": dict(self.other), "random": dict(self.random)}


_MODE_CLASS: Any = None


def prepare() -> Any:
    """Import the dispatch-mode machinery (it pulls in sympy) in the calling thread, once, before any
    call runs under a time limit: an import interrupted by a timeout would leave it half-loaded."""
    global _MODE_CLASS
    if _MODE_CLASS is not None:
        return _MODE_CLASS
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    class _Census(TorchDispatchMode):
        def __init__(self, census: "Census") -> None:
            super().__init__()
            self.census = census

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
            out = func(*args, **(kwargs or {}))
            try:
                name = func.overloadpacket.__name__
                if _is_random(name):
                    self.census.random[name] += 1
                target = self.census.matmul if _is_matmul(name) else self.census.other
                for t in out if isinstance(out, (tuple, list)) else (out,):
                    if isinstance(t, torch.Tensor) and t.is_floating_point():
                        target[str(t.dtype).replace("torch.", "")] += 1
            except Exception:  # noqa: BLE001 - the census never changes the call
                pass
            return out

    with _Census(Census()):  # enter once here, so nothing is imported lazily on first use
        torch.ones(1) + 1
    _MODE_CLASS = _Census
    return _MODE_CLASS


def observe(fn: Callable[..., Any], args: tuple[Any, ...]) -> tuple[Any, Census]:
    """Call ``fn(*args)`` under the census (in this thread); returns (output, census).  Call
    ``prepare()`` first in the thread that sets time limits."""
    census = Census()
    with prepare()(census):
        out = unwrap_compiled(fn)(*args)
    return out, census


def unwrap_compiled(fn: Any) -> Any:
    """The eager callable behind a torch.compile wrapper (observed instead of the compiled one)."""
    inner = getattr(fn, "_torchdynamo_orig_callable", None)
    if inner is not None:
        return inner
    orig = getattr(fn, "_orig_mod", None)
    return orig if orig is not None else fn


def reduced_precision(base: Census | None, mine: Census | None) -> tuple[str, str] | None:
    """(dtype, what it does) when ``mine`` computes in a reduced precision the baseline does not use,
    else None: e.g. ("bfloat16", "computes 12 matmul ops in bfloat16 (the baseline: float32)")."""
    if base is None or mine is None or mine.empty:
        return None
    base_high = sorted(d for d in base.dtypes() if d not in REDUCED) or ["float32"]
    for d in REDUCED:
        if mine.matmul.get(d, 0) and not base.matmul.get(d, 0):
            n = mine.matmul[d]
            return d, f"computes {n} matmul op{'s' if n != 1 else ''} in {d} (the baseline: {', '.join(base_high)})"
    for d in REDUCED:
        if mine.other.get(d, 0) and d not in base.dtypes():
            n = mine.other[d]
            return d, f"computes {n} op{'s' if n != 1 else ''} in {d} (the baseline: {', '.join(base_high)})"
    return None
