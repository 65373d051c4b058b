"""Timing of every kernel on a CUDA device against eager torch (and, optionally, ``torch.compile``
of the eager function), forward and forward+backward, with ``triton.testing.do_bench`` (which
flushes the L2 cache before each call by default), plus each side's peak memory over one
forward+backward. ``device_check`` is the GPU check's entry point; ``benchmarks/kernels.py`` is the
command line. Nothing here runs without CUDA: every kernel is then reported "not applicable: no CUDA
device".
"""

from __future__ import annotations

import json
import math
import platform
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import torch

import workbench.kernels.reference as ref
from workbench.kernels.registry import KERNELS, missing_reason

NO_CUDA = "not applicable: no CUDA device"
#: where the timing runs (a module setting so that a CPU smoke run under the interpreter can reach every line)
DEVICE = "cuda"


@dataclass
class Bench:
    kernel: str
    label: str
    make: Callable[[int, torch.dtype, torch.device], tuple[tuple, Callable, Callable]]  # scale -> inputs, triton, eager


def _r(shape, dtype, dev, grad=True, scale=1.0):
    return (torch.randn(shape, device=dev, dtype=torch.float32) * scale).to(dtype).requires_grad_(grad)


def _targets(n, v, dev, ignore_frac=0.1):
    t = torch.randint(0, v, (n,), device=dev)
    t[torch.rand(n, device=dev) < ignore_frac] = -100
    return t


