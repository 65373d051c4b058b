"""Shared host-side helpers of the kernel modules (this module imports triton: only the kernel
modules import it, never ``workbench.kernels`` itself).

Layout rules every kernel module follows:

* **leading shape**: any ``[..., H]`` input is flattened to rows ``[M, H]``;
* **non-contiguous inputs**: the row kernels (norms, softmax, cross-entropy) read a row stride, so a
  view whose last dimension has stride 1 and whose leading dimensions flatten to one stride (a column
  slice ``x[:, a:b]`` of a wider matrix, say) is read in place, without a copy; any other layout (a
  transposed view) is copied to a contiguous tensor first (``_rows``). The elementwise kernels
  (bias+GELU, SwiGLU) always copy a non-contiguous input (``.contiguous()``, free when it already is);
* **dtypes**: fp32 / fp16 / bf16 inputs; every kernel accumulates in fp32 and writes its outputs
  and gradients in the input's dtype (statistics such as mean, rstd, logsumexp are kept in fp32);
* **feature sizes**: any size; the block is the next power of two >= H up to a cap, with a loop over
  blocks (and a mask on the last one) for longer rows.
"""

from __future__ import annotations

import torch
import triton

from workbench.errors import InvalidArgumentError

#: the largest block (elements) one program holds for a row kernel; longer rows loop over blocks
MAX_BLOCK = 8192
#: block of the elementwise kernels
ELEMENTWISE_BLOCK = 1024


def block_for(n: int, block_size: int | None = None, cap: int = MAX_BLOCK) -> tuple[int, bool]:
    """(BLOCK, SINGLE): the block for a row of ``n`` elements and whether one block holds the row.
    ``block_size`` (a power of two) overrides the automatic choice (tests use it to reach the loop)."""
    if block_size is not None:
        if block_size < 1 or block_size & (block_size - 1):
            raise InvalidArgumentError(f"block_size must be a power of two, got {block_size}")
        block = block_size
    else:
        block = min(triton.next_power_of_2(max(n, 1)), cap)
    return block, n <= block


def num_warps_for(block: int) -> int:
    return 4 if block <= 2048 else 8 if block <= 8192 else 16


def rows(x: torch.Tensor) -> torch.Tensor:
    """``x`` as a 2-D ``[M, H]`` tensor whose last dimension has stride 1: a view where possible
    (``reshape``), else a contiguous copy."""
    h = x.shape[-1] if x.dim() else 1
    x2 = x.reshape(-1, h)
    if x2.stride(-1) != 1 or (x2.shape[0] > 1 and x2.stride(0) < h):
        x2 = x2.contiguous()
    return x2


def programs_for_rows(m: int, device: torch.device) -> tuple[int, int]:
    """(programs, rows per program) for the backward kernels that accumulate a weight gradient
    over rows: about two programs per SM on a GPU (a few under the interpreter)."""
    if device.type == "cuda":
        target = 2 * torch.cuda.get_device_properties(device).multi_processor_count
    else:
        target = 4
    g = max(1, min(m, target))
    per = triton.cdiv(m, g) if m else 1
    return (triton.cdiv(m, per) if m else 1), per


def check_float(*tensors: torch.Tensor) -> None:
    for t in tensors:
        if t is not None and t.dtype not in (torch.float32, torch.float16, torch.bfloat16):
            raise InvalidArgumentError(f"the Triton kernels take float32, float16 or bfloat16 tensors, got {t.dtype}")
