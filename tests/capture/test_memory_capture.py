"""``wb.profile(..., memory=True)`` on live CPU runs: planted causes named first, attributed to their module
and line; the category split held against ``torch.profiler._memory_profiler`` on the same profiler session.
Bytes are asserted, never times."""

from __future__ import annotations

import pytest
import torch

import workbench as wb
from workbench.analysis import memory as mem
from workbench.capture.memory_capture import TensorRoles

MIB = 1 << 20


def _profile(fn, *args):
    return wb.profile(fn, *args, warmup=1, repeat=3, trace_repeat=4, memory=True, history=False, threads=1)


class Big(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = torch.nn.Sequential(*[m for _ in range(6) for m in (torch.nn.Linear(512, 512), torch.nn.Tanh())])

    def forward(self, x):
        return self.layers(x)


def test_activations_of_one_module_dominate_the_peak():
    model = torch.nn.Sequential(torch.nn.Linear(64, 512), Big(), torch.nn.Linear(512, 1))

    def train(x):
        model.zero_grad(set_to_none=True)
        model(x).sum().backward()

    run = _profile(train, torch.randn(8192, 64))
    first = run.memory.hypotheses[0]
    assert first.rule == "activations_dominate_peak"
    assert "Big_0" in first.scope and "test_memory_capture.py" in first.title
    assert run.memory.recorded and run.memory.recording_overhead is not None
    roles = {r["role"] for r in run.memory["roles"]}
    assert {"parameter", "input"} <= roles


def test_a_tensor_kept_per_call_in_a_list_is_a_leak():
    kept: list[torch.Tensor] = []
    lin = torch.nn.Linear(256, 256)

    def leaky(x):
        with torch.no_grad():
            y = lin(x)
            kept.append(y * 1.0)
            return y.sum()

    run = _profile(leaky, torch.randn(512, 256))
    first = run.memory.hypotheses[0]
    assert first.rule == "memory_leak_across_steps"
    assert run.memory.growth.kept_per_step_bytes == 512 * 256 * 4
    assert "test_memory_capture.py" in first.title


def test_a_temporary_that_an_inplace_op_removes():
    def tmp(x):
        with torch.no_grad():
            y = x * 2
            y = y + 1
            return y.sum()

    run = _profile(tmp, torch.randn(1024, 1024))
    first = run.memory.hypotheses[0]
    assert first.rule == "temporary_at_peak" and "aten::add" in first.title
    assert {e.metric: e.value for e in first.evidence}["bytes_at_stake"] == 4 * MIB


def test_category_split_agrees_with_torch_memory_profiler(tmp_path):
    from torch.profiler import ProfilerActivity, profile, record_function
    from torch.profiler._memory_profiler import _CATEGORY_TO_INDEX, MemoryProfileTimeline

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(256, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 256))
    opt = torch.optim.Adam(model.parameters())
    x = torch.randn(512, 256)

    def step(x):
        opt.zero_grad()
        model(x).square().mean().backward()
        opt.step()

    for _ in range(2):
        step(x)
    with (
        TensorRoles(torch, (x,)) as roles,
        profile(
            activities=[ProfilerActivity.CPU],
            record_shapes=True,
            profile_memory=True,
            with_stack=True,
            with_modules=True,
        ) as prof,
    ):
        for i in range(2):
            with record_function(f"ProfilerStep#{i}"):
                step(x)
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    times, sizes = MemoryProfileTimeline(prof._memory_profile())._coalesce_timeline("cpu")
    totals = [sum(s) for s in sizes]
    at = max(range(len(totals)), key=totals.__getitem__)
    names = ["unknown"] + [c.name.lower() if c is not None else "unknown" for c in _CATEGORY_TO_INDEX]
    theirs: dict[str, int] = {}
    for name, value in zip(names, sizes[at]):
        theirs[name] = theirs.get(name, 0) + value
    peak = wb.load_trace(str(path), cache=False).memory_peak(roles=roles.records())
    ours = peak.category_bytes()
    assert peak.live_bytes == pytest.approx(totals[at], rel=0.05)
    for category in mem.CATEGORIES:
        assert abs(ours.get(category, 0) - theirs.get(category, 0)) <= 0.05 * totals[at], (category, ours, theirs)


def test_memory_run_saves_and_loads(tmp_path):
    run = _profile(lambda x: (x * 2).sum(), torch.randn(256, 256))
    run.save(tmp_path / "bundle")
    again = wb.load_run(tmp_path / "bundle")
    assert again.memory.recorded and again.memory.peak.peak_bytes == run.memory.peak.peak_bytes
    assert again.memory["roles"] == run.memory["roles"]


def test_memory_needs_a_trace():
    with pytest.raises(wb.errors.InvalidArgumentError, match="trace=True"):
        wb.profile(lambda: None, trace=False, memory=True, history=False)


def test_the_card_says_what_memory_recording_cost():
    run = _profile(lambda x: (x * 2).sum(), torch.randn(256, 256))
    text = run.to_text()
    assert "Memory:" in text and "memory recording cost" in text and "the clean timing ran without it" in text
    html = run._repr_html_()
    assert "<h4>Memory</h4>" in html and "vegaEmbed" in html
    assert "#### Memory" in run.to_markdown()
