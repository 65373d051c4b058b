"""The settings and data-movement fixes (issue 24): each run through ``wb.compare`` on a small CPU workload
where it can run here, the CUDA-only ones "not applicable: no CUDA device" where their pattern is present,
global settings as they were after every call, and nothing applying to the planted clean workloads."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

import workbench as wb
import workbench.fixes as fixes
from workbench.fixes import _patterns
from workbench.fixes.context import FixContext
from workbench.variants.isolation import _torch_settings

FAST = {"budget_s": 0.2, "min_rounds": 5, "checks": 2}
PROFILE = {"warmup": 1, "repeat": 5, "history": False}
SETTINGS_FIXES = ("tf32", "autocast_bf16", "cudnn_benchmark", "inference_mode", "intra_op_threads")


def _settings() -> dict:
    return {k: get() for k, (get, _) in _torch_settings().items()}


def _listed(fn, **profile) -> fixes.FixList:
    run = wb.profile(fn, **{**PROFILE, **profile})
    return fixes.applicable(FixContext.from_run(run, fn), include_absent=True)


def _row(listing, name):
    return listing.row(name)


# -- workloads ------------------------------------------------------------------------------------------------
def _mlp(seed: int = 0):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(256, 256), torch.nn.ReLU(), torch.nn.Linear(256, 64))


def _convnet():
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Conv2d(8, 16, 3, padding=1), torch.nn.ReLU(), torch.nn.Conv2d(16, 16, 3, padding=1)
    )


def _rows(n=128, d=256):
    return lambda: (torch.randn(n, d),)


# -- each fix through wb.compare ---------------------------------------------------------------------------------
def test_inference_mode_is_recognised_on_a_forward_and_kept_correct():
    model = _mlp()
    x = torch.randn(128, 256)

    def forward():
        return model(x)

    row = _row(_listed(forward), "inference_mode")
    assert row.applies and "no optimizer and no backward" in row.reason
    before = _settings()
    cmp = wb.compare({"eager": forward, "inference_mode": "inference_mode"}, mode="inference", **FAST)
    res = cmp["inference_mode"]
    assert res.status == "ok" and res.correctness.passed and res.numerical_class == "exact"
    assert not [f for f in res.flags if "global state" in f]
    assert _settings() == before and torch.is_grad_enabled()


def test_inference_mode_is_absent_where_gradients_are_used_or_grad_is_already_off():
    model = _mlp()
    x = torch.randn(64, 256)

    def no_grad_forward():
        with torch.no_grad():
            return model(x)

    def loss_and_grads():
        model.zero_grad()
        model(x).sum().backward()
        return model[0].weight.grad

    assert _row(_listed(no_grad_forward), "inference_mode").status == "absent"
    row = _row(_listed(loss_and_grads), "inference_mode")
    assert row.status == "absent" and "backward" in row.reason


def test_autocast_bf16_on_a_training_step_is_judged_with_bfloat16_tolerances():
    """The engine sees the bf16 matmuls (its precision census) and judges outputs and gradients with
    bfloat16 tolerances, not float32's: a step whose gradients a float32 check would reject (their error is
    far above float32's 2e-4) passes, classed reduced precision and never kept silently."""
    torch.manual_seed(0)
    layer = torch.nn.Linear(256, 128)
    opt = torch.optim.SGD(layer.parameters(), lr=0.01)

    def step(x):
        opt.zero_grad()
        loss = layer(x).sum()
        loss.backward()
        opt.step()
        return loss.detach()

    cmp = wb.compare({"eager": step, "autocast_bf16": "autocast_bf16"}, inputs=lambda: (torch.randn(128, 256),), **FAST)
    res = cmp["autocast_bf16"]
    assert res.numerical_class == "reduced precision" and "in bfloat16" in res.precision
    assert any("judged with bfloat16 tolerances" in f for f in res.flags)
    assert res.status == "ok" and res.correctness.passed, res.reason
    assert res.max_grad_rel_err is not None and res.max_grad_rel_err > 2e-4  # a float32 check would reject it
    assert res.compared.get("parameter_gradients", 0) > 0
    if res.decision in ("keep", "keep_guarded", "micro_only"):
        assert "reduced precision" in res.decision_reason


