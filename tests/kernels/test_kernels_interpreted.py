"""workbench.kernels: every fused Triton kernel against eager torch, forward and backward (the
gradient of every input, weights and biases included), under ``TRITON_INTERPRET=1`` on CPU.

All cases run in ONE subprocess (the variable must be set before triton is imported, and the
start-up is paid once): ``workbench.kernels.checking`` at fp32 for every case — three plain shapes
with non-powers of two (3x37, 5x128, 2x3x100), a column slice read through its row stride (4x50 of
a 4x57 matrix), a transposed view (copied), a row longer than the block (the loop path, block 32),
and per kernel its own cases (both GELU forms; softmax over a middle dim; cross-entropy with
ignore_index, the three reductions and the in-place backward; the linear cross-entropy in several
row chunks, with and without bias) — plus fp16 and bf16 at 3x37. The reference is the eager function
in float64; tolerances are per kernel and dtype in ``checking.TOLERANCES`` (fp32: atol = rtol = 1e-5,
1e-4 for the linear cross-entropy's two matmuls). Under the interpreter a float32 -> bfloat16
conversion truncates instead of rounding to nearest (measured: max error 0.0156 against 0.0074 for
``.to(torch.bfloat16)``), so the bf16 errors here are about twice eager's; the tolerances hold either way.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from workbench.kernels import registry

ROOT = Path(__file__).resolve().parents[2]
HAS_TRITON = importlib.util.find_spec("triton") is not None
needs_triton = pytest.mark.skipif(
    not HAS_TRITON, reason="not applicable: triton not installed (pip install triton, ~1 GB)"
)

SCRIPT = textwrap.dedent("""
    import json, os, sys, time
    assert os.environ.get("TRITON_INTERPRET") == "1" and "triton" not in sys.modules
    t0 = time.perf_counter()
    import torch
    torch.set_num_threads(1)
    from torch import nn
    from workbench.kernels import checking

    rows = checking.check_all("cpu", torch.float32)
    for dt in (torch.float16, torch.bfloat16):
        rows += [checking.run_case(c, "cpu", dt) for c in checking.cases()
                 if c.label.startswith("3x37 contiguous") or "V=37" in c.label]

    # the nn.Module drop-ins, built from the modules they replace, against those modules
    from workbench.kernels.layer_norm import TritonLayerNorm
    from workbench.kernels.rms_norm import TritonRMSNorm
    from workbench.kernels.bias_gelu import TritonBiasGELU
    from workbench.kernels.swiglu import TritonSwiGLUMLP
    from workbench.kernels.softmax import TritonSoftmax
    from workbench.kernels.cross_entropy import TritonLinearCrossEntropy

    def compare(name, eager_mod, triton_mod, *inputs):
        outs = {}
        for side, mod in (("eager", eager_mod), ("triton", triton_mod)):
            torch.manual_seed(1)
            xs = [x.clone().requires_grad_(x.is_floating_point()) for x in inputs]
            y = mod(*xs)
            params = [p for p in mod.parameters()]
            g = torch.randn(y.shape)   # not randn_like: it follows the strides of y
            grads = torch.autograd.grad(y, [x for x in xs if x.requires_grad] + params, g if y.dim() else None)
            outs[side] = [y.detach()] + [t.detach() for t in grads]
        errs = [float((a - b).abs().max()) for a, b in zip(outs["eager"], outs["triton"])]
        return {"module": name, "n_compared": len(errs), "max_abs_err": max(errs),
                "same_count": len(outs["eager"]) == len(outs["triton"])}

    torch.manual_seed(0)
    x = torch.randn(2, 3, 37)
    ln = nn.LayerNorm(37); rms = nn.RMSNorm(37, eps=1e-6)
    with torch.no_grad():
        for p in list(ln.parameters()) + list(rms.parameters()):
            p.normal_()
    lin, gelu = nn.Linear(5, 37), nn.GELU(approximate="tanh")
    gate, up, down = nn.Linear(8, 37, bias=False), nn.Linear(8, 37, bias=False), nn.Linear(37, 8, bias=False)
    eager_mlp = lambda h: down(nn.functional.silu(gate(h)) * up(h))
    class EagerMLP(nn.Module):
        def __init__(self):
            super().__init__(); self.gate, self.up, self.down = gate, up, down
        def forward(self, h):
            return self.down(nn.functional.silu(self.gate(h)) * self.up(h))
    head = nn.Linear(16, 37)
    class EagerHead(nn.Module):
        def __init__(self):
            super().__init__(); self.linear = head
        def forward(self, h, t):
            return nn.functional.cross_entropy(self.linear(h), t)
    t = torch.randint(0, 37, (6,)); t[2] = -100
    modules = [compare("TritonLayerNorm.from_module", ln, TritonLayerNorm.from_module(ln), x),
               compare("TritonRMSNorm.from_module", rms, TritonRMSNorm.from_module(rms), x),
               compare("TritonBiasGELU.from_modules", nn.Sequential(lin, gelu), TritonBiasGELU.from_modules(lin, gelu),
                       torch.randn(4, 5)),
               compare("TritonSwiGLUMLP.from_linears", EagerMLP(), TritonSwiGLUMLP.from_linears(gate, up, down),
                       torch.randn(3, 8)),
               compare("TritonSoftmax.from_module", nn.Softmax(dim=1), TritonSoftmax.from_module(nn.Softmax(dim=1)), x),
               compare("TritonLinearCrossEntropy.from_linear", EagerHead(),
                       TritonLinearCrossEntropy.from_linear(head, chunk_rows=4), torch.randn(6, 16), t)]
    # under no_grad the linear cross-entropy computes the loss only
    with torch.no_grad():
        from workbench.kernels.cross_entropy import linear_cross_entropy
        nograd = float(linear_cross_entropy(torch.randn(6, 16), head.weight, t, head.bias, chunk_rows=4))
    # swapping them into a model for the modules they replace
    from workbench.kernels.swap import swap_modules
    model = nn.Sequential(nn.Linear(6, 37), nn.GELU(), nn.LayerNorm(37),
                          nn.Sequential(nn.Linear(37, 12), nn.RMSNorm(12), nn.Softmax(dim=-1)))
    swapped, swaps = swap_modules(model)
    xin = torch.randn(4, 6)
    swap = {"swaps": [[s.path, s.replaced, s.by, s.kernel] for s in swaps],
            "max_abs_err": float((swapped(xin) - model(xin)).abs().max()),
            "original_untouched": type(model[2]).__name__}
    print("KERNELS-JSON" + json.dumps({"rows": rows, "modules": modules, "nograd_loss": nograd, "swap": swap,
                                       "seconds": time.perf_counter() - t0}))
