"""Correctness checks of every kernel against eager torch, forward and backward (every input's
gradient, weights and biases included), at awkward shapes: non-powers of two, a row longer than the
block (the loop path), non-contiguous views (a column slice read through its row stride, a transposed
view that is copied). The reference is the eager function in float64 on the same values; the eager
function in the working dtype is measured against it too, so each result says how far eager itself is.

Runs on CUDA, or on CPU under ``TRITON_INTERPRET=1`` (set before triton is imported; the test suite
does it in a subprocess). Imports triton through the kernel modules.
"""

from __future__ import annotations

import contextlib
import math
import time
from dataclasses import dataclass
from typing import Any, Callable

import torch

import workbench.kernels.reference as ref

# (atol, rtol) against the float64 reference, per kernel and working dtype. A value passes when
# |got - ref| <= atol + rtol * |ref|. fp32: the kernels accumulate in fp32 over at most a few
# thousand terms (relative error ~1e-6 on O(1) values), so 1e-5 leaves a margin of ~10x;
# the linear cross-entropy adds two matmuls (fp32, no TF32), hence 1e-4. fp16/bf16: the output is
# rounded to the dtype (unit roundoff 4.9e-4 / 3.9e-3) and the inputs were rounded too, so the
# bounds are a few ulps of the dtype.
TOLERANCES: dict[str, dict[torch.dtype, tuple[float, float]]] = {
    "layer_norm": {torch.float32: (1e-5, 1e-5), torch.float16: (4e-3, 4e-3), torch.bfloat16: (3e-2, 3e-2)},
    "rms_norm": {torch.float32: (1e-5, 1e-5), torch.float16: (4e-3, 4e-3), torch.bfloat16: (3e-2, 3e-2)},
    "bias_gelu": {torch.float32: (1e-5, 1e-5), torch.float16: (2e-3, 2e-3), torch.bfloat16: (2e-2, 2e-2)},
    "swiglu": {torch.float32: (1e-5, 1e-5), torch.float16: (2e-3, 2e-3), torch.bfloat16: (2e-2, 2e-2)},
    "softmax": {torch.float32: (1e-5, 1e-5), torch.float16: (2e-3, 2e-3), torch.bfloat16: (2e-2, 2e-2)},
    "cross_entropy": {torch.float32: (1e-5, 1e-5), torch.float16: (4e-3, 4e-3), torch.bfloat16: (3e-2, 3e-2)},
    "linear_cross_entropy": {torch.float32: (1e-4, 1e-4), torch.float16: (1e-2, 1e-2), torch.bfloat16: (5e-2, 5e-2)},
}


@dataclass
class Case:
    kernel: str
    label: str
    make: Callable[[torch.Generator, torch.device, torch.dtype], tuple[tuple, Callable, Callable]]


def _randn(gen, shape, device, dtype, scale=1.0):
    return (torch.randn(shape, generator=gen, dtype=torch.float64) * scale).to(device=device, dtype=dtype)


def _leaf(gen, shape, device, dtype, scale=1.0):
    return _randn(gen, shape, device, dtype, scale).requires_grad_(True)


def _x(gen, shape, device, dtype, layout="contiguous", scale=1.0):
    """An input of ``shape`` in one of three layouts, its gradient taken through the view."""
    if layout == "sliced":  # a column slice of a wider matrix: row stride > H
        base = _leaf(gen, (*shape[:-1], shape[-1] + 7), device, dtype, scale)
        return base[..., 3 : 3 + shape[-1]]
    if layout == "transposed":  # last-dim stride != 1: copied
        base = _leaf(gen, tuple(reversed(shape)), device, dtype, scale)
        return base.permute(*reversed(range(len(shape))))
    return _leaf(gen, shape, device, dtype, scale)


SHAPES = (
    ((3, 37), "contiguous"),
    ((5, 128), "contiguous"),
    ((2, 3, 100), "contiguous"),
    ((4, 50), "sliced"),
    ((37, 6), "transposed"),
)


