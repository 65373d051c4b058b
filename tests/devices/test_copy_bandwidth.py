"""The one copy-bandwidth measurement both roofs use: what it counts, and bad arguments."""

import pytest

from workbench.devices import copy_bandwidth
from workbench.devices.copy_bandwidth import copy_seconds_samples, gbps
from workbench.errors import InvalidArgumentError


def test_samples_are_seconds_per_copy_and_small_copies_are_repeated(monkeypatch):
    import torch

    calls = {"copies": 0}
    real_copy = torch.Tensor.copy_

    def counting_copy(self, src, *a, **k):
        calls["copies"] += 1
        return real_copy(self, src, *a, **k)

    monkeypatch.setattr(torch.Tensor, "copy_", counting_copy)
    samples = copy_seconds_samples(64 * 1024, repeats=3)
    assert len(samples) == 3 and all(0 < s < 0.05 for s in samples)
    # one warm copy, then each sample repeats the copy up to MAX_REPS times (64 KiB moved is tiny)
    assert calls["copies"] == 1 + 3 * copy_bandwidth.MAX_REPS


def test_gbps_counts_moved_bytes_and_the_minimum_tensor():
    assert gbps(2_000_000_000, 1.0) == pytest.approx(2.0)
    assert gbps(8, 1e-9) == pytest.approx(8192 / 1e-9 / 1e9)  # a 1024-float copy at least


@pytest.mark.parametrize("kwargs", [{"moved_bytes": 0}, {"moved_bytes": 4096, "repeats": 0}])
def test_bad_arguments_are_clear_errors(kwargs):
    with pytest.raises(InvalidArgumentError, match="copy-bandwidth measurement needs"):
        copy_seconds_samples(**kwargs)
