"""torch.compile on the demo's elementwise chain: kept, with a measured speedup, fewer ops,
compile time apart, and a roofline point closer to the bandwidth ceiling.  One compile, shared."""

import itertools

import pytest
import torch

import workbench as wb

pytestmark = pytest.mark.slow
demo = pytest.importorskip("workbench.workloads.demo")


@pytest.fixture(scope="module")
def cmp():
    seeds = itertools.count(1)
    chain = demo.elementwise_chain
    saved = torch.get_num_threads()
    torch.set_num_threads(1)  # one thread for the kernel and the copy roof alike
    try:
        yield wb.compare(
            {"eager": chain, "compiled": wb.variants.compiled(chain)},
            inputs=lambda: (demo.make_inputs(seed=next(seeds))[0],),
            checks=2,
            budget_s=2.0,
            min_rounds=15,
        )
    finally:
        torch.set_num_threads(saved)


def test_compiled_chain_is_kept_with_a_measured_speedup(cmp):
    row = cmp["compiled"]
    assert row.status == "ok" and row.correctness.passed
    assert row.decision == "keep", row.decision_reason
    assert row.speedup.point > 1.3  # eight passes against one: a wide ratio on any machine
    assert cmp.decision.decision == "keep" and cmp.decision.variant == "compiled"
    assert cmp.decision.numerical_class == "reordered"


def test_compile_time_is_reported_apart(cmp):
    row = cmp["compiled"]
    assert row.setup_ms > 20 * row.timing.median_ms  # the first call paid for compiling
    assert "setup (compile/capture" in "\n".join(cmp.decision.evidence)


def test_what_changed_fewer_ops_and_allocations(cmp):
    eager, comp = cmp["eager"].footprint, cmp["compiled"].footprint
    assert comp["op_count"] < eager["op_count"]
    assert 1 <= comp["alloc_count"] < eager["alloc_count"]  # the compiled graph allocates its output
    assert cmp["compiled"].footprint["delta"]["op_count"] < 0


def test_roofline_point_moves_toward_the_bandwidth_ceiling(cmp):
    eager, comp = cmp["eager"], cmp["compiled"]
    assert comp.achieved_gbps > 1.2 * eager.achieved_gbps
    assert comp.bytes_moved == eager.bytes_moved == 2 * 4 * demo.ROWS * demo.HIDDEN  # read x, write y
    # the fused chain is memory bound: a large share of a same-size copy's bandwidth (75-80%
    # standalone, 47-56% inside compare on a shared 2-core machine, less under load), well above
    # eager's eight passes, and never much above the copy itself. Only ratios are asserted: the
    # absolute share depends on the machine and its load.
    assert 0 < comp.bandwidth_share <= 1.5, comp.bandwidth_share
    assert comp.bandwidth_share > 1.5 * eager.bandwidth_share
    assert cmp.working_set_copy_gbps > 0 and cmp.copy_gbps > 0
    print(
        f"compiled reaches {comp.bandwidth_share:.0%} of the same-working-set copy bandwidth "
        f"({comp.achieved_gbps:.2f} of {cmp.working_set_copy_gbps:.2f} GB/s); eager {eager.bandwidth_share:.0%}"
    )


def test_footprint_counts_allocations_made_inside_operators():
    """prof.events() folds allocations into their operator: the footprint must still see each one
    (eager: one 4 MiB buffer per elementwise op; compiled: only the output)."""
    import torch

    from workbench.variants.footprint import profile_footprint, summarize_memory

    x = torch.randn(1024, 1024)

    def chain(t):
        return (t * torch.clamp(t + 3, 0, 6) / 6).sum(dim=1)

    eager = profile_footprint(chain, (x,))
    assert eager["alloc_count"] >= 4 and eager["alloc_bytes"] >= 4 * x.numel() * 4
    assert eager["peak_memory_bytes"] >= 2 * x.numel() * 4  # two temporaries alive at once
    assert summarize_memory([8, -8, 16, 4, -20]) == {"alloc_count": 3, "alloc_bytes": 28, "peak_memory_bytes": 20}