def _norm_cases() -> list[Case]:
    from workbench.kernels.layer_norm import layer_norm
    from workbench.kernels.rms_norm import rms_norm

    out = []
    for shape, layout in SHAPES + (((5, 100), "contiguous:block32"),):
        lay, _, blk = layout.partition(":")
        bs = 32 if blk else None
        label = f"{'x'.join(map(str, shape))} {layout}"

        def ln(gen, dev, dt, shape=shape, lay=lay, bs=bs):
            h = shape[-1]
            inputs = (_x(gen, shape, dev, dt, lay), _leaf(gen, (h,), dev, dt), _leaf(gen, (h,), dev, dt))
            return (
                inputs,
                (lambda x, w, b: layer_norm(x, w, b, 1e-5, block_size=bs)),
                (lambda x, w, b: ref.layer_norm(x, w, b, 1e-5)),
            )

        def rms(gen, dev, dt, shape=shape, lay=lay, bs=bs):
            h = shape[-1]
            inputs = (_x(gen, shape, dev, dt, lay), _leaf(gen, (h,), dev, dt))
            return inputs, (lambda x, w: rms_norm(x, w, 1e-6, block_size=bs)), (lambda x, w: ref.rms_norm(x, w, 1e-6))

        out += [Case("layer_norm", label, ln), Case("rms_norm", label, rms)]
    return out


def _elementwise_cases() -> list[Case]:
    from workbench.kernels.bias_gelu import bias_gelu
    from workbench.kernels.swiglu import swiglu

    out = []
    for i, (shape, layout) in enumerate(SHAPES):
        label = f"{'x'.join(map(str, shape))} {layout}"
        for approx in ("none", "tanh") if i in (0, 3) else ("none",) if i % 2 else ("tanh",):

            def bg(gen, dev, dt, shape=shape, layout=layout, approx=approx):
                inputs = (_x(gen, shape, dev, dt, layout, 2.0), _leaf(gen, (shape[-1],), dev, dt))
                return inputs, (lambda x, b: bias_gelu(x, b, approx)), (lambda x, b: ref.bias_gelu(x, b, approx))

            out.append(Case("bias_gelu", f"{label} approximate={approx}", bg))

        def sw(gen, dev, dt, shape=shape, layout=layout):
            inputs = (_x(gen, shape, dev, dt, layout, 2.0), _x(gen, shape, dev, dt, "contiguous"))
            return inputs, swiglu, ref.swiglu

        out.append(Case("swiglu", label, sw))
    return out


def _softmax_cases() -> list[Case]:
    from workbench.kernels.softmax import softmax

    out = []
    for shape, layout in SHAPES + (((5, 100), "contiguous:block32"), ((6, 5, 3), "contiguous:dim1")):
        lay, _, extra = layout.partition(":")
        bs = 32 if extra == "block32" else None
        dim = 1 if extra == "dim1" else -1

        def sm(gen, dev, dt, shape=shape, lay=lay, bs=bs, dim=dim):
            inputs = (_x(gen, shape, dev, dt, lay, 3.0),)
            return inputs, (lambda x: softmax(x, dim, block_size=bs)), (lambda x: ref.softmax(x, dim))

        out.append(Case("softmax", f"{'x'.join(map(str, shape))} {layout}", sm))
    return out


def _targets(gen, shape, v, device, ignore_frac=0.0, ignore_index=-100):
    t = torch.randint(0, v, shape, generator=gen)
    if ignore_frac:
        drop = torch.rand(shape, generator=gen) < ignore_frac
        drop.view(-1)[0] = True  # at least one ignored row
        drop.view(-1)[-1] = False  # and at least one counted
        t[drop] = ignore_index
    return t.to(device)


