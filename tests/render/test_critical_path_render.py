"""The critical path, a what-if and collective waits through the one renderer (``workbench.render``): the
summary, the bound-by bar (HTML, offline), the shares, the notes and the longest edges, escaped."""

from __future__ import annotations

import json
import warnings

import pytest

import workbench as wb
from workbench import render


def _launch_and_wait(gemm_us: float = 100.0) -> list[dict]:
    """A step: op A launches ``gemm`` on stream 7 (30 µs in), op S waits for it in cudaDeviceSynchronize."""

    def x(cat, name, pid, tid, ts, dur, **args):
        return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur, "args": args}

    return [
        x("user_annotation", "ProfilerStep#1", 1, 1, 0, 200),
        x("cpu_op", "A", 1, 1, 0, 20),
        x("cuda_runtime", "cudaLaunchKernel", 1, 1, 5, 5, correlation=10),
        x("kernel", "gemm", 0, 7, 30, gemm_us, stream=7, device=0, correlation=10),
        x("cpu_op", "S", 1, 1, 22, 40 + gemm_us),
        x("cuda_runtime", "cudaDeviceSynchronize", 1, 1, 25, 30 + gemm_us, correlation=12),
        x(
            "cuda_sync",
            "Context Sync",
            0,
            -1,
            26,
            29 + gemm_us,
            cuda_sync_kind="Context Sync",
            stream=-1,
            correlation=12,
            device=0,
        ),
    ]


def _trace(tmp_path, events):
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": events, "deviceProperties": [{"id": 0, "name": "GPU"}]}))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return wb.load_trace(str(path), cache=False)


def test_a_critical_path_renders_its_bound_shares_and_longest_edges(tmp_path):
    t = _trace(tmp_path, _launch_and_wait())
    cp = t.critical_path(annotation="")
    text = render.text(cp)
    assert text.splitlines()[0] == cp.summary()
    assert f"bound by {cp.bound_by}" in text and "longest edges on the path" in text
    assert "gemm" in text  # the kernel on the path, by name
    page = render.html(cp)
    assert "wb-critical-path" in page and "critical_path_bound_by" in page  # the bar drawn (offline bundle)
    assert "gemm" in page and "<script>alert" not in page
    md = render.markdown(cp)
    assert md.startswith("**critical path of") and "| kind of work |" in md


def test_a_what_if_says_the_new_step_time_and_bound(tmp_path):
    w = _trace(tmp_path, _launch_and_wait()).what_if({"gemm": 0.5}, annotation="")
    text = render.text(w)
    assert text.startswith("what if: the step would take") and "saved on the path" in text
    assert "gemm" in text and "before: critical path" in text and "after: critical path" in text
    assert "wb-what-if" in render.html(w)


def test_names_from_the_trace_are_escaped(tmp_path):
    events = _launch_and_wait()
    for e in events:
        if e.get("name") == "gemm":
            e["name"] = "<script>alert(1)</script>"
    page = render.html(_trace(tmp_path, events).critical_path(annotation=""))
    assert "<script>alert(1)</script>" not in page and "&lt;script&gt;" in page


def test_the_notebook_shows_the_rendering_not_the_bare_table(tmp_path):
    pytest.importorskip("IPython")
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.testing.globalipapp import start_ipython

    shell = start_ipython() or InteractiveShell.instance()
    shell.run_cell("%load_ext workbench")
    cp = _trace(tmp_path, _launch_and_wait()).critical_path(annotation="")
    formatters = shell.display_formatter.formatters  # (the test shell's HTML output is off: asked directly)
    assert "wb-critical-path" in formatters["text/html"].lookup(cp)(cp)
    assert formatters["text/plain"](cp).splitlines()[0] == cp.summary()
