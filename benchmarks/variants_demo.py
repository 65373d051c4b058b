"""The demo's elementwise chain, eager against torch.compile, through ``wb.compare``.

Prints the decision, the speedup with its interval, the compile time (apart), the change in
op count, and where each variant sits against the machine's memory roof: achieved GB/s over
the compulsory traffic (read x, write y) as a share of the bandwidth of a copy that moves the
same bytes (the same working set, so the same cache level; one thread on both sides), and
against a large (256 MB) copy.
    OMP_WAIT_POLICY=PASSIVE .venv/bin/python benchmarks/variants_demo.py [--tanh]

``--tanh`` first shows why the demo's chain has no transcendental: the same chain with a tanh per
element, compiled, costs the same per element in L2 as from L3 (compute bound on one core).
"""

from __future__ import annotations

import itertools
import math
import os
import statistics
import sys
import time

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import torch  # noqa: E402

import workbench as wb  # noqa: E402
from workbench import demo  # noqa: E402
from workbench.variants.bandwidth import copy_gbps  # noqa: E402


def run(budget_s: float = 4.0):
    """``(comparison, compiled variant)``: the demo chain, eager against torch.compile."""
    seeds = itertools.count(1)
    inputs = lambda: (demo.make_inputs(seed=next(seeds))[0],)  # noqa: E731 - fresh x each check
    chain = demo.elementwise_chain
    compiled = wb.variants.compiled(chain)
    cmp = wb.compare({"eager": chain, "compiled": compiled}, inputs=inputs, budget_s=budget_s, min_rounds=15)
    return cmp, compiled


def back_to_back_gbps(fn, x, nbytes: int, repeats: int = 7) -> float:
    """GB/s of ``fn(x)`` timed exactly as the copy roof is (back-to-back calls on the same
    buffers, median of ``repeats`` blocks): the roofline placement of the kernel itself, without
    the other variant running between samples as in the interleaved comparison."""
    fn(x)
    reps = max(1, min(200, int(2e8 // nbytes)))
    samples = []
    for _ in range(repeats):
        start = time.perf_counter_ns()
        for _ in range(reps):
            fn(x)
        samples.append((time.perf_counter_ns() - start) / reps)
    return nbytes / (statistics.median(samples) * 1e-9) / 1e9


def interleaved_copy_share(fn, x, nbytes: int, rounds: int = 9) -> tuple[float, float]:
    """(median GB/s of ``fn``, median per-round share of a same-size copy's GB/s), the copy and
    ``fn`` timed back to back in alternating blocks, so drift on a shared machine hits both."""
    src = torch.ones(max(1024, nbytes // 8), dtype=torch.float32)
    dst = torch.empty_like(src)
    gbps, shares = [], []
    for _ in range(rounds):
        copy = back_to_back_gbps(lambda t: dst.copy_(t), src, 8 * src.numel(), repeats=1)
        mine = back_to_back_gbps(fn, x, nbytes, repeats=1)
        gbps.append(mine)
        shares.append(mine / copy)
    return statistics.median(gbps), statistics.median(shares)


def tanh_gelu_chain(x):
    """The demo's earlier chain (tanh-approximated GELU, then scale and shift): one tanh per element."""
    inner = (x + 0.044715 * (x * x * x)) * math.sqrt(2.0 / math.pi)
    return (0.5 * x * (torch.tanh(inner) + 1.0)) * 1.5 - 0.25


def show_tanh_is_compute_bound() -> None:
    """``--tanh``: the compiled tanh chain costs the same per element whether its data sit in L2
    (64K floats) or stream from L3 (1M floats), far below the copy: compute bound, not memory bound."""
    compiled = torch.compile(tanh_gelu_chain)
    for n in (1 << 16, 1 << 20):
        x = torch.randn(n)
        gbps = back_to_back_gbps(compiled, x, 8 * n)
        roof = copy_gbps(8 * n)
        print(
            f"  tanh chain, compiled, {n} floats: {8 / gbps:.2f} ns per element, {gbps:.2f} GB/s = "
            f"{gbps / roof:.0%} of a same-size copy ({roof:.2f} GB/s)"
        )


def main() -> None:
    torch.set_num_threads(1)
    if "--tanh" in sys.argv[1:]:
        show_tanh_is_compute_bound()
    cmp, compiled = run()
    eager, comp = cmp["eager"], cmp["compiled"]
    s = comp.speedup
    print(f"decision: {comp.decision} ({comp.decision_reason})")
    print(
        f"eager {eager.timing.median_ms:.3f} ms, compiled {comp.timing.median_ms:.3f} ms per call: "
        f"speedup x{s.point:.2f} [95% CI {s.ci_low:.2f}-{s.ci_high:.2f}]"
    )
    print(f"compile (setup) time, apart: {comp.setup_ms / 1e3:.1f} s")
    print(f"timing: {cmp.settings['timing']['text']}")
    print(
        f"op count per call: eager {eager.footprint.get('op_count')} -> compiled "
        f"{comp.footprint.get('op_count')}; allocations {eager.footprint.get('alloc_count')} -> "
        f"{comp.footprint.get('alloc_count')}"
    )
    print(
        f"copy bandwidth, same working set ({eager.bytes_moved / 1e6:.1f} MB moved, "
        f"{torch.get_num_threads()} thread): {cmp.working_set_copy_gbps:.2f} GB/s; "
        f"large copy (256 MB moved): {cmp.copy_gbps:.2f} GB/s"
    )
    for r in (eager, comp):
        print(
            f"  {r.name:9s} {r.achieved_gbps:.2f} GB/s on {r.bytes_moved / 1e6:.1f} MB compulsory traffic "
            f"= {r.bandwidth_share:.0%} of the same-working-set copy bandwidth "
            f"({r.achieved_gbps / cmp.copy_gbps:.0%} of the large copy's)"
        )
    x = demo.make_inputs()[0]
    for name, fn in (("eager", demo.elementwise_chain), ("compiled", compiled.fn)):
        gbps, share = interleaved_copy_share(fn, x, comp.bytes_moved)
        print(
            f"  {name:9s} back to back, timed like the copy and alternating with it: {gbps:.2f} GB/s = "
            f"{share:.0%} of the same-working-set copy bandwidth (median of 9 rounds)"
        )


if __name__ == "__main__":
    main()