def _ce_cases() -> list[Case]:
    from workbench.kernels.cross_entropy import cross_entropy, linear_cross_entropy

    out = []
    specs = [
        ((3, 37), "contiguous", "mean", -100, 0.34, {}),
        ((5, 128), "contiguous", "sum", -100, 0.0, {}),
        ((2, 3, 100), "contiguous", "none", 7, 0.3, {}),
        ((4, 50), "sliced", "mean", -100, 0.25, {}),
        ((37, 6), "transposed", "sum", -1, 0.2, {}),
        ((5, 100), "contiguous", "mean", -100, 0.2, {"block_size": 32}),
        ((6, 70), "contiguous", "mean", -100, 0.2, {"inplace_backward": True}),
    ]
    for shape, layout, red, ig, frac, kw in specs:
        label = f"{'x'.join(map(str, shape))} {layout} reduction={red} ignore_index={ig}" + "".join(
            f" {k}={v}" for k, v in kw.items()
        )

        def ce(gen, dev, dt, shape=shape, layout=layout, red=red, ig=ig, frac=frac, kw=kw):
            x = _x(gen, shape, dev, dt, layout, 3.0)
            t = _targets(gen, shape[:-1], shape[-1], dev, frac, ig)
            if kw.get("inplace_backward"):  # the logits must be an intermediate: overwritten
                return (
                    (x, t),
                    (lambda x, t: cross_entropy(x * 1.0, t, red, ig, **kw)),
                    (lambda x, t: ref.cross_entropy(x, t, red, ig)),
                )
            return (
                (x, t),
                (lambda x, t: cross_entropy(x, t, red, ig, **kw)),
                (lambda x, t: ref.cross_entropy(x, t, red, ig)),
            )

        out.append(Case("cross_entropy", label, ce))

    lin = [
        ((7, 16), 37, True, "mean", 0.3, 3, None, "contiguous"),
        ((5, 24), 128, False, "sum", 0.0, 2, None, "contiguous"),
        ((2, 3, 16), 100, True, "mean", 0.2, 4, 32, "contiguous"),
        ((6, 20), 50, False, "mean", 0.2, 4, None, "transposed"),
    ]  # hidden and weight transposed views
    for hshape, v, has_bias, red, frac, chunk, bs, layout in lin:
        label = (
            f"hidden {'x'.join(map(str, hshape))} V={v} bias={has_bias} reduction={red} chunk_rows={chunk}"
            + (f" block_size={bs}" if bs else "")
            + f" {layout}"
        )

        def lce(
            gen, dev, dt, hshape=hshape, v=v, has_bias=has_bias, red=red, frac=frac, chunk=chunk, bs=bs, layout=layout
        ):
            d = hshape[-1]
            h = _x(gen, hshape, dev, dt, layout)
            w = _x(gen, (v, d), dev, dt, layout, 1 / math.sqrt(d))
            b = _leaf(gen, (v,), dev, dt) if has_bias else None
            t = _targets(gen, hshape[:-1], v, dev, frac)
            inputs = (h, w, t) + ((b,) if has_bias else ())
            return (
                inputs,
                (
                    lambda h, w, t, b=None: linear_cross_entropy(
                        h, w, t, b, reduction=red, chunk_rows=chunk, block_size=bs
                    )
                ),
                (lambda h, w, t, b=None: ref.linear_cross_entropy(h, w, t, b, reduction=red)),
            )

        out.append(Case("linear_cross_entropy", label, lce))
    return out


def cases(kernels: list[str] | None = None) -> list[Case]:
    found = _norm_cases() + _elementwise_cases() + _softmax_cases() + _ce_cases()
    return [c for c in found if kernels is None or c.kernel in kernels]


@contextlib.contextmanager
def poisoned():
    """Within it, ``torch.empty`` / ``torch.empty_like`` (what the kernel wrappers allocate their
    outputs and gradients with) return tensors filled with NaN (floats) or -7 (integers), so that an
    element a kernel fails to write shows as a NaN mismatch instead of passing on recycled memory."""
    empty, empty_like = torch.empty, torch.empty_like

    def fill(t):
        if t.numel():
            t.fill_(math.nan if t.is_floating_point() else -7)
        return t

    torch.empty = lambda *a, **k: fill(empty(*a, **k))  # type: ignore[assignment]
    torch.empty_like = lambda *a, **k: fill(empty_like(*a, **k))  # type: ignore[assignment]
    try:
        yield
    finally:
        torch.empty, torch.empty_like = empty, empty_like


