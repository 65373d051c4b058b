"""The demo's elementwise chain, eager against torch.compile, through ``wb.compare``.

Prints the decision, the speedup with its interval, the compile time (apart), the change in
op count, and where each variant sits against the machine's memory roof: achieved GB/s over
the compulsory traffic (read x, write y) as a share of the bandwidth of a copy that moves the
same bytes (the same working set, so the same cache level; one thread on both sides), and
against a large (256 MB) copy.
    OMP_WAIT_POLICY=PASSIVE .venv/bin/python benchmarks/variants_demo.py
"""
from __future__ import annotations

import itertools
import os
import sys

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import torch  # noqa: E402

import workbench as wb  # noqa: E402
from workbench import demo  # noqa: E402


def run(budget_s: float = 4.0):
    seeds = itertools.count(1)
    inputs = lambda: (demo.make_inputs(seed=next(seeds))[0],)   # noqa: E731 - fresh x each check
    chain = demo.elementwise_chain
    return wb.compare({"eager": chain, "compiled": wb.variants.compiled(chain)}, inputs=inputs,
                      budget_s=budget_s, min_rounds=15)


def main() -> None:
    torch.set_num_threads(1)
    cmp = run()
    eager, comp = cmp["eager"], cmp["compiled"]
    s = comp.speedup
    print(f"decision: {comp.decision} ({comp.decision_reason})")
    print(f"eager {eager.timing.median_ms:.3f} ms, compiled {comp.timing.median_ms:.3f} ms per call: "
          f"speedup x{s.point:.2f} [95% CI {s.ci_low:.2f}-{s.ci_high:.2f}]")
    print(f"compile (setup) time, apart: {comp.setup_ms / 1e3:.1f} s")
    print(f"op count per call: eager {eager.footprint.get('op_count')} -> compiled "
          f"{comp.footprint.get('op_count')}; allocations {eager.footprint.get('alloc_count')} -> "
          f"{comp.footprint.get('alloc_count')}")
    print(f"copy bandwidth, same working set ({eager.bytes_moved / 1e6:.1f} MB moved, "
          f"{torch.get_num_threads()} thread): {cmp.working_set_copy_gbps:.2f} GB/s; "
          f"large copy (256 MB moved): {cmp.copy_gbps:.2f} GB/s")
    for r in (eager, comp):
        print(f"  {r.name:9s} {r.achieved_gbps:.2f} GB/s on {r.bytes_moved / 1e6:.1f} MB compulsory traffic "
              f"= {r.bandwidth_share:.0%} of the same-working-set copy bandwidth "
              f"({r.achieved_gbps / cmp.copy_gbps:.0%} of the large copy's)")

if __name__ == "__main__":
    main()
