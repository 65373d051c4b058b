import math

import pytest
import torch

from workbench.variants.output_check import CorrectnessResult, OutputCheck, check_outputs
from workbench.variants.tree import poison_tensors, to_reference_precision


def _ref(out):
    return to_reference_precision(out)


def test_nested_outputs_name_the_wrong_leaf():
    x = torch.randn(64)
    native = (x.clone(), {"a": x * 2, "b": torch.arange(4)})
    got = (x.clone(), {"a": x * 2.5, "b": torch.arange(4)})
    checks = check_outputs(got, _ref(native), native)
    by_path = {c.path: c for c in checks}
    assert set(by_path) == {"out[0]", "out[1]['a']", "out[1]['b']"}
    assert by_path["out[0]"].passed and by_path["out[1]['b']"].passed
    bad = by_path["out[1]['a']"]
    assert not bad.passed and bad.frac_outside_tol > 0.9
    assert bad.worst_got == pytest.approx(bad.worst_expected * 1.25, rel=1e-5)
    assert bad.tolerance.dtype == "float32"


def test_structure_shape_dtype_mismatch_fail_with_reason():
    x = torch.randn(8)
    assert "structure" in check_outputs((x, x), _ref(x), x)[0].reason
    assert "shape" in check_outputs(x[:4], _ref(x), x)[0].reason
    assert "dtype float16" in check_outputs(x.half(), _ref(x), x)[0].reason


def test_nan_and_inf_mismatches_are_counted():
    x = torch.randn(100)
    got = x.clone()
    got[5] = math.nan
    got[7] = math.inf
    c = check_outputs(got, _ref(x), x)[0]
    assert not c.passed and c.nonfinite_mismatch == 2
    same = x.clone()
    same[3] = math.nan
    assert check_outputs(same.clone(), _ref(same), same)[0].passed  # NaN where the reference has NaN


def test_output_below_tolerance_is_flagged_not_passed():
    tiny = torch.full((16,), 1e-7)
    c = check_outputs(tiny.clone(), _ref(tiny), tiny)[0]
    assert c.below_tolerance and not c.passed
    assert "cannot tell it from zero" in c.reason


def test_reordered_float32_sum_passes_and_roundtrips():
    x = torch.randn(1000, 64)
    native = x.sum(dim=1)
    got = x.flip(1).sum(dim=1)  # different summation order
    ref = x.double().sum(dim=1)
    c = check_outputs(got, ref, native)[0]
    assert c.passed and c.max_abs_err > 0
    res = CorrectnessResult(True, (c,), 1)
    assert CorrectnessResult.from_dict(res.to_dict()) == res
    assert OutputCheck.from_dict(c.to_dict()) == c


def test_integer_outputs_must_match_exactly():
    native = torch.arange(10)
    got = native.clone()
    got[9] = 0
    c = check_outputs(got, _ref(native), native)[0]
    assert not c.passed and c.worst_index == (9,)


def test_poison_fills_floats_with_nan_and_ints_with_sentinel():
    f, i = torch.zeros(4), torch.zeros(4, dtype=torch.int32)
    poison_tensors({"f": f, "i": (i,)})
    assert torch.isnan(f).all() and (i == -12345).all()


def test_ill_conditioned_elements_allow_the_baselines_own_error():
    x = torch.tensor([1e-8, 4e-8, 0.3, 2.0]) - torch.tensor([0.0, 0.0, 0.0, 0.0])
    native = torch.sqrt((x + 1.0) - 1.0)  # cancellation: float32 is far off near 0
    ref = torch.sqrt((x.double() + 1.0) - 1.0)
    assert check_outputs(native.clone(), ref, native)[0].passed  # the baseline's twin passes
    off = native.clone()
    off[3] += 1e-2  # a well-conditioned element really wrong
    assert not check_outputs(off, ref, native)[0].passed