""")


@pytest.fixture(scope="module")
def interpreted():
    if not HAS_TRITON:
        pytest.skip("not applicable: triton not installed (pip install triton, ~1 GB)")
    env = {
        **os.environ,
        "TRITON_INTERPRET": "1",
        "OMP_NUM_THREADS": "1",
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, cwd=str(ROOT), env=env, timeout=280
    )
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("KERNELS-JSON")), None)
    assert proc.returncode == 0 and line is not None, proc.stderr[-3000:]
    return json.loads(line[len("KERNELS-JSON") :])


def _describe(row):
    if "error" in row:
        return f"{row['case']} [{row['dtype']}]: {row['error']}"
    bad = {k: v for k, v in row["checks"].items() if not v["passed"]}
    return f"{row['case']} [{row['dtype']}] atol={row['atol']} rtol={row['rtol']}: {bad}"


@needs_triton
@pytest.mark.parametrize("kernel", registry.names())
def test_kernel_matches_eager_forward_and_backward(interpreted, kernel):
    rows = [r for r in interpreted["rows"] if r["kernel"] == kernel]
    fp32 = [r for r in rows if r["dtype"] == "float32"]
    assert len(fp32) >= 3, f"{kernel}: only {len(fp32)} fp32 cases ran"
    failed = [_describe(r) for r in rows if not r["passed"]]
    assert not failed, f"{kernel} differs from eager (float64 reference):\n  " + "\n  ".join(failed)
    # what the cases must cover: non-powers of two, a non-contiguous input, every input's gradient
    labels = " ".join(r["case"] for r in fp32)
    assert "37" in labels and "100" in labels
    assert "sliced" in labels or "transposed" in labels
    for r in fp32:
        assert "output" in r["checks"] and any(k.startswith("grad[") for k in r["checks"]), r["case"]
        for name, c in r["checks"].items():  # a zero reference would pass any kernel
            assert c["ref_max_abs"] > 10 * r["atol"], f"{r['case']} {name}: reference too small to test"
    assert {"float16", "bfloat16"} <= {r["dtype"] for r in rows}


@needs_triton
def test_norm_and_softmax_cases_reach_the_block_loop_and_weight_grads(interpreted):
    for kernel, n_grads in (("layer_norm", 3), ("rms_norm", 2), ("softmax", 1)):
        rows = [r for r in interpreted["rows"] if r["kernel"] == kernel and r["dtype"] == "float32"]
        assert any("block32" in r["case"] for r in rows), kernel
        assert all(sum(k.startswith("grad[") for k in r["checks"]) == n_grads for r in rows), kernel


@needs_triton
def test_cross_entropy_cases_cover_ignore_index_reductions_and_in_place(interpreted):
    rows = [r for r in interpreted["rows"] if r["kernel"] == "cross_entropy" and r["dtype"] == "float32"]
    labels = [r["case"] for r in rows]
    for red in ("mean", "sum", "none"):
        assert any(f"reduction={red}" in lab for lab in labels), red
    assert any("ignore_index=7" in lab for lab in labels) and any("inplace_backward=True" in lab for lab in labels)
    lin = [r for r in interpreted["rows"] if r["kernel"] == "linear_cross_entropy" and r["dtype"] == "float32"]
    assert any("bias=True" in r["case"] for r in lin) and any("reduction=sum" in r["case"] for r in lin)
    # hidden, weight and bias gradients all compared where there is a bias
    assert all(
        len([k for k in r["checks"] if k.startswith("grad[")]) == (3 if "bias=True" in r["case"] else 2) for r in lin
    )


@needs_triton
def test_module_drop_ins_match_the_modules_they_replace(interpreted):
    mods = interpreted["modules"]
    assert len(mods) == 6
    for m in mods:
        assert m["same_count"] and m["n_compared"] >= 2, m
        assert m["max_abs_err"] < 1e-4, m
    assert interpreted["nograd_loss"] > 0


@needs_triton
def test_swap_modules_replaces_the_modules_and_keeps_the_outputs(interpreted):
    swap = interpreted["swap"]
    assert [s[3] for s in swap["swaps"]] == ["bias_gelu", "layer_norm", "rms_norm", "softmax"], swap
    assert [s[0] for s in swap["swaps"]] == ["0", "2", "3.1", "3.2"], swap
    assert swap["max_abs_err"] < 1e-5 and swap["original_untouched"] == "LayerNorm"


def test_checks_poison_outputs_so_an_unwritten_element_fails():
    """A launcher that leaves the last row of its ``torch.empty_like`` output unwritten is caught
    (in this process: checking imports no triton until a kernel case is built)."""
    import torch

    from workbench.kernels import checking

    def leaves_a_row(x):
        y = torch.empty_like(x)
        y[:-1] = x[:-1] * 2
        return y

    case = checking.Case(
        "softmax",
        "unwritten last row",
        lambda gen, dev, dt: ((checking._leaf(gen, (3, 5), dev, dt),), leaves_a_row, lambda x: x * 2),
    )
    row = checking.run_case(case)
    assert not row["passed"] and not row["checks"]["output"]["passed"]
    with checking.poisoned():
        assert torch.isnan(torch.empty(4)).all() and (torch.empty_like(torch.ones(2, dtype=torch.int64)) == -7).all()
    assert torch.empty is not None and "lambda" not in repr(torch.empty)


def test_importing_the_package_does_not_import_triton():
    code = "import sys, workbench.kernels as k; k.names(); k.missing_reason(); print('triton' in sys.modules)"
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=str(ROOT), env=env, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip().splitlines()[-1] == "False"


def test_missing_reason_says_plainly_why(monkeypatch):
    monkeypatch.setattr(registry, "triton_installed", lambda: False)
    assert registry.missing_reason() == "not applicable: triton not installed" and not registry.available()
    monkeypatch.setattr(registry, "triton_installed", lambda: True)
    monkeypatch.setattr(registry, "_cuda", lambda: False)
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    assert registry.missing_reason() == "CPU only: runs under TRITON_INTERPRET=1 for correctness, not for speed"
    monkeypatch.delenv("TRITON_INTERPRET")
    assert "TRITON_INTERPRET=1" in registry.missing_reason() and not registry.available()
    monkeypatch.setattr(registry, "_cuda", lambda: True)
    assert registry.missing_reason() is None and registry.available()
    spec = registry.get("cross_entropy")
    assert spec.requires == ("triton", "cuda") and "F.cross_entropy" in spec.replaces
    assert callable(spec.reference)
    with pytest.raises(KeyError, match="layer_norm"):
        registry.get("nope")


def test_benchmark_without_cuda_says_not_applicable_and_writes_json(tmp_path):
    import torch

    if torch.cuda.is_available():
        pytest.skip("a CUDA device is present: benchmarks/kernels.py times the kernels there")
    out = tmp_path / "k.json"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "kernels.py"), "--json", str(out)],
        capture_output=True,
        text=True,
        cwd=str(ROOT),
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = proc.stdout.strip().splitlines()
    assert len(lines) == len(registry.KERNELS)
    expected = "not applicable: no CUDA device" if HAS_TRITON else "not applicable: triton not installed"
    assert all(line.endswith(expected) for line in lines), lines
    data = json.loads(out.read_text())
    assert [r["kernel"] for r in data["results"]] == registry.names()
    assert all(r["status"] == "not_applicable" for r in data["results"])
