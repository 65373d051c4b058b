"""What does recording the statements of the user's code (attribution by line) cost the traced pass?

A training step written the ordinary way (a small model of nn.Modules, a loss function closing over it,
``loss = step()``, AdamW with its default single-tensor loop on the CPU) is profiled with
``wb.profile`` in interleaved rounds (A, B, B, A, ...), with the statement recorder on
(``workbench.capture.profiler_session.RECORD_STATEMENTS``, the default) and off. Printed: the medians
over rounds of the traced per-call median (``run.traced_timing``, the calls under the profiler) and of
the clean per-call median (``run.timing``, no profiler and no recorder: it must not move), their
ratios on/off, the change points recorded per traced call, and the wall time of ``wb.profile``.

Run:  .venv/bin/python benchmarks/statement_lines_overhead.py [--rounds 8] [--repeat 20]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402
from torch import nn  # noqa: E402

import workbench as wb  # noqa: E402
import workbench.capture.profiler_session as session  # noqa: E402


class Block(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.fc1 = nn.Linear(width, 4 * width)
        self.fc2 = nn.Linear(4 * width, width)

    def forward(self, x):
        h = self.norm(x)
        h = torch.nn.functional.gelu(self.fc1(h))
        return x + self.fc2(h)


def make_step():
    torch.manual_seed(0)
    model = nn.Sequential(*(Block(128) for _ in range(4)), nn.Linear(128, 10))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x, y = torch.randn(32, 128), torch.randint(0, 10, (32,))

    def loss_fn():
        return nn.functional.cross_entropy(model(x), y)

    def step():
        opt.zero_grad(set_to_none=True)
        loss = loss_fn()
        loss.backward()
        opt.step()
        return loss

    return step


def one(step, on: bool, repeat: int) -> tuple[float, float, int, float]:
    session.RECORD_STATEMENTS = on
    try:
        start = time.perf_counter()
        run = wb.profile(step, warmup=2, repeat=repeat, threads=1, history=False)
        wall_s = time.perf_counter() - start
    finally:
        session.RECORD_STATEMENTS = True
    assert run.traced_timing is not None
    statements = getattr(run.record, "statements", None)
    points = len(statements) if statements is not None else 0
    return run.traced_timing.median_ms, run.timing.median_ms, points // max(1, run.traced_calls), wall_s


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    torch.set_num_threads(1)
    step = make_step()
    one(step, True, 3)  # the profiler and the recorder warmed up once, untimed
    results: dict[bool, list[tuple[float, float, int, float]]] = {True: [], False: []}
    for r in range(args.rounds):
        for on in (True, False) if r % 2 == 0 else (False, True):
            results[on].append(one(step, on, args.repeat))
    med = {on: [statistics.median(v[i] for v in results[on]) for i in range(4)] for on in results}
    print(f"{args.rounds} rounds, interleaved; medians over rounds")
    print(
        f"  traced per call   on {med[True][0]:.3f} ms   off {med[False][0]:.3f} ms   ratio {med[True][0] / med[False][0]:.3f}"
    )
    print(
        f"  clean per call    on {med[True][1]:.3f} ms   off {med[False][1]:.3f} ms   ratio {med[True][1] / med[False][1]:.3f}"
    )
    print(
        f"  wb.profile wall   on {med[True][3]:.2f} s    off {med[False][3]:.2f} s    ratio {med[True][3] / med[False][3]:.3f}"
    )
    print(f"  change points recorded per traced call: {med[True][2]:.0f}")


if __name__ == "__main__":
    main()
