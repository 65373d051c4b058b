"""What ``autocast_bf16`` and ``autocast_fp16`` share: the transform (``torch.autocast`` around the call)
and the recogniser (matrix-heavy fp32 work: GEMM/convolution time dominates the run, and its matmuls are
large enough that the casts autocast adds each call are paid back).

Autocast casts every fp32 operand of a matmul to the lower precision on each call (one pass over it) and
then runs the matmul at about twice the rate (tensor cores, AVX512-BF16/AMX).  A matmul uses each operand
element min(M, N) times, so a small-batch GEMM (``Linear`` on 64 rows) spends on casting about what it
saves: such matmuls are not counted (``_patterns.AUTOCAST_MIN_REUSE``).
"""

from __future__ import annotations

from typing import Any

from workbench.fixes import _patterns as P
from workbench.fixes.fix import Site, absent, applies, not_applicable

MIN_SHARE_PCT = 50.0  # "dominates": this share of op (CPU) / computation-kernel (GPU) time in fp32 matrix work
RULES = ("matrix_kernels_dominate", "cpu_compute_bound_ops", "fp32_matmul_without_tf32", "launch_queue_full")


def transform(dtype_name: str, device_types: tuple[str, ...]):
    def build(fn, context, name):
        import torch

        from workbench.variants.spec import Variant

        dtype = getattr(torch, dtype_name)
        devices = tuple(d for d in device_types if d != "cuda" or torch.cuda.is_available()) or device_types

        def with_autocast(*args, **kwargs):
            if len(devices) == 1:
                with torch.autocast(devices[0], dtype=dtype):
                    out = fn(*args, **kwargs)
            else:
                with torch.autocast(devices[0], dtype=dtype), torch.autocast(devices[1], dtype=dtype):
                    out = fn(*args, **kwargs)
            return _as_float32(out, dtype)

        with_autocast.__wrapped__ = fn  # type: ignore[attr-defined]
        return Variant(
            name=name,
            fn=with_autocast,
            requires=("cuda",) if device_types == ("cuda",) else (),
            kind="setting",
            numerical_class="reduced precision",
            description=f"torch.autocast({', '.join(repr(d) for d in devices)}, dtype=torch.{dtype_name}) "
            f"around the call, {dtype_name} outputs cast back to float32",
        )

    return build


def _as_float32(out: Any, dtype: Any) -> Any:
    """The call's output with the tensors autocast left in ``dtype`` cast back to float32 (the dtype the
    fp32 code returns): callers, and the comparison, get the output type they had."""
    import torch

    if isinstance(out, torch.Tensor):
        return out.float() if out.dtype == dtype else out
    if isinstance(out, tuple) and hasattr(out, "_fields"):
        return type(out)(*(_as_float32(x, dtype) for x in out))
    if isinstance(out, (list, tuple)):
        return type(out)(_as_float32(x, dtype) for x in out)
    if isinstance(out, dict):
        return type(out)((k, _as_float32(v, dtype)) for k, v in out.items())
    return out


def _cpu_bf16() -> str | None:
    """Why this CPU cannot run bf16 matmuls natively, or None."""
    try:
        import torch

        if not torch.backends.mkldnn.is_available():
            return "torch was built without oneDNN (mkldnn): its bf16 matmuls on the CPU would be emulated"
        if not torch.ops.mkldnn._is_mkldnn_bf16_supported():
            return (
                "this CPU has no native bf16 matrix instructions (AVX512-BF16 or AMX): bf16 matmuls would be "
                "emulated, slower than fp32"
            )
    except Exception:  # noqa: BLE001 - an unknown build: not judged here
        return None
    return None


def recognise(fix: Any, context: Any, dtype_name: str) -> Any:
    name = fix.name
    hyps = context.hypotheses_for(fix)
    mt = P.matrix_time(context)
    if mt is None:
        return absent(name, "no traced ops to read: autocast is recognised where fp32 matrix work dominated a run")
    where = "kernel" if mt.device == "cuda" else "op"
    fp32 = mt.share(dtype="float32")
    if fp32 < MIN_SHARE_PCT:
        lower = mt.share(dtype=dtype_name) + mt.share(dtype="float16" if dtype_name == "bfloat16" else "bfloat16")
        if lower >= MIN_SHARE_PCT:
            return absent(name, f"the matrix work already runs in lower precision ({lower:.0f}% of the {where} time)")
        return absent(
            name,
            f"fp32 matrix work takes {fp32:.0f}% of the {where} time (under {MIN_SHARE_PCT:.0f}%): it does not dominate",
        )
    big = mt.share(dtype="float32", min_reuse=P.AUTOCAST_MIN_REUSE)
    if big < MIN_SHARE_PCT:
        small = [r["reuse"] for r in mt.rows if r["dtype"] == "float32" and r["reuse"] is not None]
        return absent(
            name,
            f"fp32 matrix work takes {fp32:.0f}% of the {where} time, but its matmuls are small (each operand "
            f"element used only {min(small) if small else '?'} times): the casts autocast adds on each call "
            f"would cost about what {dtype_name} saves",
        )
    what = (
        f"fp32 matrix work takes {fp32:.0f}% of the {where} time ({mt.per_call_ms(dtype='float32'):.3g} ms a call: "
        f"{mt.top(dtype='float32')})"
    )
    sites = (Site("torch.autocast", "setting", f"around the call, dtype=torch.{dtype_name}"),)
    kw = {"hypotheses": P.titles(hyps), "stake_ms": P.stake(hyps)}
    short = "bf16" if dtype_name == "bfloat16" else "fp16"
    if mt.device == "cuda" or context.cuda:
        cc = P.compute_capability(context)
        need = 8 if dtype_name == "bfloat16" else 7
        if cc is not None and cc[0] < need:
            return not_applicable(
                name,
                f"the GPU (compute capability {cc[0]}.{cc[1]}) has no {short} tensor cores ({need}.0 or newer)",
                **kw,
            )
        if not _cuda_here():
            return not_applicable(
                name, f"no CUDA device here: the run's matrix work ran on a GPU ({what})", sites, **kw
            )
    elif dtype_name == "float16":
        return not_applicable(
            name, f"no CUDA device: fp16 autocast is for GPU tensor cores; here {what} on the CPU", sites, **kw
        )
    else:
        why = _cpu_bf16()
        if why is not None:
            return not_applicable(name, why, sites, **kw)
    scaler = ""
    if dtype_name == "float16" and _runs_backward(context):
        scaler = (
            "; the call runs its own backward, with no GradScaler: fp16 gradients may underflow (the check judges it)"
        )
    return applies(
        name,
        f"{what}; autocast runs it in {dtype_name} (reduced precision: ~{3 if short == 'bf16' else 4} significant "
        f"digits){scaler}",
        sites,
        **kw,
    )


def _cuda_here() -> bool:
    try:
        import torch

        return bool(torch.cuda.is_available())
    except Exception:  # noqa: BLE001
        return False


def _runs_backward(context: Any) -> bool:
    return any(n.startswith("autograd::engine") or "Backward" in n for n in context.op_counts)