def _as64(t):
    if isinstance(t, torch.Tensor) and t.is_floating_point():
        return t.detach().double().requires_grad_(t.requires_grad)
    return t


def _grad_inputs(inputs):
    return [t for t in inputs if isinstance(t, torch.Tensor) and t.requires_grad]


def _run(fn, inputs, g):
    out = fn(*inputs)
    grads = torch.autograd.grad(out, _grad_inputs(inputs), g.to(out.dtype))
    return out.detach(), [x.detach() for x in grads]


def _err(got, want, atol, rtol) -> dict[str, Any]:
    got, want = got.double(), want.double()
    diff = (got - want).abs()
    bound = atol + rtol * want.abs()
    nan_mismatch = bool((torch.isnan(got) != torch.isnan(want)).any())
    return {
        "max_abs_err": float(diff.max()) if diff.numel() else 0.0,
        "max_rel_err": float((diff / want.abs().clamp_min(1e-30)).max()) if diff.numel() else 0.0,
        "frac_outside": float((diff > bound).double().mean()) if diff.numel() else 0.0,
        "ref_max_abs": float(want.abs().max()) if want.numel() else 0.0,
        "passed": bool((diff <= bound).all()) and not nan_mismatch,
    }


def run_case(
    case: Case, device: str | torch.device = "cpu", dtype: torch.dtype = torch.float32, seed: int = 0
) -> dict[str, Any]:
    """One case: the Triton function, eager in ``dtype`` and eager in float64 on the same values."""
    t0 = time.perf_counter()
    device = torch.device(device)
    gen = torch.Generator().manual_seed(seed)
    atol, rtol = TOLERANCES[case.kernel][dtype]
    row: dict[str, Any] = {
        "kernel": case.kernel,
        "case": case.label,
        "dtype": str(dtype).replace("torch.", ""),
        "device": device.type,
        "atol": atol,
        "rtol": rtol,
    }
    precision = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("highest")  # no TF32 in the fp32 matmuls of the linear cross-entropy
    try:
        inputs, fn, eager = case.make(gen, device, dtype)
        inputs64 = tuple(_as64(t) for t in inputs)
        with torch.no_grad():
            out_shape = eager(*inputs64).shape
        g = _randn(gen, out_shape, device, torch.float64)
        want, want_grads = _run(eager, inputs64, g)
        with poisoned():  # unwritten output elements show as NaN
            got, got_grads = _run(fn, inputs, g)
        base, base_grads = _run(eager, inputs, g)
        names = ["output"] + [
            f"grad[{i}]" for i, t in enumerate(inputs) if isinstance(t, torch.Tensor) and t.requires_grad
        ]
        checks = {}
        for name, a, b, w in zip(names, [got] + got_grads, [base] + base_grads, [want] + want_grads):
            if a.shape != w.shape:
                checks[name] = {"passed": False, "error": f"shape {tuple(a.shape)} != {tuple(w.shape)}"}
                continue
            r = _err(a, w, atol, rtol)
            r["eager_max_abs_err"] = _err(b, w, atol, rtol)["max_abs_err"]
            checks[name] = r
        row["checks"] = checks
        row["passed"] = all(c["passed"] for c in checks.values())
    except Exception as exc:  # noqa: BLE001 - a failing kernel is a result, reported with its error
        row["passed"] = False
        row["error"] = f"{type(exc).__name__}: {exc}"
    finally:
        torch.set_float32_matmul_precision(precision)
    row["seconds"] = round(time.perf_counter() - t0, 3)
    return row


def check_all(
    device: str | torch.device = "cpu", dtype: torch.dtype = torch.float32, kernels: list[str] | None = None
) -> list[dict[str, Any]]:
    return [run_case(c, device, dtype) for c in cases(kernels)]
