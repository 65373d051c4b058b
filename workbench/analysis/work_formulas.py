"""FLOPs and bytes of one op call from its input shapes and dtypes. Each formula returns
``(flops, bytes, reason)``; where the shapes recorded cannot determine the work, flops/bytes are NaN and
``reason`` says why. Conventions: a multiply-add is 2 FLOPs; an elementwise or transcendental function
is 1 FLOP per output element (fvcore's convention); bytes are each input read once plus the output
written once (the minimum traffic, what the roofline needs): an in-place op reads and writes its
tensor, an ``out=`` buffer is written and not read, a fill writes and reads nothing."""

from __future__ import annotations

import json
import math
from typing import Callable

NAN = float("nan")
DTYPE_BYTES = {
    "float": 4,
    "double": 8,
    "c10::Half": 2,
    "c10::BFloat16": 2,
    "half": 2,
    "bfloat16": 2,
    "c10::Float8_e4m3fn": 1,
    "c10::Float8_e5m2": 1,
    "c10::Float8_e4m3fnuz": 1,
    "c10::Float8_e5m2fnuz": 1,
    "int": 4,
    "long int": 8,
    "long": 8,
    "short int": 2,
    "signed char": 1,
    "unsigned char": 1,
    "bool": 1,
    "c10::complex<float>": 8,
    "c10::complex<double>": 16,
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


# Where each convolution op's scalar arguments sit in its recorded inputs (the profiler's "Concrete
# Inputs"): stride, padding, dilation, groups, and for ``convolution``/``_convolution`` transposed and
# output_padding. ``mkldnn_convolution`` and ``cudnn_convolution`` take padding before stride.
CONV_ARGS: dict[str, dict[str, int]] = {
    "aten::conv1d": {"stride": 3, "padding": 4, "dilation": 5, "groups": 6},
    "aten::conv2d": {"stride": 3, "padding": 4, "dilation": 5, "groups": 6},
    "aten::conv3d": {"stride": 3, "padding": 4, "dilation": 5, "groups": 6},
    "aten::convolution": {"stride": 3, "padding": 4, "dilation": 5, "transposed": 6, "output_padding": 7, "groups": 8},
    "aten::_convolution": {"stride": 3, "padding": 4, "dilation": 5, "transposed": 6, "output_padding": 7, "groups": 8},
    "aten::mkldnn_convolution": {"padding": 3, "stride": 4, "dilation": 5, "groups": 6},
    "aten::cudnn_convolution": {"padding": 2, "stride": 3, "dilation": 4, "groups": 5},
}
# convolution_backward(grad_output, input, weight, bias_sizes, stride, padding, dilation, transposed,
#                      output_padding, groups, output_mask)
CONV_BACKWARD_ARGS = {"bias_sizes": 3, "transposed": 7, "output_mask": 10}


def _concrete(concrete, index: int):
    """The value of one recorded scalar argument (text such as "[2, 2]", "1", "False", "same"), parsed;
    None where it was not recorded."""
    if not concrete or index >= len(concrete):
        return None
    text = concrete[index]
    if not isinstance(text, str):
        return text
    text = text.strip()
    if text == "":
        return None
    if text in ("True", "False"):
        return text == "True"
    try:
        return json.loads(text.replace("True", "true").replace("False", "false"))
    except ValueError:
        return text.strip("'\"")


def _per_dim(value, n: int) -> list[int] | None:
    if isinstance(value, int) and not isinstance(value, bool):
        return [value] * n
    if isinstance(value, list) and value and all(isinstance(v, int) for v in value):
        return value * n if len(value) == 1 else (value if len(value) == n else None)
    return None


def _conv_out_spatial(spatial, kernel, args: dict, transposed: bool) -> list[int] | None:
    """Output spatial sizes from the input's, the kernel's and the recorded stride/padding/dilation
    (``torch.nn.Conv*d`` / ``ConvTranspose*d`` formulas); None where an argument was not recorded."""
    n = len(spatial)
    stride, dilation = _per_dim(args.get("stride"), n), _per_dim(args.get("dilation"), n)
    padding = args.get("padding")
    if stride is None or dilation is None or padding is None:
        return None
    if padding == "same":
        return list(spatial)
    pad = [0] * n if padding == "valid" else _per_dim(padding, n)
    if pad is None:
        return None
    if transposed:
        extra = _per_dim(args.get("output_padding", 0), n)
        if extra is None:
            return None
        return [
            (i - 1) * s - 2 * p + d * (k - 1) + e + 1
            for i, k, s, p, d, e in zip(spatial, kernel, stride, pad, dilation, extra)
        ]
    return [(i + 2 * p - d * (k - 1) - 1) // s + 1 for i, k, s, p, d in zip(spatial, kernel, stride, pad, dilation)]


def _conv_macs(batch: int, c_in: int, in_spatial, c_out: int, out_spatial, weight, transposed: bool) -> float:
    """Multiply-adds of a convolution: each output element of a direct convolution sums
    ``C_in/groups x kernel`` products (the weight's dims after the first); a transposed convolution
    spreads each input element over ``C_out/groups x kernel`` outputs, the same count seen from the input."""
    per = numel(weight[1:])
    if transposed:
        return float(batch * c_in * numel(in_spatial) * per)
    return float(batch * c_out * numel(out_spatial) * per)


def conv_forward(shapes, esize, concrete=None, arg_index: dict[str, int] | None = None) -> Result:
    """A forward convolution: input [N, C_in, *spatial], weight [C_out, C_in/groups, *kernel]
    (transposed: [C_in, C_out/groups, *kernel]), bias [C_out]? FLOPs 2 per multiply-add plus the bias
    add per output element; bytes input + weight + bias read, output written. The output size needs
    stride, padding and dilation, read from the recorded scalar arguments."""
    x, w = shapes[0], shapes[1]
    if len(x) < 3 or len(w) != len(x):
        return NAN, NAN, f"convolution shapes do not fit: input {x}, weight {w}"
    bias = len(shapes) > 2 and bool(shapes[2])
    args = {key: _concrete(concrete, i) for key, i in (arg_index or {}).items()}
    transposed = bool(args.get("transposed") or False)
    groups = args.get("groups") if isinstance(args.get("groups"), int) else None
    out_spatial = _conv_out_spatial(x[2:], w[2:], args, transposed)
    if out_spatial is None or groups is None:
        return (
            NAN,
            NAN,
            (
                "convolution output size needs stride/padding/dilation/groups, which the trace did not "
                "record for this op (its backward, aten::convolution_backward, is counted from shapes)"
            ),
        )
    if min(out_spatial) <= 0:
        return NAN, NAN, f"convolution output size {out_spatial} from input {x}, weight {w} is not positive"
    c_out = w[1] * groups if transposed else w[0]
    if (w[0] if transposed else w[1] * groups) != x[1]:
        return NAN, NAN, f"convolution channels do not fit: input {x}, weight {w}, groups {groups}"
    out = [x[0], c_out, *out_spatial]
    macs = _conv_macs(x[0], x[1], x[2:], c_out, out_spatial, w, transposed)
    flops = 2.0 * macs + (numel(out) if bias else 0)
    return flops, float(esize * (numel(x) + numel(w) + (c_out if bias else 0) + numel(out))), ""


def conv_backward(shapes, esize, concrete=None) -> Result:
    """``aten::convolution_backward(grad_output, input, weight, ...)``: grad_input and grad_weight each
    cost the forward's multiply-adds (a convolution of grad_output with the weight, and of grad_output
    with the input), grad_bias one add per grad_output element. Which of the three it computed is its
    ``output_mask``; where that was not recorded, grad_input and grad_weight are counted (the reason
    says so), and the bias gradient too when ``bias_sizes`` was recorded. The output size is
    grad_output's, so no stride or padding is needed. Bytes: grad_output, input and weight read; each
    gradient computed written."""
    grad_out, x, w = shapes[0], shapes[1], shapes[2]
    if len(x) < 3 or len(w) != len(x) or len(grad_out) != len(x) or grad_out[0] != x[0]:
        return NAN, NAN, f"convolution backward shapes do not fit: grad_output {grad_out}, input {x}, weight {w}"
    transposed_arg = _concrete(concrete, CONV_BACKWARD_ARGS["transposed"])
    direct_fits, transposed_fits = w[0] == grad_out[1], w[0] == x[1]
    if isinstance(transposed_arg, bool):
        transposed = transposed_arg
    elif direct_fits and transposed_fits and numel(grad_out[2:]) != numel(x[2:]):
        return (
            NAN,
            NAN,
            (
                f"cannot tell a transposed convolution from a direct one by the shapes (grad_output "
                f"{grad_out}, input {x}, weight {w}) and its 'transposed' argument was not recorded"
            ),
        )
    else:
        transposed = not direct_fits and transposed_fits
    if not (transposed_fits if transposed else direct_fits):
        return NAN, NAN, f"convolution backward channels do not fit: grad_output {grad_out}, input {x}, weight {w}"
    macs = _conv_macs(x[0], x[1], x[2:], grad_out[1], grad_out[2:], w, transposed)
    mask = _concrete(concrete, CONV_BACKWARD_ARGS["output_mask"])
    reason = ""
    if not (isinstance(mask, list) and len(mask) == 3 and all(isinstance(m, bool) for m in mask)):
        bias_sizes = _concrete(concrete, CONV_BACKWARD_ARGS["bias_sizes"])
        mask = [True, True, isinstance(bias_sizes, list) and bool(bias_sizes)]
        reason = "output_mask not recorded: counted grad_input and grad_weight" + (" and grad_bias" if mask[2] else "")
    grad_input, grad_weight, grad_bias = mask
    flops = 2.0 * macs * (int(grad_input) + int(grad_weight)) + (numel(grad_out) if grad_bias else 0)
    nbytes = esize * (
        numel(grad_out)
        + numel(x)
        + numel(w)
        + (numel(x) if grad_input else 0)
        + (numel(w) if grad_weight else 0)
        + (grad_out[1] if grad_bias else 0)
    )
    return flops, float(nbytes), reason


def _conv(name: str) -> Callable[..., Result]:
    index = CONV_ARGS[name]

    def formula(shapes, esize, concrete=None) -> Result:
        return conv_forward(shapes, esize, concrete, index)

    formula.__name__ = f"conv_{name.removeprefix('aten::')}"
    return formula


# elementwise ops by the tensors they read (their arity); a further tensor argument is an out= buffer
UNARY = (
    "relu",
    "gelu",
    "silu",
    "sigmoid",
    "tanh",
    "exp",
    "log",
    "neg",
    "abs",
    "sqrt",
    "rsqrt",
    "clamp",
    "reciprocal",
    "sin",
    "cos",
    "hardtanh",
    "leaky_relu",
    "mish",
)
BINARY = (
    "add",
    "sub",
    "mul",
    "div",
    "pow",
    "maximum",
    "minimum",
    "threshold_backward",
    "gelu_backward",
    "silu_backward",
    "sigmoid_backward",
    "tanh_backward",
)
TERNARY = ("where", "addcmul", "addcdiv", "lerp")
ELEMENTWISE = UNARY + BINARY + TERNARY
FILLS = ("fill_", "zero_")
# (shapes, esize) -> Result; those in TAKES_CONCRETE also take the recorded scalar arguments
FORMULAS: dict[str, Callable[..., Result]] = {
    "aten::mm": mm,
    "aten::bmm": mm,
    "aten::matmul": mm,
    "aten::addmm": addmm,
    "aten::baddbmm": addmm,
    "aten::linear": linear,
    "aten::sum": reduction,
    "aten::mean": reduction,
    "aten::amax": reduction,
    "aten::amin": reduction,
    "aten::max": reduction,
    "aten::min": reduction,
    "aten::prod": reduction,
    "aten::norm": reduction,
    "aten::softmax": softmax,
    "aten::_softmax": softmax,
    "aten::log_softmax": softmax,
    "aten::_log_softmax": softmax,
    "aten::layer_norm": norm,
    "aten::native_layer_norm": norm,
    "aten::batch_norm": norm,
    "aten::native_batch_norm": norm,
    "aten::_batch_norm_impl_index": norm,
    "aten::cudnn_batch_norm": norm,
    "aten::group_norm": norm,
    "aten::native_group_norm": norm,
    "aten::rms_norm": norm,
    "aten::_fused_rms_norm": norm,
    "aten::scaled_dot_product_attention": sdpa,
    "aten::_scaled_dot_product_flash_attention": sdpa,
    "aten::_scaled_dot_product_efficient_attention": sdpa,
    "aten::_scaled_dot_product_cudnn_attention": sdpa,
    "aten::_scaled_dot_product_flash_attention_for_cpu": sdpa,
    "aten::convolution_backward": conv_backward,
}
FORMULAS.update({name: _conv(name) for name in CONV_ARGS})
# formulas that also read the op's recorded scalar arguments (``concrete=``: the "Concrete Inputs" texts)
TAKES_CONCRETE = frozenset(CONV_ARGS) | {"aten::convolution_backward"}
for _ops, _reads in ((UNARY, 1), (BINARY, 2), (TERNARY, 3)):
    for _op in _ops:
        FORMULAS[f"aten::{_op}"] = _arity(_reads)
        FORMULAS[f"aten::{_op}_"] = _arity(_reads)  # in place: reads self and writes it back
for _op in FILLS:
    FORMULAS[f"aten::{_op}"] = fill