def benches() -> list[Bench]:
    from workbench.kernels.bias_gelu import bias_gelu
    from workbench.kernels.cross_entropy import cross_entropy, linear_cross_entropy
    from workbench.kernels.layer_norm import layer_norm
    from workbench.kernels.rms_norm import rms_norm
    from workbench.kernels.softmax import softmax
    from workbench.kernels.swiglu import swiglu

    def ln(s, dt, dev):
        return (
            (_r((8192 // s, 4096), dt, dev), _r((4096,), dt, dev), _r((4096,), dt, dev)),
            lambda x, w, b: layer_norm(x, w, b),
            lambda x, w, b: ref.layer_norm(x, w, b),
        )

    def rms(s, dt, dev):
        return (
            (_r((8192 // s, 4096), dt, dev), _r((4096,), dt, dev)),
            lambda x, w: rms_norm(x, w, 1e-6),
            lambda x, w: ref.rms_norm(x, w, 1e-6),
        )

    def bg(s, dt, dev):
        return (
            (_r((8192 // s, 4096), dt, dev), _r((4096,), dt, dev)),
            lambda x, b: bias_gelu(x, b, "tanh"),
            lambda x, b: ref.bias_gelu(x, b, "tanh"),
        )

    def sw(s, dt, dev):
        return ((_r((8192 // s, 5504), dt, dev), _r((8192 // s, 5504), dt, dev)), swiglu, ref.swiglu)

    def sm(s, dt, dev):
        return ((_r((16384 // s, 2048), dt, dev, scale=3.0),), softmax, ref.softmax)

    def ce(s, dt, dev):
        n = 8192 // s
        return (
            (_r((n, 32000), dt, dev, scale=3.0), _targets(n, 32000, dev)),
            lambda x, t: cross_entropy(x, t),
            lambda x, t: ref.cross_entropy(x, t),
        )

    def lce(s, dt, dev):
        n = 8192 // s
        return (
            (_r((n, 2048), dt, dev), _r((32000, 2048), dt, dev, scale=1 / math.sqrt(2048)), _targets(n, 32000, dev)),
            lambda h, w, t: linear_cross_entropy(h, w, t),
            lambda h, w, t: ref.linear_cross_entropy(h, w, t),
        )

    return [
        Bench("layer_norm", "x [8192, 4096], weight, bias", ln),
        Bench("rms_norm", "x [8192, 4096], weight", rms),
        Bench("bias_gelu", "x [8192, 4096] + bias [4096], tanh", bg),
        Bench("swiglu", "a, b [8192, 5504]", sw),
        Bench("softmax", "x [16384, 2048]", sm),
        Bench("cross_entropy", "logits [8192, 32000], 10% ignored, mean", ce),
        Bench("linear_cross_entropy", "hidden [8192, 2048], W [32000, 2048], 10% ignored, mean", lce),
    ]


def _grad_inputs(inputs):
    return [t for t in inputs if isinstance(t, torch.Tensor) and t.requires_grad]


def _fwd_bwd(fn, inputs, g):
    def run():
        out = fn(*inputs)
        return torch.autograd.grad(out, _grad_inputs(inputs), g)

    return run


def _peak(run) -> int:
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    run()
    torch.cuda.synchronize()
    return int(torch.cuda.max_memory_allocated() - base)


def _ms(fn, quick) -> float:
    import triton.testing

    kw = {"warmup": 5, "rep": 20} if quick else {"warmup": 25, "rep": 100}
    return float(triton.testing.do_bench(fn, quantiles=[0.5, 0.2, 0.8], **kw)[0])


def time_bench(b: Bench, dtype=torch.bfloat16, *, quick=False, compile_eager=False, scale=None) -> dict[str, Any]:
    dev = torch.device(DEVICE)
    t0 = time.perf_counter()
    row: dict[str, Any] = {
        "kernel": b.kernel,
        "shape": b.label,
        "dtype": str(dtype).replace("torch.", ""),
        "status": "ok",
        "timer": "triton.testing.do_bench median (L2 flushed)",
    }
    torch.manual_seed(0)
    inputs, tri, eager = b.make(scale or (2 if quick else 1), dtype, dev)
    with torch.no_grad():
        y_e = eager(*inputs)
    g = torch.randn_like(y_e, dtype=torch.float32).to(y_e.dtype)
    # a sanity check at this size: Triton against eager (the float64 checks are in workbench.kernels.checking)
    y_t = tri(*inputs)
    gt = torch.autograd.grad(y_t, _grad_inputs(inputs), g)
    ge = torch.autograd.grad(eager(*inputs), _grad_inputs(inputs), g)
    row["max_abs_diff_vs_eager"] = {
        "output": float((y_t.detach().double() - y_e.double()).abs().max()),
        **{f"grad[{i}]": float((a.double() - e.double()).abs().max()) for i, (a, e) in enumerate(zip(gt, ge))},
    }
    del y_t, gt, ge
    sides = {"triton": tri, "eager": eager}
    if compile_eager:
        c0 = time.perf_counter()
        try:
            comp = torch.compile(eager, dynamic=False)
            torch.autograd.grad(comp(*inputs), _grad_inputs(inputs), g)
            sides["compiled"] = comp
            row["compile_s"] = round(time.perf_counter() - c0, 2)
        except Exception as exc:  # noqa: BLE001
            row["compiled_error"] = f"{type(exc).__name__}: {exc}"[:300]
    ms: dict[str, dict[str, float]] = {"forward": {}, "forward_backward": {}}
    peak: dict[str, int] = {}
    for name, fn in sides.items():
        with torch.no_grad():
            ms["forward"][name] = _ms(lambda fn=fn: fn(*inputs), quick)
        run = _fwd_bwd(fn, inputs, g)
        ms["forward_backward"][name] = _ms(run, quick)
        peak[name] = _peak(run)
    row["median_ms"] = ms
    row["speedup_vs_eager"] = {k: v["eager"] / v["triton"] for k, v in ms.items()}
    if "compiled" in sides:
        row["speedup_vs_compiled"] = {k: v["compiled"] / v["triton"] for k, v in ms.items()}
    row["peak_bytes_forward_backward"] = peak
    row["seconds"] = round(time.perf_counter() - t0, 2)
    return row


def versions() -> dict[str, str]:
    import triton

    return {
        "torch": torch.__version__,
        "triton": triton.__version__,
        "python": platform.python_version(),
        "device": torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu",
    }


def run_all(
    *, dtype=torch.bfloat16, quick=False, compile_eager=False, kernels=None, budget_s=None, log=print, scale=None
) -> list[dict[str, Any]]:
    reason = missing_reason() if DEVICE == "cuda" else None
    out = []
    start = time.perf_counter()
    for b in benches() if reason is None else [Bench(k, "", None) for k in KERNELS]:  # type: ignore[arg-type]
        if kernels and b.kernel not in kernels:
            continue
        if reason is not None:
            msg = NO_CUDA if reason != "not applicable: triton not installed" else reason
            out.append({"kernel": b.kernel, "status": "not_applicable", "reason": msg})
            log(f"{b.kernel:22s} {msg}")
            continue
        if budget_s is not None and time.perf_counter() - start > budget_s:
            out.append(
                {"kernel": b.kernel, "status": "not_reached", "reason": f"time budget of {budget_s:.0f} s spent"}
            )
            log(f"{b.kernel:22s} not reached: time budget spent")
            continue
        try:
            row = time_bench(b, dtype, quick=quick, compile_eager=compile_eager, scale=scale)
        except Exception as exc:  # noqa: BLE001
            row = {
                "kernel": b.kernel,
                "status": "failed",
                "error": f"{type(exc).__name__}: {exc}"[:500],
                "traceback": traceback.format_exc(limit=6),
            }
        out.append(row)
        log(_line(row))
    return out


def _line(row: dict[str, Any]) -> str:
    if row.get("status") != "ok":
        return f"{row['kernel']:22s} {row.get('status')}: {row.get('error') or row.get('reason')}"
    ms, sp = row["median_ms"], row["speedup_vs_eager"]
    parts = [f"{row['kernel']:22s} {row['dtype']:8s}"]
    for k in ("forward", "forward_backward"):
        sides = " ".join(f"{n} {v:.3f}" for n, v in ms[k].items())
        parts.append(f"{k}: {sides} ms (x{sp[k]:.2f} vs eager)")
    pk = row["peak_bytes_forward_backward"]
    parts.append("peak MiB " + " ".join(f"{n} {v / 2**20:.0f}" for n, v in pk.items()))
    return " | ".join(parts)


def device_check(workdir: str | None = None, budget_s: float = 25.0) -> dict[str, Any]:
    """The GPU check (benchmarks/gpu/sections.py calls it through ``workbench.kernels.device_check``),
    in three phases, each stopped by ``budget_s`` (compiling each kernel specialisation costs time on
    a fresh machine):

    1. correctness against float64, fp32, one small case per kernel (3x37, non-power-of-two);
    2. quick timing of every kernel in bf16 (do_bench, shorter runs, half the rows), with a check
       against eager at that size;
    3. further correctness cases (the block loop, a sliced view, bf16) while time is left.

    ``ok``: every correctness case that ran passed and no timed kernel failed; what the budget cut
    is listed as ``not_reached``."""
    import workbench.kernels.checking as checking

    t0 = time.perf_counter()

    def left() -> float:
        return budget_s - (time.perf_counter() - t0)

    res: dict[str, Any] = {"versions": versions(), "budget_s": budget_s}
    all_cases = checking.cases()
    first = [c for c in all_cases if c.label.startswith("3x37 contiguous") or "V=37" in c.label]
    first = [c for i, c in enumerate(first) if c.kernel not in {d.kernel for d in first[:i]}]
    more = [
        (c, torch.float32) for c in all_cases if any(s in c.label for s in ("block32", "block_size=32", "4x50 sliced"))
    ]
    more += [(c, torch.bfloat16) for c in first]
    correct, not_reached = [], []

    def run(c, dt):
        if left() <= 0:
            not_reached.append(f"{c.kernel} {c.label} [{dt}]")
            return
        r = checking.run_case(c, DEVICE, dt)
        worst = max((v.get("max_abs_err", math.inf) for v in r.get("checks", {}).values()), default=None)
        correct.append({k: v for k, v in r.items() if k != "checks"} | {"worst_abs_err": worst})

    for c in first:
        run(c, torch.float32)
    res["timing"] = run_all(quick=True, budget_s=max(0.0, left()), log=lambda s: None)
    for c, dt in more:
        run(c, dt)
    res["correctness"] = correct
    res["not_reached"] = not_reached + [
        r["kernel"] + " timing" for r in res["timing"] if r.get("status") == "not_reached"
    ]
    res["ok"] = (
        bool(correct)
        and all(r["passed"] for r in correct)
        and not any(r.get("status") == "failed" for r in res["timing"])
    )
    res["summary"] = [_line(r) for r in res["timing"]]
    res["seconds"] = round(time.perf_counter() - t0, 2)
    if workdir:
        Path(workdir).mkdir(parents=True, exist_ok=True)
        (Path(workdir) / "kernels.json").write_text(json.dumps(res, indent=1, default=str))
    return res
