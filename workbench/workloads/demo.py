"""The built-in demo workload: a small model whose hot path shows three classic costs.

* ``elementwise_chain(x)``: eight full passes of cheap arithmetic over a 1M-element (4 MiB)
  tensor (memory bound; a fusion candidate: ``torch.compile`` turns it into one pass);
* ``projection(h, w)``: one matmul (compute bound);
* ``tiny_op_loop(h)``: a Python loop of small ops (dispatch / launch overhead dominates).

``workload(x, w)`` runs the three in sequence. It is sized to take tens of milliseconds per
call on one CPU core, so that ``workbench report`` profiles it in seconds. On a GPU the same
code runs on the device of ``make_inputs(device=...)``.

    from workbench import demo
    x, w = demo.make_inputs()
    out = demo.workload(x, w)
"""

from __future__ import annotations

import math
from typing import Any

from workbench.errors import InvalidArgumentError

ROWS = 1024  # rows of the activation
HIDDEN = 1024  # columns of the activation = rows of the weight
OUT_FEATURES = 256  # columns of the weight
TINY_LOOP_STEPS = 48  # iterations of the tiny-op loop
TINY_SLICE = 16  # rows touched per tiny-op step
SEED = 0


def make_inputs(
    rows: int = ROWS,
    hidden: int = HIDDEN,
    out_features: int = OUT_FEATURES,
    *,
    device: str = "cpu",
    dtype: Any = None,
    seed: int = SEED,
) -> tuple[Any, Any]:
    """Fresh random ``(x, w)``: activation ``[rows, hidden]`` and weight ``[hidden, out_features]``."""
    import torch

    for label, value in (("rows", rows), ("hidden", hidden), ("out_features", out_features)):
        if int(value) <= 0:
            raise InvalidArgumentError(f"demo.make_inputs: {label} must be > 0; got {value}")
    dtype = torch.float32 if dtype is None else dtype
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(rows, hidden, generator=gen, dtype=torch.float32).to(device=device, dtype=dtype)
    w = torch.randn(hidden, out_features, generator=gen, dtype=torch.float32)
    w = (w / math.sqrt(hidden)).to(device=device, dtype=dtype)
    return x, w


def elementwise_chain(x: Any) -> Any:
    """A hard-swish activation (``x * relu6(x + 3) / 6``) written as separate passes, then a
    scale, a shift and a residual.

    Every line reads and writes the whole tensor: eight memory passes where one would do. The
    ops are all cheap arithmetic (no transcendental per element), so the fused pass that
    ``torch.compile`` makes is limited by memory bandwidth, not by the math: a tanh per element
    (Sleef's vectorised tanh in inductor's C++) costs several times a copy of the element on one
    CPU core, which would make the fused chain compute bound (``benchmarks/variants_demo.py --tanh``).
    """
    gate = (x + 3.0).clamp(0.0, 6.0)
    y = x * gate
    y = y / 6.0
    y = y * 1.5 - 0.25
    return y + 0.5 * x


def projection(h: Any, w: Any) -> Any:
    """The matmul: ``[rows, hidden] @ [hidden, out_features]``."""
    return h @ w


def tiny_op_loop(h: Any, steps: int = TINY_LOOP_STEPS) -> Any:
    """A Python loop of small ops on slices: each op does little work, dispatch dominates."""
    acc = h[:TINY_SLICE].clone()
    for i in range(steps):
        row = (i * TINY_SLICE) % max(1, h.shape[0] - TINY_SLICE)
        acc = acc + h[row : row + TINY_SLICE] * 0.01
        acc = acc.clamp(-10.0, 10.0)
    return acc.sum(dim=0)


def workload(x: Any, w: Any) -> Any:
    """The whole demo hot path: elementwise chain -> matmul -> loop of tiny ops."""
    h = elementwise_chain(x)
    p = projection(h, w)
    return tiny_op_loop(p)


def run() -> Any:
    """Build inputs and run the workload once (what ``--workload workbench.workloads.demo:run`` profiles)."""
    x, w = make_inputs()
    return workload(x, w)
