"""Stakes bounded by the critical path (``workbench.hypotheses.critical_cap``): on every shared trace no
capped hypothesis claims more than its work's time on the path, and each states both numbers; on a
hand-built trace a copy hidden behind a longer kernel is capped to the little of it on the path."""

from __future__ import annotations

import json
import warnings

import pytest

import workbench as wb
from tests.analysis.conftest import SHARED, load_set
from workbench.hypotheses.critical_cap import CAP_METRIC, CAPPED_KINDS, cap_by_critical_path
from workbench.hypotheses.hypothesis import Evidence, Hypothesis

SETS = sorted(p.name for p in SHARED.iterdir() if p.is_dir()) if SHARED.is_dir() else []


@pytest.mark.skipif(not SETS, reason=f"{SHARED} is absent")
@pytest.mark.parametrize("set_name", SETS)
def test_no_capped_stake_exceeds_its_work_on_the_critical_path(set_name):
    trace = load_set(set_name)
    if not len(trace.kernels):
        pytest.skip("no GPU activity: no stake is capped")
    for h in trace.hypotheses():
        capped = [e for e in h.evidence if e.metric == CAP_METRIC]
        if h.category in CAPPED_KINDS:
            assert capped, f"{h.rule}: a {h.category} finding without its critical-path bound"
        for e in capped:
            row = e.rows[0]
            assert h.time_at_stake_ms <= row["on_path_ms"] + 1e-9, f"{h.rule}: {h.time_at_stake_ms} ms > {row}"
            assert "on the critical path" in h.observed and "overlaps" in h.observed


def _copy_behind_compute(tmp_path):
    """A 200 µs kernel on stream 7 and a 150 µs copy on stream 8 under it; the host waits for both."""

    def x(cat, name, ts, dur, pid=1, tid=1, **args):
        return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur, "args": args}

    events = [
        x("user_annotation", "ProfilerStep#1", 0, 400),
        x("cpu_op", "A", 0, 20),
        x("cuda_runtime", "cudaLaunchKernel", 2, 3, correlation=1),
        x("cuda_runtime", "cudaMemcpyAsync", 8, 3, correlation=2),
        x("kernel", "gemm", 10, 200, pid=0, tid=7, stream=7, correlation=1, device=0),
        x(
            "gpu_memcpy",
            "Memcpy HtoD (Pinned -> Device)",
            20,
            150,
            pid=0,
            tid=8,
            stream=8,
            correlation=2,
            device=0,
            bytes=1 << 20,
        ),
        x("cpu_op", "S", 30, 200),
        x("cuda_runtime", "cudaDeviceSynchronize", 31, 198, correlation=3),
        x(
            "cuda_sync",
            "Context Sync",
            32,
            196,
            pid=0,
            tid=-1,
            stream=-1,
            correlation=3,
            device=0,
            cuda_sync_kind="Context Sync",
        ),
    ]
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": events}))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return wb.load_trace(str(path), cache=False)


def test_a_copy_hidden_behind_compute_is_capped_and_says_both_numbers(tmp_path):
    trace = _copy_behind_compute(tmp_path)
    h = Hypothesis(
        category="transfer",
        title="copies",
        observed="150 µs of copies",
        mechanism="m",
        evidence=(Evidence("copy_us", 150.0, "us"),),
        time_at_stake_ms=0.15,
        predicted_effect="p",
        falsifier="f",
        confidence="medium",
        rule="some_copy_rule",
    )
    (capped,) = cap_by_critical_path([h], trace)
    ev = [e for e in capped.evidence if e.metric == CAP_METRIC][0]
    assert ev.rows[0]["on_path_ms"] == pytest.approx(0.0)  # the gemm, not the copy, is on the path
    assert ev.rows[0]["overlapped_ms"] == pytest.approx(0.15)
    assert capped.time_at_stake_ms == pytest.approx(0.0)
    assert "up to 0 ms of" in capped.observed and "0.15 ms of this work overlaps" in capped.observed
    k = Hypothesis(
        category="compute_bound",
        title="gemm",
        observed="gemm",
        mechanism="m",
        evidence=(Evidence("gemm_us", 200.0, "us"),),
        time_at_stake_ms=0.5,
        predicted_effect="p",
        falsifier="f",
        confidence="medium",
        rule="some_kernel_rule",
    )
    (kc,) = cap_by_critical_path([k], trace)
    assert kc.time_at_stake_ms == pytest.approx(0.2)  # bounded by the gemm's 200 µs on the path


def test_uncapped_categories_pass_through(tmp_path):
    trace = _copy_behind_compute(tmp_path)
    h = Hypothesis(
        category="host_bound",
        title="t",
        observed="o",
        mechanism="m",
        evidence=(Evidence("x", 1.0, "us"),),
        time_at_stake_ms=5.0,
        predicted_effect="p",
        falsifier="f",
        confidence="low",
        rule="r",
    )
    assert cap_by_critical_path([h], trace) == [h]


def test_the_prediction_comes_from_a_what_if_on_the_path(tmp_path):
    trace = _copy_behind_compute(tmp_path)
    k = Hypothesis(
        category="compute_bound",
        title="gemm",
        observed="gemm",
        mechanism="m",
        evidence=(Evidence("gemm_us", 200.0, "us"),),
        time_at_stake_ms=0.5,
        predicted_effect="faster",
        falsifier="f",
        confidence="medium",
        rule="some_kernel_rule",
    )
    (kc,) = cap_by_critical_path([k], trace)
    assert "what-if on the critical path's graph" in kc.predicted_effect
    # half the gemm's 200 µs would be 100 µs, but the hidden copy (20 - 170 µs) then holds the path: 40 µs
    assert "shortens the path by 0.04 ms" in kc.predicted_effect and "then bound by memory" in kc.predicted_effect