def test_autocast_bf16_recognition_needs_large_fp32_matmuls():
    a, b = torch.randn(384, 384), torch.randn(384, 384)
    listed = _listed(lambda: a @ b)
    row = _row(listed, "autocast_bf16")
    if _autocast_cpu_reason() is None:
        assert row.applies and "fp32 matrix work takes" in row.reason
    else:
        assert row.status == "not_applicable"
    fp16 = _row(listed, "autocast_fp16")
    assert fp16.status == "not_applicable" and fp16.reason.startswith("not applicable: no CUDA device")
    small = torch.nn.Linear(512, 512)
    x = torch.randn(16, 512)
    row = _row(_listed(lambda: small(x).detach()), "autocast_bf16")
    assert row.status == "absent" and "matmuls are small" in row.reason


def _autocast_cpu_reason():
    from workbench.fixes._autocast import _cpu_bf16

    return _cpu_bf16()


def test_set_to_none_rewrites_zero_grad_and_manual_zeroing_through_called_functions():
    model = _mlp(1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)

    def clear(params):
        for p in params:
            if p.grad is not None:
                p.grad.zero_()

    def step(x):
        opt.zero_grad(set_to_none=False)
        clear(model.parameters())
        loss = model(x).pow(2).mean()
        loss.backward()
        opt.step()
        return loss.detach()

    ctx = FixContext.from_callable(step)
    row = fixes.get("set_to_none").applicability(ctx)
    assert row.applies
    assert {s.detail for s in row.sites} >= {"opt.zero_grad(set_to_none=False)", "p.grad.zero_()"}
    assert all(s.kind == "line" and "test_settings_fixes.py:" in s.where for s in row.sites)
    variant = fixes.get("set_to_none").variant(step)
    assert variant.fn is not step and len(variant.options["rewritten"]) == 2
    cmp = wb.compare({"eager": step, "set_to_none": variant}, inputs=_rows(), **FAST)
    res = cmp["set_to_none"]
    assert res.status == "ok" and res.correctness.passed and res.numerical_class == "exact"
    assert res.compared.get("parameter_gradients", 0) > 0
    # the rewritten copy sets the gradients to None: the user's function still zeroes them
    opt.zero_grad(set_to_none=True)
    model(torch.randn(4, 256)).sum().backward()
    variant.fn(torch.randn(4, 256))
    assert all(p.grad is not None for p in model.parameters())


