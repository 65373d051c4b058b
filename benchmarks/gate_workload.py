"""A small CPU workload for ``benchmarks/gate_power.py``, with an injectable slowdown.

``step(x, w)`` runs ``UNITS`` rounds of a 192x192 matmul plus a clamp, on one thread. The environment
variable ``WB_GATE_SLOWDOWN`` (a fraction, default 0) adds that share of rounds: 0.25 runs 25 %
more of the same work, a real 25 % slowdown of the code rather than a sleep. It is read when the
module is imported, so each fresh worker process of the gate sees the value its parent set.

    WB_GATE_SLOWDOWN=0.25 workbench report --workload gate_workload:step  (run from benchmarks/)
"""

from __future__ import annotations

import os

UNITS = 24
SLOWDOWN = float(os.environ.get("WB_GATE_SLOWDOWN", "0") or 0)
ROUNDS = round(UNITS * (1 + SLOWDOWN))


def make_inputs(seed: int = 0):
    import torch

    torch.set_num_threads(1)  # one thread: a shared machine's other work cannot stall a thread team
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(192, 192, generator=gen), torch.randn(192, 192, generator=gen) / 14.0


def step(x, w):
    y = x
    for _ in range(ROUNDS):
        y = (y @ w).clamp_(-3.0, 3.0)
    return y
