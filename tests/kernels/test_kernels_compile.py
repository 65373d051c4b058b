"""Every Triton kernel of workbench.kernels compiles for an H100/H200 (sm_90) on this CPU-only
machine: triton's own compiler (the frontend, the MLIR passes and the bundled ptxas) runs without a
GPU. The interpreter (test_kernels_interpreted.py) checks the numbers but executes the kernels as
Python, so it cannot see what only compilation rejects (loop-carried values changing type, a
constexpr branch that does not type-check, an unsupported op for a dtype); this test does, for every
compile-time variant of every kernel, in bf16 (the dtype conversions included).

It runs in one subprocess with TRITON_INTERPRET unset (under the interpreter ``@triton.jit`` gives
no compilable function), and is skipped, with the reason, where triton cannot compile even a
trivial kernel here (no CUDA backend in the wheel, no ptxas, an API of another triton version).
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

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = textwrap.dedent("""
    import json, sys, time
    import triton
    import triton.language as tl
    try:
        from triton.backends.compiler import GPUTarget
        from triton.compiler import ASTSource
    except ImportError as exc:
        print("COMPILE-JSON" + json.dumps({"skip": f"this triton has no ASTSource/GPUTarget: {exc}"})); sys.exit(0)
    target = GPUTarget("cuda", 90, 32)

    @triton.jit
    def _probe(X, n, BLOCK: tl.constexpr):
        o = tl.arange(0, BLOCK)
        tl.store(X + o, tl.load(X + o, mask=o < n) * 2, mask=o < n)

    def compile_one(fn, sig, consts, num_warps=4):
        return triton.compile(ASTSource(fn, sig, constexprs=consts), target=target, options={"num_warps": num_warps})

    try:
        compile_one(_probe, {"X": "*fp32", "n": "i32", "BLOCK": "constexpr"}, {"BLOCK": 64})
    except Exception as exc:
        print("COMPILE-JSON" + json.dumps({"skip": f"triton cannot compile for sm_90 here: {type(exc).__name__}: {str(exc)[:300]}"}))
        sys.exit(0)

    from workbench.kernels import _norm, bias_gelu, cross_entropy, softmax, swiglu
    P = "*bf16"
    C = dict.fromkeys
    jobs = []
    for rms in (False, True):
        for single in (True, False):
            for affine in (True, False):
                c = {"IS_RMS": rms, "HAS_W": affine, "HAS_B": affine and not rms, "BLOCK": 4096 if single else 1024,
                     "SINGLE": single}
                tag = f"rms={rms} single={single} affine={affine}"
                jobs.append((f"norm_fwd {tag}", _norm._norm_fwd_kernel,
                             {"X": P, "Y": P, "W": P, "B": P, "MEAN": "*fp32", "RSTD": "*fp32", "stride_x": "i32",
                              "stride_y": "i32", "N": "i32", "eps": "fp32", **C(c, "constexpr")}, c, 8))
                jobs.append((f"norm_bwd {tag}", _norm._norm_bwd_kernel,
                             {"X": P, "DY": P, "DX": P, "W": P, "MEAN": "*fp32", "RSTD": "*fp32", "DWP": "*fp32",
                              "DBP": "*fp32", "stride_x": "i32", "stride_dy": "i32", "stride_dx": "i32", "M": "i32",
                              "N": "i32", "rows_per_prog": "i32", **C(c, "constexpr")}, c, 8))
    for single in (True, False):
        c = {"BLOCK": 2048 if single else 512, "SINGLE": single}
        jobs.append((f"softmax_fwd single={single}", softmax._softmax_fwd_kernel,
                     {"X": P, "Y": P, "stride_x": "i32", "stride_y": "i32", "N": "i32", **C(c, "constexpr")}, c, 4))
        jobs.append((f"softmax_bwd single={single}", softmax._softmax_bwd_kernel,
                     {"Y": P, "DY": P, "DX": P, "stride_y": "i32", "stride_dy": "i32", "stride_dx": "i32", "N": "i32",
                      **C(c, "constexpr")}, c, 4))
    for wg in (False, True):
        c = {"BLOCK": 4096, "WRITE_GRAD": wg}
        jobs.append((f"ce_fwd write_grad={wg}", cross_entropy._ce_fwd_kernel,
                     {"X": P, "T": "*i64", "LOSS": "*fp32", "LSE": "*fp32", "SCALE": "*fp32", "stride_x": "i32",
                      "V": "i32", "ignore_index": "i32", **C(c, "constexpr")}, c, 8))
    jobs.append(("ce_bwd", cross_entropy._ce_bwd_kernel,
                 {"X": P, "T": "*i64", "LSE": "*fp32", "GRAD": "*fp32", "DX": P, "stride_x": "i32", "stride_dx": "i32",
                  "stride_g": "i32", "V": "i32", "ignore_index": "i32", "BLOCK": "constexpr"}, {"BLOCK": 4096}, 8))
    for tanh in (False, True):
        for has_b in (True, False):
            c = {"HAS_B": has_b, "TANH": tanh, "BLOCK": 1024}
            jobs.append((f"bias_gelu_fwd tanh={tanh} bias={has_b}", bias_gelu._bias_gelu_fwd_kernel,
                         {"X": P, "B": P, "Y": P, "n": "i32", "H": "i32", **C(c, "constexpr")}, c, 4))
            jobs.append((f"bias_gelu_bwd tanh={tanh} bias={has_b}", bias_gelu._bias_gelu_bwd_kernel,
                         {"X": P, "B": P, "DY": P, "DX": P, "n": "i32", "H": "i32", **C(c, "constexpr")}, c, 4))
    jobs.append(("swiglu_fwd", swiglu._swiglu_fwd_kernel, {"A": P, "B": P, "Y": P, "n": "i32", "BLOCK": "constexpr"},
                 {"BLOCK": 1024}, 4))
    jobs.append(("swiglu_bwd", swiglu._swiglu_bwd_kernel,
                 {"A": P, "B": P, "DY": P, "DA": P, "DB": P, "n": "i32", "BLOCK": "constexpr"}, {"BLOCK": 1024}, 4))
    out = []
    for name, fn, sig, consts, warps in jobs:
        t0 = time.perf_counter()
        try:
            k = compile_one(fn, sig, consts, warps)
            out.append({"name": name, "ok": True, "has_cubin": bool(k.asm.get("cubin")),
                        "seconds": round(time.perf_counter() - t0, 2)})
        except Exception as exc:
            out.append({"name": name, "ok": False, "error": f"{type(exc).__name__}: {str(exc)[:2000]}"})
    print("COMPILE-JSON" + json.dumps({"triton": triton.__version__, "results": out}))
""")


@pytest.mark.skipif(
    importlib.util.find_spec("triton") is None,
    reason="not applicable: triton not installed (pip install triton, ~1 GB)",
)
def test_every_kernel_variant_compiles_for_sm90_without_a_gpu(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env.update(
        {
            "TRITON_CACHE_DIR": str(tmp_path / "triton-cache"),
            "TRITON_DEFAULT_FP_FUSION": "1",
            "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
        }
    )
    script = tmp_path / "compile_check.py"  # a file: triton reads a kernel's source with inspect
    script.write_text(SCRIPT)
    proc = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, cwd=str(ROOT), env=env, timeout=280
    )
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("COMPILE-JSON")), None)
    assert proc.returncode == 0 and line is not None, proc.stderr[-3000:]
    data = json.loads(line[len("COMPILE-JSON") :])
    if "skip" in data:
        pytest.skip(data["skip"])
    failed = [f"{r['name']}: {r['error']}" for r in data["results"] if not r["ok"]]
    assert not failed, f"kernels that do not compile for sm_90 (triton {data['triton']}):\n  " + "\n  ".join(failed)
    assert len(data["results"]) == 33 and all(r["has_cubin"] for r in data["results"])