def test_set_to_none_keeps_closures_and_says_when_source_is_not_available():
    model = _mlp(2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    scale = 0.5

    def step(x):
        opt.zero_grad(False)
        (model(x).sum() * scale).backward()
        opt.step()

    new = fixes.get("set_to_none").variant(step).fn
    assert new.__code__.co_freevars == step.__code__.co_freevars and new.__closure__ == step.__closure__
    new(torch.randn(2, 256))
    opt.zero_grad(set_to_none=True)
    namespace = {"opt": opt, "model": model}
    exec("def hidden(x):\n    opt.zero_grad(set_to_none=False)\n    model(x).sum().backward()\n", namespace)
    ctx = FixContext.from_callable(namespace["hidden"])
    row = fixes.get("set_to_none").applicability(ctx)
    assert row.status == "not_applicable" and row.reason == (
        "not applicable: source not available: the callable's source cannot be read"
    )

    def clean_step(x):
        opt.zero_grad()
        model(x).sum().backward()
        opt.step()

    assert fixes.get("set_to_none").applicability(FixContext.from_callable(clean_step)).status == "absent"


def test_channels_last_on_a_small_conv_model(one_torch_thread):
    model = _convnet()
    x = torch.randn(2, 8, 16, 16)

    def forward():
        return model(x)

    row = _row(_listed(forward), "channels_last")
    assert row.applies and {s.where for s in row.sites} == {"0", "2"}
    variant = fixes.get("channels_last").variant(forward)
    assert variant.options["changed"] and variant.options["converted_tensors"] == ["x"]
    assert model[0].weight.is_contiguous()  # the user's model is untouched: a copy was converted
    cmp = wb.compare({"eager": forward, "channels_last": variant}, mode="inference", **FAST)
    res = cmp["channels_last"]
    assert res.status == "ok" and res.correctness.passed and res.numerical_class in ("exact", "reordered")
    # a conv model given its input as an argument: the argument is converted on each call
    got = fixes.get("channels_last").variant(model).fn(x)
    assert torch.allclose(got, model(x), atol=1e-5)
    mlp, rows = _mlp(), torch.randn(4, 256)
    assert _row(_listed(lambda: mlp(rows)), "channels_last").status == "absent"  # no Conv2d: absent


def test_intra_op_threads_sets_the_count_during_the_call_only(one_torch_thread):
    cores = _patterns.physical_cores() or len(_patterns.usable_cpus())
    x = torch.randn(512, 1024)
    listed = _listed(lambda: (x * 2.0 + 1.0).sum(dim=1), threads=1)
    row = _row(listed, "intra_op_threads")
    if cores < 2:
        assert row.status == "absent"
        return
    assert row.applies and f"1 thread of {len(_patterns.usable_cpus())}" in row.reason
    seen = []

    def step():
        seen.append(torch.get_num_threads())
        return (x * 2.0 + 1.0).sum(dim=1)

    variant = fixes.get("intra_op_threads").variant(step, context=listed.context)
    cmp = wb.compare({"eager": step, "intra_op_threads": variant}, **FAST)
    res = cmp["intra_op_threads"]
    assert res.status == "ok" and res.correctness.passed
    assert not [f for f in res.flags if "global state" in f]
    assert cores in seen and 1 in seen and torch.get_num_threads() == 1


def test_intra_op_threads_finds_oversubscription_and_only_on_cpu():
    usable = len(_patterns.usable_cpus())
    machine = SimpleNamespace(usable_cores=usable, torch_threads=usable * 4)
    run = SimpleNamespace(settings={"num_threads": usable * 4}, health=SimpleNamespace(machine=machine))
    row = fixes.get("intra_op_threads").applicability(FixContext(fn=None, run=run, device="cpu"))
    assert row.applies and row.reason.startswith(f"oversubscribed: the run used {usable * 4} threads")
    row = fixes.get("intra_op_threads").applicability(FixContext(fn=None, run=run, device="cuda:0"))
    assert row.status == "absent"


@pytest.mark.skipif(torch.cuda.is_available(), reason="the CPU-only rows")
def test_cuda_only_fixes_say_no_cuda_device_where_their_pattern_is_present():
    conv = _convnet()
    x = torch.randn(2, 8, 16, 16)
    a = torch.randn(256, 256)
    convs = _listed(lambda: conv(x).detach())
    mms = _listed(lambda: a @ a)
    for listing, name in ((convs, "cudnn_benchmark"), (mms, "tf32"), (mms, "autocast_fp16")):
        row = _row(listing, name)
        assert row.status == "not_applicable" and row.reason.startswith("not applicable: no CUDA device"), row
    assert _row(mms, "cudnn_benchmark").status == "absent"  # no convolution: absent, not "not applicable"
    assert _row(_listed(lambda: a.sum()), "tf32").status == "absent"
    device = "cuda" if torch.cuda.is_available() else "cpu"
    host = torch.randn(64, 64)

    def copies():
        return host.to(device) * 2

    row = fixes.get("pin_memory").applicability(FixContext.from_callable(copies))
    assert row.status == "not_applicable" and row.reason.startswith("not applicable: no CUDA device")
    assert "test_settings_fixes.py:" in row.reason
    assert fixes.get("pin_memory").applicability(FixContext.from_callable(lambda: host * 2)).status == "absent"
    for name in ("tf32", "cudnn_benchmark", "autocast_fp16", "pin_memory"):
        variant = fixes.get(name).variant(copies)
        assert variant.applicability() is not None  # wb.compare reports it not applicable, with the reason


def test_settings_are_set_only_during_the_call_and_restored_after_an_error():
    before = _settings()
    inside = {}

    def boom():
        inside.update(_settings())
        inside["autocast"] = torch.is_autocast_enabled("cpu")
        inside["inference"] = torch.is_inference_mode_enabled()
        raise RuntimeError("boom")

    expected = {
        "tf32": ("cuda.matmul.allow_tf32", True),
        "cudnn_benchmark": ("cudnn.benchmark", True),
        "intra_op_threads": ("torch.get_num_threads", fixes.get("intra_op_threads").variant(boom).options["threads"]),
    }
    for name in (*SETTINGS_FIXES, *(("autocast_fp16",) if torch.cuda.is_available() else ())):
        variant = fixes.get(name).variant(boom)
        inside.clear()
        with pytest.raises(RuntimeError, match="boom"):
            variant.fn()
        assert _settings() == before, name
        assert not torch.is_autocast_enabled("cpu") and not torch.is_inference_mode_enabled()
        if name in expected:
            key, value = expected[name]
            assert inside[key] == value, name
    assert inside  # the last one ran
    bf16 = fixes.get("autocast_bf16").variant(boom)
    with pytest.raises(RuntimeError):
        bf16.fn()
    assert inside["autocast"] is True


def test_the_settings_fixes_leave_nothing_changed_through_compare():
    a = torch.randn(192, 192)
    before = _settings()
    names = ("tf32", "cudnn_benchmark", "intra_op_threads", "inference_mode", "autocast_bf16")
    cmp = wb.compare({"eager": lambda: a @ a, **{n: n for n in names}}, mode="inference", **FAST)
    for name in names:
        res = cmp[name]
        assert not [f for f in res.flags if "global state" in f or "precision lowered: the call switched" in f], name
    assert _settings() == before


def test_pinned_host_tensors_work_as_plain_tensors_and_give_plain_results():
    """pin_memory's subclass of the pinned copies (only its copies to a GPU change: non_blocking)."""
    from workbench.fixes.pin_memory import _non_blocking_host

    host = torch.arange(6.0).as_subclass(_non_blocking_host())
    doubled = host * 2
    assert type(doubled) is torch.Tensor and torch.equal(doubled, torch.arange(6.0) * 2)
    wide = host.to(torch.float64)
    assert type(wide) is torch.Tensor and wide.dtype == torch.float64
    dst = torch.empty(6)
    dst.copy_(host)
    assert torch.equal(dst, torch.arange(6.0)) and host.shape == (6,)


# -- GPU traces: kernel time, the kernels' precision, host-to-device copies -------------------------------------------
GPU_TRACES = Path(__file__).resolve().parents[1] / "data" / "gpu"


def _gpu_context(name: str) -> FixContext:
    trace = wb.load_trace(GPU_TRACES / name)
    return FixContext(fn=None, trace=trace, device="cuda:0", run=SimpleNamespace(settings={}, trace_repeat=1))


def test_gpu_traces_are_judged_by_kernel_time_and_precision():
    from workbench.fixes import pin_memory, tf32

    alexnet = _gpu_context("a100_alexnet.json.gz")  # fp32 (sgemm, scudnn) on an A100, pageable copies in
    work = _patterns.matrix_time(alexnet)
    assert work.device == "cuda" and work.share(dtype="float32") > 50
    found = tf32.recognise(alexnet)
    assert found.applies and "fp32 matmuls take" in found.reason
    found = pin_memory.recognise(alexnet)
    assert found.applies and "from pageable memory" in found.reason
    bert = _gpu_context("h100_bert_small.json.gz")  # bf16 already
    row = fixes.get("autocast_bf16").applicability(bert)
    assert row.status == "absent" and "already runs in lower precision" in row.reason
    assert fixes.get("tf32").applicability(bert).status == "absent"
    assert fixes.get("pin_memory").applicability(bert).status == "absent"
    resnet = _gpu_context("v100_resnet50_2021.json.gz")  # compute capability 7.0: no bf16 tensor cores
    row = fixes.get("autocast_bf16").applicability(resnet)
    assert row.status == "not_applicable" and "compute capability 7.0" in row.reason
    if not torch.cuda.is_available():
        for name in ("tf32", "pin_memory", "autocast_bf16"):
            assert fixes.get(name).applicability(alexnet).status == "not_applicable"  # the run's GPU is not here


# -- the planted clean workloads: nothing applies -----------------------------------------------------------------
def test_nothing_applies_to_the_planted_clean_workloads():
    from tests.workloads.planted import CLEAN

    threads = _patterns.physical_cores() or len(_patterns.usable_cpus())  # the machine's own count: not planted
    for builder in CLEAN:
        fn, options = builder()
        listing = _listed(fn, **{**options, "threads": threads})
        assert listing.names == [], (builder.__name__, listing.to_text())
        assert listing.row("channels_last").status == "absent"
        for row in listing:
            assert row.status != "not_applicable" or row.reason.startswith("not applicable"), row
