"""FLOPs and bytes of one op call from its input shapes and dtypes. Each formula returns
``(flops, bytes, reason)``; where the shapes recorded cannot determine the work, flops/bytes are NaN and
``reason`` says why. Conventions: a multiply-add is 2 FLOPs; an elementwise or transcendental function
is 1 FLOP per output element (fvcore's convention); bytes are each input read once plus the output
written once (the minimum traffic, what the roofline needs): an in-place op reads and writes its
tensor, an ``out=`` buffer is written and not read, a fill writes and reads nothing."""
from __future__ import annotations

import math
from typing import Callable

NAN = float("nan")
DTYPE_BYTES = {
    "float": 4, "double": 8, "c10::Half": 2, "c10::BFloat16": 2, "half": 2, "bfloat16": 2,
    "c10::Float8_e4m3fn": 1, "c10::Float8_e5m2": 1, "c10::Float8_e4m3fnuz": 1, "c10::Float8_e5m2fnuz": 1,
    "int": 4, "long int": 8, "long": 8, "short int": 2, "signed char": 1, "unsigned char": 1, "bool": 1,
    "c10::complex<float>": 8, "c10::complex<double>": 16,
}
Result = tuple[float, float, str]


def numel(shape) -> int:
    return int(math.prod(shape)) if shape else 1


def broadcast(*shapes) -> list[int] | None:
    """NumPy broadcasting of shapes; None when they do not broadcast."""
    ndim = max(len(s) for s in shapes)
    out = []
    for i in range(ndim):
        dims = {s[len(s) - ndim + i] for s in shapes if len(s) - ndim + i >= 0} - {1}
        if len(dims) > 1:
            return None
        out.append(dims.pop() if dims else 1)
    return out


def _matmul(a, b, esize, extra_out_flops=0) -> Result:
    if len(a) < 1 or len(b) < 1:
        return NAN, NAN, "matmul operand without dimensions"
    a2 = [1] + list(a) if len(a) == 1 else list(a)
    b2 = list(b) + [1] if len(b) == 1 else list(b)
    if a2[-1] != b2[-2]:
        return NAN, NAN, f"inner dimensions differ: {a} @ {b}"
    batch = broadcast(a2[:-2], b2[:-2])
    if batch is None:
        return NAN, NAN, f"batch dimensions do not broadcast: {a} @ {b}"
    m, k, n = a2[-2], a2[-1], b2[-1]
    calls = numel(batch)
    flops = 2.0 * calls * m * k * n + extra_out_flops * calls * m * n
    return flops, float(esize * (numel(a) + numel(b) + calls * m * n)), ""


def mm(shapes, esize) -> Result:
    return _matmul(shapes[0], shapes[1], esize)


def addmm(shapes, esize) -> Result:  # bias, a, b
    f, b, r = _matmul(shapes[1], shapes[2], esize, extra_out_flops=1)
    return f, b + esize * numel(shapes[0]), r


def linear(shapes, esize) -> Result:  # input [..., K], weight [N, K], bias [N]?
    x, w = shapes[0], shapes[1]
    if len(w) != 2 or not x or x[-1] != w[1]:
        return NAN, NAN, f"linear shapes do not fit: input {x}, weight {w}"
    bias = len(shapes) > 2 and bool(shapes[2])
    rows = numel(x[:-1])
    flops = 2.0 * rows * w[1] * w[0] + (rows * w[0] if bias else 0)
    return flops, float(esize * (numel(x) + numel(w) + rows * w[0] + (w[0] if bias else 0))), ""


def elementwise(shapes, esize, reads: int | None = None) -> Result:
    """``reads``: how many leading tensor arguments the op reads (its arity); a tensor argument past
    them is an ``out=`` buffer, written, not read. None: every tensor argument is read."""
    tensors = [s for s in shapes if s]
    if not tensors:
        return NAN, NAN, "no tensor input shapes recorded"
    read = tensors if reads is None else tensors[:reads]
    out = broadcast(*read) if read else tensors[0]
    if out is None:
        return NAN, NAN, f"input shapes do not broadcast: {tensors}"
    return float(numel(out)), float(esize * (sum(numel(s) for s in read) + numel(out))), ""


def fill(shapes, esize) -> Result:
    """``fill_`` / ``zero_``: writes every element of its tensor once, reads nothing (the fill value
    is a scalar or a one-element tensor) and does no arithmetic."""
    x = shapes[0] if shapes else []
    return (0.0, float(esize * numel(x)), "") if x else (NAN, NAN, "no input shape recorded")


def _arity(n: int) -> Callable[[list, int], Result]:
    def formula(shapes, esize) -> Result:
        return elementwise(shapes, esize, reads=n)
    formula.__name__ = f"elementwise_{n}"
    return formula


