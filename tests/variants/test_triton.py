"""Triton variants: not applicable without a GPU unless interpreted; under the interpreter
(in a subprocess) correct, with timing marked not meaningful.  Gated on triton being installed."""

import importlib.util
import sys
import textwrap

import pytest
import torch

import workbench as wb
from tests.variants.variant_workloads import FAST, chain

NOT_APPLICABLE_CHECK = textwrap.dedent("""
    import json, os, torch
    os.environ.pop("TRITON_INTERPRET", None)
    import workbench as wb
    from tests.variants.variant_workloads import FAST, chain
    c = wb.compare({"eager": chain, "triton": wb.variants.triton(lambda x: chain(x))},
                   inputs=lambda: torch.randn(64), **FAST)
    row = c["triton"]
    print(json.dumps({"status": row.status, "reason": row.reason, "decision": row.decision}))
""")


def test_without_gpu_or_interpreter_it_is_not_applicable_with_the_hint():
    """In a fresh process (triton is often imported already by torch.compile in this one)."""
    import json
    import os
    import subprocess

    if torch.cuda.is_available():
        pytest.skip("a GPU is present: the Triton variant runs")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    proc = subprocess.run(
        [sys.executable, "-c", NOT_APPLICABLE_CHECK],
        capture_output=True,
        text=True,
        cwd=os.getcwd(),
        env=env,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    row = json.loads(proc.stdout.strip().splitlines()[-1])
    assert row["status"] == "not_applicable" and "TRITON_INTERPRET=1" in row["reason"]
    assert row["decision"] == "need_more_evidence"


KERNEL_MODULE = textwrap.dedent("""
    import torch
    import triton
    import triton.language as tl

    @triton.jit
    def _affine_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        x = tl.load(x_ptr + offs, mask=mask)
        tl.store(y_ptr + offs, x * 2.0 + 1.0, mask=mask)

    def affine(x):
        return x * 2.0 + 1.0

    def affine_triton(x):
        y = torch.empty_like(x)
        _affine_kernel[(triton.cdiv(x.numel(), 256),)](x, y, x.numel(), BLOCK=256)
        return y

    def make_inputs():
        return (torch.randn(1000),)
""")


@pytest.mark.skipif(
    importlib.util.find_spec("triton") is None,
    reason="not applicable: triton is not installed (pip install triton, ~1 GB)",
)
def test_interpreter_check_in_a_subprocess(tmp_path, monkeypatch):
    import os

    (tmp_path / "affine_kernels.py").write_text(KERNEL_MODULE)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tmp_path), os.getcwd(), os.environ.get("PYTHONPATH", "")]))
    c = wb.variants.check_in_interpreter("affine_kernels", "affine", "affine_triton", "make_inputs", cwd=str(tmp_path))
    row = c["triton"]
    assert row.status == "ok" and row.correctness.passed
    assert not row.timing_meaningful and row.decision == "need_more_evidence"
