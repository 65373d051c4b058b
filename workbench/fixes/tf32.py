"""``tf32``: fp32 matmuls (and cuDNN convolutions) on TF32 tensor cores, for the call only.

Recognised where fp32 GEMMs took a real share of the run (trace ops ``aten::mm/addmm/bmm/matmul/linear``
with float32 inputs, or their kernels on a GPU; convolutions too where ``cudnn.allow_tf32`` is off), or the
``fp32_matmul_without_tf32`` rule fired.  On a CPU run with that pattern the row says "not applicable: no
CUDA device"; on a GPU older than Ampere (no TF32 units) likewise with the compute capability.

The transform sets ``torch.backends.cuda.matmul.allow_tf32`` and ``torch.backends.cudnn.allow_tf32`` on
for the call and puts them (and ``torch.get_float32_matmul_precision()``, which the first one moves) back
in a ``finally``: nothing global outlives the call, so the comparison's state guard sees no leak.
Numerics: reduced precision (a 10-bit mantissa in the products; fp32 accumulation).
"""

from __future__ import annotations

from workbench.fixes import _patterns as P
from workbench.fixes.fix import Fix, Site, absent, applies, not_applicable

NAME = "tf32"
MIN_SHARE_PCT = 10.0  # of the op (CPU) or computation-kernel (GPU) time in fp32 matmuls
RULES = ("fp32_matmul_without_tf32",)
# TF32 rounds the products' inputs to a 10-bit mantissa (unit roundoff 2**-11, as float16)
TOLERANCE = (5e-3, 1e-3)


def _transform(fn, context, name):
    import torch

    from workbench.variants.spec import Variant

    def with_tf32(*args, **kwargs):
        b = torch.backends
        saved = (b.cuda.matmul.allow_tf32, b.cudnn.allow_tf32, torch.get_float32_matmul_precision())
        b.cuda.matmul.allow_tf32 = True
        b.cudnn.allow_tf32 = True
        try:
            return fn(*args, **kwargs)
        finally:
            b.cuda.matmul.allow_tf32 = saved[0]
            b.cudnn.allow_tf32 = saved[1]
            torch.set_float32_matmul_precision(saved[2])

    with_tf32.__wrapped__ = fn  # type: ignore[attr-defined]
    return Variant(
        name=name,
        fn=with_tf32,
        requires=("cuda",),
        kind="setting",
        numerical_class="reduced precision",
        description="allow_tf32 on (cuBLAS matmuls and cuDNN convolutions) during the call, restored after",
    )


def _conv_tf32_off() -> bool:
    try:
        import torch

        return not torch.backends.cudnn.allow_tf32
    except Exception:  # noqa: BLE001
        return False


def recognise(context):
    from workbench.fixes.registry import get

    hyps = context.hypotheses_for(get(NAME))
    mt = P.matrix_time(context)
    if mt is None and not hyps:
        return absent(NAME, "no traced ops to read: TF32 is recognised where fp32 matmuls ran")
    gemm_us = mt.us(dtype="float32", gemm_only=True, exclude_tf32=True) if mt is not None else 0.0
    conv_us = 0.0
    if mt is not None and _conv_tf32_off():
        conv_us = sum(r["us"] for r in mt.rows if r["kind"] == "conv" and r["dtype"] == "float32")
    share = 100.0 * (gemm_us + conv_us) / mt.total_us if mt is not None and mt.total_us > 0 else 0.0
    if share < MIN_SHARE_PCT and not hyps:
        why = f"fp32 matmuls take {share:.0f}% of the {'kernel' if mt.device == 'cuda' else 'op'} time" if mt else ""
        return absent(NAME, f"{why} (under {MIN_SHARE_PCT:.0f}%): TF32 has little to speed up".strip())
    what = (
        f"fp32 matmuls take {share:.0f}% of the {'kernel' if mt.device == 'cuda' else 'op'} time "
        f"({(gemm_us + conv_us) / 1e3 / mt.calls:.3g} ms a call: {mt.top(dtype='float32')})"
        if mt is not None and share > 0
        else "the fp32-GEMM rule fired"
    )
    kw = {"hypotheses": P.titles(hyps), "stake_ms": P.stake(hyps)}
    sites = (Site("torch.backends.cuda.matmul.allow_tf32", "setting", "False -> True during the call"),)
    if not context.cuda:
        return not_applicable(
            NAME, f"no CUDA device: TF32 is a mode of NVIDIA tensor cores; here {what} on the CPU", sites, **kw
        )
    cc = P.compute_capability(context)
    if cc is not None and cc[0] < 8:
        return not_applicable(
            NAME, f"the GPU (compute capability {cc[0]}.{cc[1]}) has no TF32 tensor cores (Ampere, 8.0, or newer)", **kw
        )
    try:
        import torch

        if torch.backends.cuda.matmul.allow_tf32 and context.run is not None and context.live:
            return absent(NAME, "TF32 matmuls are already allowed in this process (torch.backends.cuda.matmul)")
    except Exception:  # noqa: BLE001
        pass
    return applies(
        NAME,
        f"{what}; TF32 runs them on tensor cores at a 10-bit mantissa (reduced precision, fp32 accumulation)",
        sites,
        **kw,
    )


FIXES = (
    Fix(
        NAME,
        "torch.backends.cuda.matmul.allow_tf32 = True (and cudnn.allow_tf32) during the call: fp32 matmuls "
        "on TF32 tensor cores; the settings are restored after the call",
        "setting",
        "reduced precision",
        _transform,
        recognise=recognise,
        categories=("precision", "compute_bound"),
        mechanisms=RULES,
        requires=("cuda",),
        needs_live_code=False,
        tolerance=TOLERANCE,
    ),
)