def reduction(shapes, esize) -> Result:
    x = shapes[0]
    if not x:
        return NAN, NAN, "no input shape recorded"
    # one add/compare per input element; the (smaller) output write is not counted: its size needs the dims
    return float(numel(x)), float(esize * numel(x)), ""


def softmax(shapes, esize) -> Result:  # max, subtract, exp, sum, divide
    x = shapes[0]
    return (5.0 * numel(x), float(2 * esize * numel(x)), "") if x else (NAN, NAN, "no input shape recorded")


def norm(shapes, esize) -> Result:  # mean, variance, normalise, scale, shift: ~8 per element
    x = shapes[0]
    if not x:
        return NAN, NAN, "no input shape recorded"
    params = sum(numel(s) for s in shapes[1:] if s and len(s) == 1)
    return 8.0 * numel(x), float(esize * (2 * numel(x) + params)), ""


def sdpa(shapes, esize) -> Result:  # q [..., L, E], k [..., S, E], v [..., S, Ev]
    q, k, v = shapes[0], shapes[1], shapes[2]
    if len(q) < 2 or len(k) < 2 or len(v) < 2 or q[-1] != k[-1] or k[-2] != v[-2]:
        return NAN, NAN, f"attention shapes do not fit: q {q}, k {k}, v {v}"
    batch = broadcast(q[:-2], k[:-2], v[:-2])
    if batch is None:
        return NAN, NAN, "attention batch dimensions do not broadcast"
    b, L, S, E, Ev = numel(batch), q[-2], k[-2], q[-1], v[-1]
    flops = 2.0 * b * L * S * E + 2.0 * b * L * S * Ev + 5.0 * b * L * S  # QK^T, PV, softmax; non-causal
    return flops, float(esize * (numel(q) + numel(k) + numel(v) + b * L * Ev)), "counted without a causal mask"


def conv(shapes, esize) -> Result:
    return NAN, NAN, "convolution output size needs stride/padding/dilation, which the trace does not record"


# elementwise ops by the tensors they read (their arity); a further tensor argument is an out= buffer
UNARY = ("relu", "gelu", "silu", "sigmoid", "tanh", "exp", "log", "neg", "abs", "sqrt", "rsqrt", "clamp",
         "reciprocal", "sin", "cos", "hardtanh", "leaky_relu", "mish")
BINARY = ("add", "sub", "mul", "div", "pow", "maximum", "minimum", "threshold_backward", "gelu_backward",
          "silu_backward", "sigmoid_backward", "tanh_backward")
TERNARY = ("where", "addcmul", "addcdiv", "lerp")
ELEMENTWISE = UNARY + BINARY + TERNARY
FILLS = ("fill_", "zero_")
FORMULAS: dict[str, Callable[[list, int], Result]] = {
    "aten::mm": mm, "aten::bmm": mm, "aten::matmul": mm, "aten::addmm": addmm, "aten::baddbmm": addmm,
    "aten::linear": linear,
    "aten::sum": reduction, "aten::mean": reduction, "aten::amax": reduction, "aten::amin": reduction,
    "aten::max": reduction, "aten::min": reduction, "aten::prod": reduction, "aten::norm": reduction,
    "aten::softmax": softmax, "aten::_softmax": softmax, "aten::log_softmax": softmax,
    "aten::_log_softmax": softmax,
    "aten::layer_norm": norm, "aten::native_layer_norm": norm, "aten::batch_norm": norm,
    "aten::native_batch_norm": norm, "aten::_batch_norm_impl_index": norm, "aten::cudnn_batch_norm": norm,
    "aten::group_norm": norm, "aten::native_group_norm": norm, "aten::rms_norm": norm, "aten::_fused_rms_norm": norm,
    "aten::scaled_dot_product_attention": sdpa, "aten::_scaled_dot_product_flash_attention": sdpa,
    "aten::_scaled_dot_product_efficient_attention": sdpa, "aten::_scaled_dot_product_cudnn_attention": sdpa,
    "aten::_scaled_dot_product_flash_attention_for_cpu": sdpa,
    "aten::conv1d": conv, "aten::conv2d": conv, "aten::conv3d": conv, "aten::convolution": conv,
    "aten::_convolution": conv, "aten::cudnn_convolution": conv, "aten::mkldnn_convolution": conv,
}
for _ops, _reads in ((UNARY, 1), (BINARY, 2), (TERNARY, 3)):
    for _op in _ops:
        FORMULAS[f"aten::{_op}"] = _arity(_reads)
        FORMULAS[f"aten::{_op}_"] = _arity(_reads)   # in place: reads self and writes it back
for _op in FILLS:
    FORMULAS[f"aten::{_op}"] = fill
