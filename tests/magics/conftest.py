import pytest


@pytest.fixture(scope="module")
def ip():
    """A real IPython shell with the extension loaded (``%load_ext workbench``)."""
    import torch
    from IPython.testing.globalipapp import start_ipython

    saved = torch.get_num_threads()
    torch.set_num_threads(1)
    shell = start_ipython()  # None when an earlier module already started it
    if shell is None:
        from IPython.core.interactiveshell import InteractiveShell

        shell = InteractiveShell.instance()
    result = shell.run_cell("%load_ext workbench")
    assert result.success, result.error_in_exec
    yield shell
    torch.set_num_threads(saved)


@pytest.fixture
def run_cell(ip):
    def _run(source: str):
        return ip.run_cell(source, store_history=True)

    return _run
