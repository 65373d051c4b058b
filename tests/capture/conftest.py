import io
import logging

import pytest


@pytest.fixture(autouse=True)
def _one_thread(one_torch_thread):
    """Every capture test times on one thread (tests/conftest.py)."""
    yield


@pytest.fixture(scope="module")
def matmul_run():
    """One real traced profile of a small matmul chain, shared by the read-only tests."""
    import torch

    import workbench as wb

    torch.manual_seed(0)
    x = torch.randn(64, 64)

    def chain(a):
        return (a @ a).relu().sum()

    return wb.profile(chain, x, warmup=2, repeat=6, name="chain")


@pytest.fixture
def torch_log_output():
    """What torch's own log handlers print during the test (they hold the stream they were
    created with, which pytest's capfd does not see)."""
    buffer = io.StringIO()
    handlers = {
        id(h): h
        for name in ("torch", "torch._dynamo", "torch._inductor")
        for h in logging.getLogger(name).handlers
        if isinstance(h, logging.StreamHandler)
    }
    swapped = [(h, h.setStream(buffer)) for h in handlers.values()]
    yield buffer
    for handler, stream in swapped:
        handler.setStream(stream)
