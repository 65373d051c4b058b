import pytest
import torch

import workbench as wb
from tests.variants.variant_workloads import FAST, chain
from workbench.errors import InvalidArgumentError, NotApplicableError, RegistryError
from workbench.variants.cuda_graph import input_signature, refuse_cpu_tensors, refuse_signature_change

needs_gpu = pytest.mark.skipif(
    not torch.cuda.is_available(), reason="not applicable: no CUDA device (torch.cuda.is_available() is False)"
)


def test_cuda_graph_refuses_cpu_tensors_with_the_reason():
    with pytest.raises(NotApplicableError, match=r"arg\[0\].*not on a CUDA device"):
        refuse_cpu_tensors((torch.randn(4),))


def test_cuda_graph_refuses_changed_shapes_with_the_reason():
    captured = input_signature((torch.randn(4, 8),))
    refuse_signature_change(captured, (torch.randn(4, 8),))  # same shape: fine
    with pytest.raises(NotApplicableError, match=r"\(4, 8\).*\(5, 8\).*replays fixed shapes"):
        refuse_signature_change(captured, (torch.randn(5, 8),))
    with pytest.raises(NotApplicableError, match="float64"):
        refuse_signature_change(captured, (torch.randn(4, 8, dtype=torch.float64),))


def test_registry_builds_known_names_and_refuses_unknown_ones():
    assert {"eager", "compiled", "compiled_dynamic", "cuda_graph", "triton"} <= set(wb.variants.names())
    v = wb.variants.build("compiled", chain)  # lazy: nothing compiles yet
    assert v.kind == "compiled" and v.requires == ("torch.compile",) and v.numerical_class == "reordered"
    assert wb.variants.build("cuda_graph", chain, name="g").requires == ("cuda",)
    with pytest.raises(RegistryError, match="unknown variant 'nope'.*register"):
        wb.variants.build("nope", chain)
    with pytest.raises(InvalidArgumentError, match="launcher"):
        wb.variants.build("triton", chain)


def test_register_a_users_builder():
    wb.variants.register("halved", lambda fn, name="halved": wb.variants.user(lambda x: fn(x), name=name))
    try:
        with pytest.raises(InvalidArgumentError, match="already registered"):
            wb.variants.register("halved", lambda fn, name="x": None)
        c = wb.compare({"eager": chain, "h": "halved"}, inputs=lambda: torch.randn(64), **FAST)
        assert c["h"].status == "ok"
    finally:
        wb.variants.unregister("halved")


def test_unknown_requirement_is_an_error():
    v = wb.variants.user(chain, requires=("quantum",))
    with pytest.raises(InvalidArgumentError, match="unknown requirement 'quantum'"):
        v.applicability()


@pytest.mark.gpu
@needs_gpu
def test_cuda_graph_captures_replays_and_is_correct():
    inputs = lambda: (torch.randn(1 << 20, device="cuda"),)
    c = wb.compare({"eager": chain, "graph": wb.variants.cuda_graph(chain)}, inputs=inputs, **{**FAST, "profile": True})
    row = c["graph"]
    assert row.status == "ok" and row.correctness.passed, row.reason
    assert row.timing.timer == "cuda_event"
    assert row.footprint["launch_count"] < c["eager"].footprint["launch_count"]


@pytest.mark.gpu
@needs_gpu
def test_cuda_graph_refuses_a_region_that_syncs():
    def syncs(x):
        return chain(x) * x.sum().item()

    c = wb.compare(
        {"eager": syncs, "graph": wb.variants.cuda_graph(syncs)},
        inputs=lambda: (torch.randn(1024, device="cuda"),),
        **FAST,
    )
    assert c["graph"].status == "not_applicable" and "synchronises with the host" in c["graph"].reason


@pytest.mark.gpu
@needs_gpu
def test_cuda_graph_refuses_cpu_inputs_and_new_shapes_on_a_gpu():
    g = wb.variants.cuda_graph(chain)
    with pytest.raises(NotApplicableError, match="not on a CUDA device"):
        g(torch.randn(8))
    g(torch.randn(8, device="cuda"))
    with pytest.raises(NotApplicableError, match="fixed shapes"):
        g(torch.randn(9, device="cuda"))


@pytest.mark.gpu
@needs_gpu
def test_side_stream_work_not_joined_is_caught():
    side = torch.cuda.Stream()

    def on_side_stream(x):
        out = torch.empty_like(x)
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            torch.cuda._sleep(2_000_000)  # ~1 ms of spinning, then the write
            out.copy_(chain(x))
        return out  # never joined with the caller's stream

    c = wb.compare(
        {"eager": chain, "side": on_side_stream}, inputs=lambda: (torch.randn(1 << 16, device="cuda"),), **FAST
    )
    assert any(f.startswith("output changed after return") for f in c["side"].flags)
    assert c["side"].decision == "reject"
