"""Variants that fail in every way: each reported in its own row; the others still run;
nothing global is left changed."""

import threading
import time

import pytest
import torch

import workbench as wb
from tests.variants.variant_workloads import FAST, chain
from workbench.errors import InvalidArgumentError


def _raises(x):
    raise RuntimeError("kernel exploded")


def _hangs(x):
    while True:  # interruptible: sleeps in short slices
        time.sleep(0.01)


def _wrong_shape(x):
    return chain(x)[:-1]


def _wrong_dtype(x):
    return chain(x).double()


def _nan(x):
    y = chain(x)
    y[y.numel() // 2] = float("nan")
    return y


def _flips_state(x):
    torch.set_default_dtype(torch.float64)
    torch.backends.cuda.matmul.allow_tf32 = True
    return chain(x)


@pytest.fixture(scope="module")
def cmp():
    threads_before = threading.active_count()
    settings_before = (torch.get_default_dtype(), torch.backends.cuda.matmul.allow_tf32, torch.is_grad_enabled())
    result = wb.compare(
        {
            "eager": chain,
            "raises": _raises,
            "hangs": _hangs,
            "shape": _wrong_shape,
            "dtype": _wrong_dtype,
            "nan": _nan,
            "state": _flips_state,
            "same": lambda x: chain(x),
        },
        inputs=lambda: torch.randn(2048),
        time_limit_s=1.0,
        **FAST,
    )
    after = (torch.get_default_dtype(), torch.backends.cuda.matmul.allow_tf32, torch.is_grad_enabled())
    return result, threads_before, settings_before, after


def _row(cmp, name):
    t = cmp.table
    return t[t.variant == name].iloc[0]


def test_each_failure_is_reported_with_its_reason(cmp):
    c = cmp[0]
    assert _row(c, "raises").status == "error" and "kernel exploded" in _row(c, "raises").reason
    assert _row(c, "hangs").status == "timeout" and "1 s" in _row(c, "hangs").reason
    assert _row(c, "shape").status == "incorrect" and "shape (2047,)" in _row(c, "shape").reason
    assert _row(c, "dtype").status == "incorrect" and "dtype float64" in _row(c, "dtype").reason
    assert _row(c, "nan").status == "incorrect" and "NaN/Inf" in _row(c, "nan").reason
    for name in ("raises", "hangs", "shape", "dtype", "nan"):
        assert _row(c, name).decision == "reject"


def test_the_others_still_run_and_are_timed(cmp):
    c = cmp[0]
    same = _row(c, "same")
    assert same.status == "ok" and same.correct and same.n_samples >= FAST["min_rounds"]
    assert same.decision in ("need_more_evidence", "keep", "reject")
    assert set(c.samples_ms) == {"eager", "same", "state"}


def test_nothing_global_is_left_changed(cmp):
    c, threads_before, before, after = cmp
    assert after == before
    assert threading.active_count() == threads_before  # the hung call was interrupted
    flags = _row(c, "state")["flags"]
    assert "changed global state (restored): torch.get_default_dtype torch.float32 -> torch.float64" in flags
    assert "precision lowered: the call switched matmul precision" in flags  # TF32 switched on
    assert _row(c, "state").decision == "reject"


def test_comparison_roundtrips_and_renders(cmp):
    c = cmp[0]
    again = type(c).from_dict(c.to_dict())
    assert again.to_dict() == c.to_dict()
    assert "<table" in wb.render.html(c)
    assert c.decision.variant in {r.name for r in c.results}


def test_a_failing_baseline_is_an_error_that_says_what_to_do():
    with pytest.raises(InvalidArgumentError, match="choose another baseline"):
        wb.compare({"eager": _raises, "other": chain}, inputs=lambda: torch.randn(8), **FAST)


def test_unknown_registry_name_and_bad_arguments():
    from workbench.errors import RegistryError

    with pytest.raises(RegistryError, match="unknown variant 'fused_magic'.*compiled"):
        wb.compare({"eager": chain, "x": "fused_magic"}, inputs=lambda: torch.randn(8), **FAST)
    with pytest.raises(InvalidArgumentError, match="non-empty dict"):
        wb.compare({}, inputs=None)
    with pytest.raises(InvalidArgumentError, match="expected a callable"):
        wb.compare({"eager": chain, "x": 3}, inputs=lambda: torch.randn(8), **FAST)


def test_cuda_only_variant_is_not_applicable_with_reason_on_cpu():
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU: the CUDA graph runs instead")
    c = wb.compare({"eager": chain, "graph": wb.variants.cuda_graph(chain)}, inputs=lambda: torch.randn(64), **FAST)
    row = _row(c, "graph")
    assert row.status == "not_applicable" and "torch.cuda.is_available() is False" in row.reason
    assert row.decision == "need_more_evidence" and row.n_samples == 0


def test_fixed_inputs_are_noted():
    c = wb.compare({"eager": chain, "same": lambda x: chain(x)}, inputs=(torch.randn(256),), **FAST)
    assert any("fixed inputs" in n for n in c.settings["notes"])
