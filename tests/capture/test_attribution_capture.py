"""The traced pass records what attribution needs (Python frames, nn.Module scopes), and a real
small transformer-ish block profiled with wb.profile attributes its hand-written layernorm+gelu
chain to the chain's own module and to the chain's source line."""

from __future__ import annotations

import inspect
import math
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

import workbench as wb  # noqa: E402
from workbench import render  # noqa: E402
from workbench.analysis.attribution import module_breakdown, source_breakdown  # noqa: E402
from workbench.capture.profiler_session import ProfilerSession  # noqa: E402
from workbench.capture.trace_link import load_trace  # noqa: E402

# ops only the chain runs (the rest of the block uses addmm, bmm, softmax, mul, add, transpose)
CHAIN_ONLY_OPS = ("aten::mean", "aten::sub", "aten::pow", "aten::sqrt", "aten::div", "aten::tanh")
WIDTH, TOKENS, BATCH = 64, 32, 4


class LayerNormGelu(torch.nn.Module):
    """A hand-written layernorm followed by the tanh GELU: a chain of small elementwise ops."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(width))
        self.bias = torch.nn.Parameter(torch.zeros(width))

    def forward(self, x):
        mean = x.mean(-1, keepdim=True)
        var = ((x - mean) ** 2).mean(-1, keepdim=True)
        y = (x - mean) / torch.sqrt(var + 1e-5) * self.weight + self.bias
        return 0.5 * y * (1.0 + torch.tanh(0.7978845608 * (y + 0.044715 * y**3)))


class Attention(torch.nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.qkv = torch.nn.Linear(width, 3 * width)
        self.out = torch.nn.Linear(width, width)
        self.scale = 1.0 / math.sqrt(width)

    def forward(self, x):
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        weights = torch.softmax(torch.bmm(q, k.transpose(1, 2)) * self.scale, dim=-1)
        return self.out(torch.bmm(weights, v))


class Block(torch.nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.attention = Attention(width)
        self.up = torch.nn.Linear(width, 4 * width)
        self.chain = LayerNormGelu(4 * width)
        self.down = torch.nn.Linear(4 * width, width)

    def forward(self, x):
        x = x + self.attention(x)
        return x + self.down(self.chain(self.up(x)))


@pytest.fixture(scope="module")
def run():
    torch.manual_seed(0)
    model = Block(WIDTH).eval()
    x = torch.randn(BATCH, TOKENS, WIDTH)
    return wb.profile(
        model, x, warmup=1, repeat=5, trace_repeat=3, threads=1, grad_enabled=False, history=False, name="block"
    )


def _chain_path(modules) -> str:
    paths = [p for p in modules.table["path"] if p.endswith("/LayerNormGelu_0")]
    assert len(paths) == 1, list(modules.table["path"])
    return paths[0]


def test_traced_pass_records_python_frames_and_module_scopes(run):
    names = run.trace.python_calls["name"].astype(str)
    assert names.str.startswith("nn.Module: LayerNormGelu").any()
    assert names.str.contains("test_attribution_capture.py").any()
    assert run.timing.metadata["under_profiler"] is False  # the clean timing ran without it


def test_module_breakdown_names_the_chain_module_with_most_of_the_chain_ops_time(run):
    modules = run.trace.module_breakdown(calls=run.traced_calls, scale=run.trace_scale, top=50)
    assert modules.recorded and modules.basis == "cpu_op"
    chain = _chain_path(modules)
    ops = run.trace.op_breakdown().table
    chain_ops_us = float(ops.loc[ops["name"].isin(CHAIN_ONLY_OPS), "self_us"].sum())
    assert chain_ops_us > 0
    items = modules.top_items(chain)
    in_chain_us = float(items.loc[items["name"].isin(CHAIN_ONLY_OPS), "us"].sum())
    assert in_chain_us >= 0.95 * chain_ops_us, (in_chain_us, chain_ops_us)
    assert in_chain_us <= chain_ops_us * (1 + 1e-9)
    # the chain calls no module: all its time is its own, and holds every chain-only op counted above
    row = modules.table.set_index("path").loc[chain]
    assert row["self_us"] == pytest.approx(row["inclusive_us"]) and row["self_us"] >= in_chain_us - 1e-6


def test_modules_nest_and_shares_add_up(run):
    modules = run.attribution.modules
    table = modules.table.set_index("path")
    chain = _chain_path(modules)
    block = chain.rsplit("/", 1)[0]
    assert table.loc[chain, "parent"] == block and table.loc[chain, "depth"] == table.loc[block, "depth"] + 1
    assert f"{block}/Attention_0/Linear_0" in table.index  # Attention's qkv, two levels down
    assert table.loc[block, "count"] == run.traced_calls
    assert (table["inclusive_us"] >= table["self_us"] - 1e-9).all()
    children_us = table.loc[chain, "inclusive_us"] + table.loc[f"{block}/Attention_0", "inclusive_us"]
    assert table.loc[block, "inclusive_us"] >= children_us
    assert table.loc[table["depth"] == 0, "inclusive_pct"].sum() <= 100 + 1e-9
    assert table["self_pct"].sum() <= 100 + 1e-9
    # per call: the trace's totals over the traced calls, scaled to the clean time
    expected = table.loc[chain, "inclusive_us"] / run.traced_calls * run.trace_scale / 1e3
    assert table.loc[chain, "inclusive_ms_per_call"] == pytest.approx(expected)


def test_source_breakdown_names_the_chain_statements_file_and_lines(run):
    sources = run.attribution.sources
    assert sources.recorded
    body, first_line = inspect.getsourcelines(LayerNormGelu.forward)
    statements = set(range(first_line + 1, first_line + len(body)))
    chain = sources.table[(sources.table["def_line"] == first_line) & (sources.table["function"] == "forward")]
    assert len(chain) >= 3 and set(chain["line"]) <= statements  # the statements, not the def line
    for _, row in chain.iterrows():
        assert Path(row["file"]).name == Path(__file__).name
        assert row["location"].endswith(f"test_attribution_capture.py:{row['line']} in forward")
    detailed = source_breakdown(
        run.trace, calls=run.traced_calls, scale=run.trace_scale, top=50, statements=run.record.statements
    )
    ops = run.trace.op_breakdown().table
    chain_ops_us = float(ops.loc[ops["name"].isin(CHAIN_ONLY_OPS), "self_us"].sum())
    in_statements = 0.0
    for location in chain["location"]:
        items = detailed.top_items(location)
        in_statements += float(items.loc[items["name"].isin(CHAIN_ONLY_OPS), "us"].sum())
    assert in_statements >= 0.95 * chain_ops_us
    assert not sources.table["file"].str.contains("workbench/capture").any()
    assert not sources.table["file"].str.startswith("torch/").any()


def test_run_card_and_text_show_the_attribution(run):
    html = render.html(run)
    # modules read as the model names them (Block.chain: "chain"), their profiler path in the title
    assert "\u00a0\u00a0chain" in html and "Block_0/LayerNormGelu_0" in html and "test_attribution_capture.py:" in html
    assert "\u00a0\u00a0chain " in render.text(run) and "\u00a0\u00a0chain" in render.markdown(run)
    assert run.attribution.modules.table.set_index("path").loc["Block_0/LayerNormGelu_0", "name"] == "chain"


def test_session_without_stack_records_no_python_events(tmp_path):
    x = torch.randn(16, 16)
    with ProfilerSession(torch, False, tmp_path, record_stack=False) as session:
        with session.step(0):
            torch.nn.functional.linear(x, x)
    assert not session.records_stack and "record_stack=False" in session.stack_note
    trace, note = load_trace(session.trace_path)
    assert note == "" and trace is not None and len(trace.python_calls) == 0
    assert not module_breakdown(trace).recorded

    (tmp_path / "stack").mkdir()
    with ProfilerSession(torch, False, tmp_path / "stack") as session:  # the default records the stack
        with session.step(0):
            torch.nn.Linear(16, 16)(x)
    assert session.records_stack and session.stack_note == ""
    trace, _ = load_trace(session.trace_path)
    assert trace.python_calls["name"].astype(str).str.startswith("nn.Module: Linear").any()


class _RefusesStack:
    """A profiler that will not start with the Python tracer, as where another tracer is active."""

    def __enter__(self):
        raise RuntimeError("python tracer unavailable (test)")

    def __exit__(self, *exc):
        return None


def test_without_the_python_tracer_module_scopes_come_from_forward_hooks(tmp_path, monkeypatch):
    real = ProfilerSession._profiler
    monkeypatch.setattr(
        ProfilerSession, "_profiler", lambda self, with_stack: _RefusesStack() if with_stack else real(self, with_stack)
    )
    torch.manual_seed(0)
    model, x = Block(WIDTH).eval(), torch.randn(BATCH, TOKENS, WIDTH)
    with torch.no_grad(), ProfilerSession(torch, False, tmp_path) as session:
        for i in range(2):
            with session.step(i):
                model(x)
    assert not session.records_stack and "forward hooks" in session.stack_note
    assert not torch.nn.modules.module._global_forward_pre_hooks  # the hooks are gone again
    trace, note = load_trace(session.trace_path)
    assert note == "" and len(trace.python_calls) == 0
    modules = module_breakdown(trace, top=50)
    assert modules.recorded
    chain = _chain_path(modules)
    assert chain == "Block_0/LayerNormGelu_0" and "Block_0/Attention_0/Linear_0" in set(modules.table["path"])
    assert modules.table.set_index("path").loc["Block_0", "count"] == 2
    ops = trace.cpu_ops
    chain_ops_us = float(ops.loc[ops["name"].astype(str).isin(CHAIN_ONLY_OPS), "self_us"].sum())
    items = modules.top_items(chain)
    assert float(items.loc[items["name"].isin(CHAIN_ONLY_OPS), "us"].sum()) >= 0.95 * chain_ops_us
    sources = source_breakdown(trace)
    assert not sources.recorded and "no Python frames" in sources.not_recorded


def test_module_scopes_close_when_a_forward_raises():
    from workbench.capture.module_scopes import ModuleScopes

    class Fails(torch.nn.Module):
        def forward(self, x):
            raise ValueError("boom")

    class Outer(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = Fails()

        def forward(self, x):
            try:
                self.inner(x)
            except ValueError:
                pass
            return x + 1

    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        with ModuleScopes(torch) as scopes:
            Outer()(torch.ones(2))
            assert scopes._open() == []  # Outer's return closed the scope Fails left open
    names = [event.name for event in prof.events()]
    assert "nn.Module: Outer_0" in names and "nn.Module: Fails_0" in names
    assert not torch.nn.modules.module._global_forward_hooks


def test_attribution_survives_save_and_load(run, tmp_path):
    again = wb.load_run(run.save(tmp_path / "bundle"))
    assert again.attribution is not None and again.attribution.modules == run.attribution.modules
    assert again.attribution.sources == run.attribution.sources


def test_run_without_trace_has_no_attribution():
    quick = wb.profile(lambda: torch.ones(4) + 1, warmup=0, repeat=2, trace=False, history=False)
    assert quick.attribution is None
