"""CUDA-graph skips and inductor fallback kernels recorded while profiling (real inductor on CPU).

The wrapper fixture ``data/inductor_wrapper_cdist_histc_mm.py.txt`` is the Python wrapper inductor
generated (torch 2.13, CPU) for ``(x @ w).relu().sum() + torch.cdist(x, w).sum() +
torch.histc(w, bins=4).sum()``, as logged on the ``output_code`` artifact.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
import torch

import workbench as wb
from workbench.capture.compile_diag import (
    SILENT_CUDAGRAPH_SKIP,
    CompileDiagnostics,
    CompileWatcher,
    fallback_ops_in_code,
)

WRAPPER = Path(__file__).parent / "data" / "inductor_wrapper_cdist_histc_mm.py.txt"
TOUCHED_ARTIFACTS = ("graph_breaks", "recompiles", "perf_hints", "output_code", "cudagraphs")


def _with_fallback(x, w):
    return (x @ w).relu().sum() + torch.histc(w, bins=4).sum()  # histc: inductor's make_fallback


def _plain(x, w):
    return (x @ w).sin().sum()  # mm: an intended extern kernel


def _inputs():
    torch.manual_seed(0)
    return torch.randn(8, 8), torch.randn(8, 8)


def _logging_state() -> dict:
    """Level, propagate, handlers and their filters of every logger the watcher may touch."""
    import torch._logging._internal as internal

    names = ["torch._dynamo", "torch._inductor"] + [
        q
        for q in internal.log_registry.get_artifact_log_qnames()
        if getattr(logging.getLogger(q), "artifact_name", None) in TOUCHED_ARTIFACTS
    ]
    state = {}
    for name in names:
        log = logging.getLogger(name)
        state[name] = (log.level, log.propagate, tuple((h, tuple(h.filters)) for h in log.handlers))
    return {"loggers": state, "artifacts": frozenset(internal.log_state.artifact_names)}


def _assert_logging_restored(before: dict) -> None:
    import torch._logging._internal as internal

    after = _logging_state()
    assert after["artifacts"] == before["artifacts"]
    for name, saved in before["loggers"].items():
        assert after["loggers"][name] == saved, name
    for name in set(after["loggers"]) - set(before["loggers"]):  # created during the compile
        log = logging.getLogger(name)
        off = internal.log_registry.is_off_by_default(log.artifact_name)
        assert (log.level, log.propagate) == (logging.NOTSET, not off), name


@pytest.mark.slow  # ~6 s with a warm inductor cache, ~30 s on a cold one
def test_reduce_overhead_on_cpu_records_skip_and_fallback_and_fires_rules(capfd, torch_log_output):
    """Caches off: inductor lowers the graph here (as on a user's first compile)."""
    import torch._functorch.config as functorch_config
    import torch._inductor.config as inductor_config

    torch._dynamo.reset()
    before = _logging_state()
    with inductor_config.patch(fx_graph_cache=False), functorch_config.patch(enable_autograd_cache=False):
        run = wb.profile(
            torch.compile(_with_fallback, mode="reduce-overhead"), *_inputs(), warmup=1, repeat=3, trace=False
        )
    diag = run.compile
    assert diag.graph_count >= 1
    assert diag.cudagraph_skip_reasons and diag.cudagraph_skip_reasons[0] == SILENT_CUDAGRAPH_SKIP
    assert diag.fallback_kernels == ("aten.histc.default",)
    fired = {h.rule: h for h in run.hypotheses}
    assert "cudagraph_skipped" in fired and "fallback_kernels" in fired
    assert "aten.histc.default" in fired["fallback_kernels"].observed
    page = run._repr_html_()
    assert "CUDA graphs skipped" in page and "Inductor fallback kernels" in page
    _assert_logging_restored(before)
    out, err = capfd.readouterr()
    printed = out + err + torch_log_output.getvalue()
    assert "FallbackKernel" not in printed and "Output code" not in printed
    assert "cudagraph" not in printed.lower()


def test_fx_graph_cache_hit_still_gives_fallbacks_and_skips():
    """On a cache hit inductor does not lower again (no perf hint): the wrapper code tells."""
    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    torch.compile(_with_fallback, mode="reduce-overhead")(*_inputs())  # fills the cache if empty
    torch._dynamo.reset()
    hits_before = counters["inductor"]["fxgraph_cache_hit"]
    with CompileWatcher() as watcher:
        torch.compile(_with_fallback, mode="reduce-overhead")(*_inputs())
    assert counters["inductor"]["fxgraph_cache_hit"] > hits_before
    assert watcher.result.fallback_kernels == ("aten.histc.default",)
    assert len(watcher.result.cudagraph_skip_reasons) == 1


def test_plain_compile_records_neither():
    torch._dynamo.reset()
    run = wb.profile(torch.compile(_plain), *_inputs(), warmup=1, repeat=3, trace=False)
    assert run.compile.graph_count >= 1
    assert run.compile.cudagraph_skip_reasons == () and run.compile.fallback_kernels == ()
    assert not {"cudagraph_skipped", "fallback_kernels"} & {h.rule for h in run.hypotheses}


def test_logged_skip_reason_is_kept_and_not_doubled():
    """The path a CUDA graph takes: inductor logs the reason and counts the skip."""
    from torch._inductor.cudagraph_utils import log_cudagraph_skip_and_bump_counter

    msg = "skipping cudagraphs due to mutated inputs (1 instances)"
    with CompileWatcher() as watcher:
        log_cudagraph_skip_and_bump_counter(msg)
    assert watcher.result.cudagraph_skip_reasons == (msg,)


def test_fallback_ops_read_from_recorded_wrapper():
    code = WRAPPER.read_text()
    assert "extern_kernels.mm(" in code  # the intended extern kernel is there, and not listed
    assert fallback_ops_in_code(code) == ["aten._cdist_forward.default", "aten.histc.default"]
    assert fallback_ops_in_code("aten = torch.ops.aten\nextern_kernels.addmm(a, b, c)\n") == []


def test_new_fields_round_trip_and_old_bundles_load():
    diag = CompileDiagnostics(
        True, 1, 1, cudagraph_skip_reasons=("skipping cudagraphs due to x",), fallback_kernels=("aten.histc.default",)
    )
    assert CompileDiagnostics.from_dict(diag.to_dict()) == diag
    old = {k: v for k, v in diag.to_dict().items() if k not in ("cudagraph_skip_reasons", "fallback_kernels")}
    loaded = CompileDiagnostics.from_dict(old)
    assert loaded.cudagraph_skip_reasons == () and loaded.fallback_kernels == ()


@pytest.mark.gpu
@pytest.mark.skipif(
    not torch.cuda.is_available(), reason="not applicable: no CUDA device (torch.cuda.is_available() is False)"
)
def test_cuda_graph_skip_reason_is_the_logged_one_on_gpu():
    """A graph mixing a CPU op into CUDA work: inductor logs why it skips the CUDA graph.
    (Graph partitioning, on by default, would split the CPU op off instead of skipping.)"""
    import torch._inductor.config as inductor_config

    def mixed(x, c):
        return x.sin() + c.cos().sum().to(x.device)

    torch._dynamo.reset()
    x, c = torch.randn(64, device="cuda"), torch.randn(8)
    with inductor_config.patch(graph_partition=False):
        run = wb.profile(torch.compile(mixed, mode="reduce-overhead"), x, c, warmup=1, repeat=3, trace=False)
    reasons = run.compile.cudagraph_skip_reasons
    assert reasons and SILENT_CUDAGRAPH_SKIP not in reasons
    assert all("cudagraph" in r.lower() for r in reasons), reasons
    assert "cudagraph_skipped" in {h.rule for h in run.hypotheses}
