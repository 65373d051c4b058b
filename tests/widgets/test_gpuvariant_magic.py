"""``%%gpuvariant`` through a real IPython shell, after a real ``%%gpuprofile``."""

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import pytest

torch = pytest.importorskip("torch")
from IPython.core.interactiveshell import InteractiveShell  # noqa: E402

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def shell():
    sh = InteractiveShell.instance()
    sh.run_cell("%load_ext workbench", store_history=True).raise_error()
    sh.run_cell(
        "import torch\nx = torch.randn(100_000)\n"
        "def three_passes(t):\n    for _ in range(3):\n        y = (t.sin() * 2 + 1).relu()\n    return y",
        store_history=True,
    ).raise_error()
    return sh


def test_variant_of_the_last_profiled_cell(shell):
    shell.run_cell("%%gpuprofile -T -w 1 -r 3 -q\ny = three_passes(x)\ny", store_history=True).raise_error()
    res = shell.run_cell("%%gpuvariant one_pass -b 1 -c 1 -o cmp\ny = (x.sin() * 2 + 1).relu()\ny", store_history=True)
    res.raise_error()
    cmp = shell.user_ns["_gpuvariant"]
    assert shell.user_ns["cmp"] is cmp
    assert cmp.baseline == "profiled"
    row = cmp["one_pass"]
    assert row.status == "ok" and row.correctness.passed
    assert row.speedup.point > 1.5, row
    wrong = shell.run_cell("%%gpuvariant wrong -b 0.3 -c 1\n(x.sin() * 2).relu()", store_history=True)
    wrong.raise_error()
    assert shell.user_ns["_gpuvariant"]["wrong"].decision == "reject"


def test_usage_errors_say_what_to_do(shell):
    from IPython.core.error import UsageError

    from workbench.magics.variant import GpuVariantMagics

    magic = GpuVariantMagics(shell=shell)
    with pytest.raises(UsageError, match="needs the variant's code"):
        magic.gpuvariant("name", "   ")
    with pytest.raises(UsageError, match="--checks >= 1"):
        magic.gpuvariant("name -c 0", "x")
    with pytest.raises(UsageError, match="variable name"):
        magic.gpuvariant("name -o 1bad", "x")


def test_the_source_comes_from_the_profiling_magic_not_the_history(shell):
    from workbench.magics import gpuprofile, last_run

    ok = shell.run_cell("%%gpuprofile -T -w 0 -r 2 -q\nz = three_passes(x)", store_history=True)
    ok.raise_error()
    assert gpuprofile.last_cell_source().strip() == "z = three_passes(x)"
    kept = last_run()
    bad = shell.run_cell("%%gpuprofile -T -w 0 -r 2 -q\nraise ValueError('no')", store_history=True)
    assert not bad.success
    assert (
        gpuprofile.last_cell_source().strip() == "z = three_passes(x)" and last_run() is kept
    )  # failures keep nothing
    shell.run_cell("%gpuprofile -T -w 0 -r 2 -q three_passes(x) * 2", store_history=True).raise_error()
    assert gpuprofile.last_cell_source() == "three_passes(x) * 2"  # the line form too
    res = shell.run_cell("%%gpuvariant once -b 0.5 -c 1\n(x.sin() * 2 + 1).relu() * 2", store_history=True)
    res.raise_error()
    cmp = shell.user_ns["_gpuvariant"]
    assert cmp["once"].correctness.passed  # compared with the line form's code
    assert cmp.settings["end_to_end_ms"] == pytest.approx(last_run().timing.median_ms)
