"""``float64_compute``: ops (CPU trace) or kernels (GPU trace) computing in float64 take at least
``min_share_pct`` of the op / kernel time. A Python float scalar (recorded as a 0-dim double), a dtype
conversion, and a small float64 share are not findings. Hand-built tables, then one tiny live CPU workload."""

from __future__ import annotations

import pytest

from tests.hypotheses.attention_float64_builders import (
    D2,
    F2,
    MM_DIMS,
    float64_facts,
    kernels_only,
    linked_gpu,
    op_table,
)
from tests.hypotheses.builders import fires
from workbench.errors import NotJudged
from workbench.hypotheses.facts import TraceFacts
from workbench.trace.schema import frame

RULE = "float64_compute"
DGEMM = "volta_dgemm_128x64_nn"
SGEMM = "volta_sgemm_128x64_nn"
COPY = "void at::native::unrolled_elementwise_kernel<at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)>"


def _share(h) -> float:
    return {e.metric: e for e in h.evidence}["float64_share_pct"].value


def test_float64_work_over_the_share_fires_with_half_its_time_at_stake_and_no_fix():
    (h,) = fires(RULE, float64_facts(30.0))
    assert h.rule == RULE and h.category == "precision"
    assert _share(h) == pytest.approx(30.0)
    assert h.time_at_stake_ms == pytest.approx(0.15)  # half of the 300 µs float64 mm
    assert h.suggested_variants == ()
    assert ".float()" in h.predicted_effect and "float32" in h.falsifier
    assert h.evidence[0].rows[0]["name"] == "aten::mm" and "double" in h.evidence[0].rows[0]["input_types"]


def test_a_small_float64_share_stays_quiet_and_fires_with_the_threshold_lowered():
    assert fires(RULE, float64_facts(8.0)) == []
    assert fires(RULE, float64_facts(8.0), min_share_pct=6.0)


def test_a_python_float_scalar_is_not_float64_work():
    # x / math.sqrt(d): the scalar is recorded as a 0-dim double, the work is float32
    ops = op_table([("aten::div", 500.0, "[[4,128,128],[]]", '["float","double"]', -1)])
    assert fires(RULE, TraceFacts(None, cpu_ops=ops)) == []


def test_a_conversion_to_or_from_float64_is_not_float64_work():
    ops = op_table(
        [
            ("aten::to", 400.0, "[[1000000],[],[],[],[]]", '["double","Scalar","Scalar","Scalar",""]', -1),
            ("aten::_to_copy", 398.0, "[[1000000],[],[],[],[],[],[]]", '["double","Scalar","","","","Scalar",""]', 0),
            ("aten::copy_", 390.0, "[[1000000],[1000000],[]]", '["float","double","Scalar"]', 1),
            ("aten::mm", 100.0, MM_DIMS, F2, -1),
        ]
    )
    assert fires(RULE, TraceFacts(None, cpu_ops=ops)) == []


def test_ops_under_an_untyped_parent_are_counted_once():
    # an autograd node records no input types: its float64 children decide, the outer typed op only once
    ops = op_table(
        [
            ("autograd::engine::evaluate_function: MmBackward0", 300.0, "", "", -1),
            ("aten::mm", 140.0, MM_DIMS, D2, 0),
            ("aten::mm", 140.0, MM_DIMS, D2, 0),
            ("aten::linear", 300.0, "[[256,256],[256,256],[256]]", '["double","double","double"]', -1),
            (
                "aten::addmm",
                290.0,
                "[[256],[256,256],[256,256],[],[]]",
                '["double","double","double","Scalar","Scalar"]',
                3,
            ),
            ("aten::mm", 400.0, MM_DIMS, F2, -1),
        ]
    )
    (h,) = fires(RULE, TraceFacts(None, cpu_ops=ops))
    assert _share(h) == pytest.approx(100 * (140 + 140 + 300) / 1000)


def test_not_judged_without_recorded_input_types():
    ops = op_table([("aten::mm", 100.0, "", "", -1)])
    with pytest.raises(NotJudged, match="record_shapes"):
        fires(RULE, TraceFacts(None, cpu_ops=ops))


def test_on_a_gpu_fp64_kernels_count_by_name_and_by_op_dtype_but_not_conversions():
    assert _share(fires(RULE, kernels_only([DGEMM, SGEMM], [40.0, 60.0]))[0]) == pytest.approx(40.0)
    assert fires(RULE, kernels_only([DGEMM, SGEMM], [5.0, 95.0])) == []
    ops = op_table(
        [
            ("aten::add", 10.0, "[[1000],[1000],[]]", '["double","double","Scalar"]', -1),
            ("aten::to", 10.0, "[[1000],[],[],[],[]]", '["float","Scalar","Scalar","Scalar",""]', -1),
            ("aten::copy_", 8.0, "[[1000],[1000],[]]", '["double","float","Scalar"]', 1),
        ]
    )
    add = "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add>"
    (h,) = fires(RULE, linked_gpu(ops, [(0, add, 30.0), (2, COPY, 50.0), (-1, SGEMM, 20.0)]))
    assert _share(h) == pytest.approx(30.0)  # the add; the float -> double copy is a conversion
    assert h.evidence[0].rows[0]["precision_from"] == "op dtype"


def test_on_a_gpu_with_no_precision_anywhere_it_is_not_judged():
    k = frame(
        "kernels",
        {
            "rank": [0],
            "stream": [7],
            "name": ["kernel_without_a_type"],
            "kind": ["kernel"],
            "kernel_type": ["computation"],
            "ts_us": [0.0],
            "dur_us": [10.0],
            "end_us": [10.0],
        },
    )
    with pytest.raises(NotJudged):
        fires(RULE, TraceFacts(None, kernels=k))


@pytest.mark.usefixtures("one_torch_thread")
def test_a_profiled_float64_workload_is_found_and_its_float32_twin_is_not():
    torch = pytest.importorskip("torch")
    import workbench as wb
    from workbench.hypotheses import diagnose

    found = {}
    for dtype in (torch.float64, torch.float32):
        x = torch.randn(192, 192, dtype=dtype)
        run = wb.profile(lambda x=x: (x @ x).relu().sum(), warmup=1, repeat=3, history=False)
        found[dtype] = {h.rule: h for h in diagnose(run.trace).hypotheses}
    h = found[torch.float64][RULE]
    assert _share(h) > 50 and h.suggested_variants == ()
    assert RULE not in found[torch.float32]
