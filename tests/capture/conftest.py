import pytest


@pytest.fixture(autouse=True)
def _one_thread():
    """Timing on a shared 2-core VM: one OpenMP thread avoids spin-wait contention."""
    import torch

    saved = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(saved)


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
