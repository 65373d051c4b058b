"""Chunked cross-entropy over a large vocabulary, forward and backward in Triton, and a fused
``linear_cross_entropy`` that never materialises the full logits.

``cross_entropy(logits, targets, reduction="mean", ignore_index=-100)`` replaces
``F.cross_entropy(logits.view(-1, V), targets.view(-1), ...)`` (class dimension last; ``mean``, ``sum``
or ``none``; rows whose target is ``ignore_index`` add nothing and, under ``mean``, are not counted;
no class ``weight`` and no ``label_smoothing``: a call that needs them stays on ``F.cross_entropy``).

* Forward, one program per row: one pass over the row in blocks of ``BLOCK_V`` keeps a running max
  and a rescaled running sum (online logsumexp), and picks the target's logit; it writes the row's
  loss and its logsumexp (fp32 ``[N]`` each) and keeps a reference to the logits. No softmax or
  log-softmax ``[N, V]`` is written.
* Backward, one program per row: ``dlogits = (exp(x - lse) - onehot(target)) * g`` block by block, with
  ``g = grad / count`` (mean), ``grad`` (sum) or ``grad[row]`` (none), 0 on ignored rows; written
  straight into the one ``[N, V]`` gradient buffer autograd needs (in the logits' dtype), or, with
  ``inplace_backward=True``, into the logits' own storage (no new ``[N, V]`` at all; only for logits
  that nothing else reads after the loss, e.g. a Linear's output used once: the logits are
  overwritten by their gradient).

Memory against eager ``F.cross_entropy`` (``log_softmax`` then ``nll_loss``): eager keeps the
log-softmax output, an ``[N, V]`` tensor in the logits' dtype, from the forward to the backward;
its backward then allocates the ``nll_loss`` gradient (``[N, V]``, zeros with one entry per row) and
the ``log_softmax`` gradient (``[N, V]``): up to three ``[N, V]`` tensors besides the logits at the
backward's peak. Here: the logits (already held by the caller) + ``2 x N`` fp32 for the forward,
one ``[N, V]`` (the gradient itself, or none in place) for the backward.

``linear_cross_entropy(hidden, weight, targets, bias=None, chunk_rows=None, ...)`` replaces
``F.cross_entropy(F.linear(hidden, weight, bias), targets)`` (Liger's fused linear cross-entropy):
rows are taken ``chunk_rows`` at a time; for each chunk the logits ``[chunk, V]`` are formed by a
matmul, the Triton kernel computes the chunk's loss and writes d logits over them in place, and
``d hidden = dlogits @ W`` and ``d W += dlogits^T @ hidden`` (``d bias += sum dlogits``) are taken
right away, so only one ``[chunk, V]`` block exists at a time, never ``[N, V]``. The gradients are
therefore computed in the forward (when grad is enabled and an input requires it) and scaled by the
incoming gradient in the backward. ``reduction`` is ``mean`` or ``sum``. The matmuls are torch's
(cuBLAS); d W accumulates in fp32.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from workbench.errors import InvalidArgumentError
from workbench.kernels._common import block_for, check_float, num_warps_for, rows

_REDUCTIONS = ("mean", "sum", "none")


@triton.jit
def _ce_fwd_kernel(X, T, LOSS, LSE, SCALE, stride_x, V, ignore_index, BLOCK: tl.constexpr, WRITE_GRAD: tl.constexpr):
    """Per row: online logsumexp over V, the loss; with WRITE_GRAD the gradient (softmax - onehot)
    times SCALE[0] over the logits in place (the linear cross-entropy's chunks)."""
    row = tl.program_id(0).to(tl.int64)
    X += row * stride_x
    t = tl.load(T + row)
    valid = t != ignore_index
    m = float("-inf")
    s = 0.0
    for off in range(0, V, BLOCK):
        cols = off + tl.arange(0, BLOCK)
        x = tl.load(X + cols, mask=cols < V, other=float("-inf")).to(tl.float32)
        m_new = tl.maximum(m, tl.max(x, axis=0))
        s = s * tl.exp(m - m_new) + tl.sum(tl.where(cols < V, tl.exp(x - m_new), 0.0), axis=0)
        m = m_new
    lse = m + tl.log(s)
    x_t = tl.load(X + t, mask=valid, other=0.0).to(tl.float32)
    tl.store(LOSS + row, tl.where(valid, lse - x_t, 0.0))
    tl.store(LSE + row, lse)
    if WRITE_GRAD:
        g = tl.where(valid, tl.load(SCALE), 0.0)
        for off in range(0, V, BLOCK):
            cols = off + tl.arange(0, BLOCK)
            mask = cols < V
            x = tl.load(X + cols, mask=mask, other=0.0).to(tl.float32)
            p = tl.exp(x - lse) - tl.where(cols == t, 1.0, 0.0)
            tl.store(X + cols, (p * g).to(X.dtype.element_ty), mask=mask)


@triton.jit
def _ce_bwd_kernel(X, T, LSE, GRAD, DX, stride_x, stride_dx, stride_g, V, ignore_index, BLOCK: tl.constexpr):
    """Per row: dx = (exp(x - lse) - onehot(t)) * GRAD[row * stride_g] (0 where t is ignored)."""
    row = tl.program_id(0).to(tl.int64)
    X += row * stride_x
    DX += row * stride_dx
    t = tl.load(T + row)
    lse = tl.load(LSE + row)
    g = tl.where(t != ignore_index, tl.load(GRAD + row * stride_g).to(tl.float32), 0.0)
    for off in range(0, V, BLOCK):
        cols = off + tl.arange(0, BLOCK)
        mask = cols < V
        x = tl.load(X + cols, mask=mask, other=0.0).to(tl.float32)
        p = tl.exp(x - lse) - tl.where(cols == t, 1.0, 0.0)
        tl.store(DX + cols, (p * g).to(DX.dtype.element_ty), mask=mask)


def _ce_block(v: int, block_size: int | None) -> int:
    return block_for(v, block_size, cap=4096)[0]


class CrossEntropyFunction(torch.autograd.Function):
    """``apply(logits, targets, reduction, ignore_index, inplace_backward, block_size)``."""

    @staticmethod
    def forward(ctx, logits, targets, reduction, ignore_index, inplace_backward, block_size):
        check_float(logits)
        if reduction not in _REDUCTIONS:
            raise InvalidArgumentError(f"reduction must be one of {_REDUCTIONS}, got {reduction!r}")
        v = logits.shape[-1]
        x2 = rows(logits)
        t = targets.reshape(-1).contiguous()
        if t.dtype not in (torch.int64, torch.int32):
            raise InvalidArgumentError(f"targets must be integer class indices, got {t.dtype}")
        n = x2.shape[0]
        if t.shape[0] != n:
            raise InvalidArgumentError(f"{n} rows of logits but {t.shape[0]} targets")
        loss = torch.empty(n, dtype=torch.float32, device=logits.device)
        lse = torch.empty(n, dtype=torch.float32, device=logits.device)
        block = _ce_block(v, block_size)
        if n:
            _ce_fwd_kernel[(n,)](
                x2,
                t,
                loss,
                lse,
                lse,
                x2.stride(0),
                v,
                int(ignore_index),
                BLOCK=block,
                WRITE_GRAD=False,
                num_warps=num_warps_for(block),
            )
        count = (t != ignore_index).sum()
        ctx.save_for_backward(x2, t, lse, count)
        ctx.reduction, ctx.ignore_index, ctx.inplace, ctx.block = (
            reduction,
            int(ignore_index),
            bool(inplace_backward),
            block,
        )
        ctx.shape = logits.shape
        if reduction == "none":
            return loss.to(logits.dtype).view(targets.shape)
        total = loss.sum()
        return (total / count if reduction == "mean" else total).to(logits.dtype)

    @staticmethod
    def backward(ctx, grad):
        x2, t, lse, count = ctx.saved_tensors
        n, v = x2.shape
        if ctx.reduction == "none":
            g = grad.reshape(-1).float().contiguous()
            stride_g = 1
        else:
            g = grad.float().reshape(1)
            if ctx.reduction == "mean":
                g = g / count
            stride_g = 0
        dx = x2 if ctx.inplace else torch.empty((n, v), dtype=x2.dtype, device=x2.device)
        if n:
            _ce_bwd_kernel[(n,)](
                x2,
                t,
                lse,
                g,
                dx,
                x2.stride(0),
                dx.stride(0),
                stride_g,
                v,
                ctx.ignore_index,
                BLOCK=ctx.block,
                num_warps=num_warps_for(ctx.block),
            )
        return dx.reshape(ctx.shape), None, None, None, None, None


def cross_entropy(
    logits: torch.Tensor,
    targets: torch.Tensor,
    reduction: str = "mean",
    ignore_index: int = -100,
    *,
    inplace_backward: bool = False,
    block_size: int | None = None,
) -> torch.Tensor:
    """``F.cross_entropy(logits.view(-1, V), targets.view(-1), reduction=..., ignore_index=...)``
    (reshaped back for ``none``), chunked over V in Triton; see the module docstring."""
    return CrossEntropyFunction.apply(logits, targets, reduction, ignore_index, inplace_backward, block_size)


def default_chunk_rows(n: int, d: int, v: int) -> int:
    """Liger's choice: about as many logits per chunk as there are hidden values in all rows,
    a power of two."""
    return max(1, triton.next_power_of_2(triton.cdiv(n, max(1, triton.cdiv(v, max(d, 1))))))


class LinearCrossEntropyFunction(torch.autograd.Function):
    """``apply(hidden, weight, bias, targets, reduction, ignore_index, chunk_rows, block_size, grad_enabled)``:
    ``grad_enabled`` is the caller's ``torch.is_grad_enabled()`` (a Function's forward always runs
    without grad), so that under ``no_grad`` only the loss is computed."""

    @staticmethod
    def forward(ctx, hidden, weight, bias, targets, reduction, ignore_index, chunk_rows, block_size, grad_enabled):
        check_float(hidden, weight, bias)
        if reduction not in ("mean", "sum"):
            raise InvalidArgumentError(f"linear_cross_entropy's reduction is 'mean' or 'sum', got {reduction!r}")
        d = hidden.shape[-1]
        h2 = hidden.reshape(-1, d)
        t = targets.reshape(-1).contiguous()
        n, v = h2.shape[0], weight.shape[0]
        if weight.shape[1] != d:
            raise InvalidArgumentError(f"weight must be [V, {d}], got {tuple(weight.shape)}")
        if t.shape[0] != n:
            raise InvalidArgumentError(f"{n} rows of hidden but {t.shape[0]} targets")
        count = (t != ignore_index).sum()
        scale = (1.0 / count.float() if reduction == "mean" else torch.ones((), device=hidden.device)).reshape(1)
        need = bool(grad_enabled) and any(ctx.needs_input_grad[:3])
        dh = torch.empty(h2.shape, dtype=h2.dtype, device=h2.device) if need and ctx.needs_input_grad[0] else None
        dw = (
            torch.zeros(weight.shape, dtype=torch.float32, device=weight.device)
            if need and ctx.needs_input_grad[1]
            else None
        )
        db = (
            torch.zeros(v, dtype=torch.float32, device=weight.device)
            if need and bias is not None and ctx.needs_input_grad[2]
            else None
        )
        loss = torch.empty(n, dtype=torch.float32, device=hidden.device)
        lse = torch.empty(n, dtype=torch.float32, device=hidden.device)
        c = chunk_rows or default_chunk_rows(n, d, v)
        block = _ce_block(v, block_size)
        for s in range(0, n, c):
            e = min(s + c, n)
            hc = h2[s:e]
            logits = hc @ weight.t()
            if bias is not None:
                logits += bias
            _ce_fwd_kernel[(e - s,)](
                logits,
                t[s:e],
                loss[s:e],
                lse[s:e],
                scale,
                logits.stride(0),
                v,
                int(ignore_index),
                BLOCK=block,
                WRITE_GRAD=need,
                num_warps=num_warps_for(block),
            )
            if need:  # logits now hold d loss / d logits (unscaled by grad)
                if dh is not None:
                    torch.mm(logits, weight, out=dh[s:e])
                if dw is not None:
                    if logits.dtype == torch.float32:
                        dw.addmm_(logits.t(), hc)
                    else:
                        dw += (logits.t() @ hc).float()
                if db is not None:
                    db += logits.sum(0, dtype=torch.float32)
            del logits
        ctx.save_for_backward(dh, dw, db)
        ctx.shape, ctx.dtypes = hidden.shape, (weight.dtype, bias.dtype if bias is not None else None)
        total = loss.sum()
        return (total / count if reduction == "mean" else total).to(hidden.dtype)

    @staticmethod
    def backward(ctx, grad):
        dh, dw, db = ctx.saved_tensors
        g = grad.float()
        out_h = (dh * g.to(dh.dtype)).view(ctx.shape) if dh is not None else None
        out_w = (dw * g).to(ctx.dtypes[0]) if dw is not None else None
        out_b = (db * g).to(ctx.dtypes[1]) if db is not None else None
        return out_h, out_w, out_b, None, None, None, None, None, None


def linear_cross_entropy(
    hidden: torch.Tensor,
    weight: torch.Tensor,
    targets: torch.Tensor,
    bias: torch.Tensor | None = None,
    *,
    reduction: str = "mean",
    ignore_index: int = -100,
    chunk_rows: int | None = None,
    block_size: int | None = None,
) -> torch.Tensor:
    """``F.cross_entropy(F.linear(hidden, weight, bias).view(-1, V), targets.view(-1))`` without the
    ``[N, V]`` logits: rows in chunks of ``chunk_rows`` (default: Liger's choice); see the module docstring."""
    return LinearCrossEntropyFunction.apply(
        hidden, weight, bias, targets, reduction, ignore_index, chunk_rows, block_size, torch.is_grad_enabled()
    )


class TritonLinearCrossEntropy(torch.nn.Module):
    """The LM head and its loss in one: ``TritonLinearCrossEntropy.from_linear(lm_head)(hidden, targets)``
    is ``F.cross_entropy(lm_head(hidden).view(-1, V), targets.view(-1))`` without the logits."""

    def __init__(
        self, linear: torch.nn.Linear, reduction: str = "mean", ignore_index: int = -100, chunk_rows: int | None = None
    ):
        super().__init__()
        self.linear, self.reduction, self.ignore_index, self.chunk_rows = linear, reduction, ignore_index, chunk_rows

    @classmethod
    def from_linear(cls, linear: torch.nn.Linear, **kw) -> "TritonLinearCrossEntropy":
        return cls(linear, **kw)

    def forward(self, hidden: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        return linear_cross_entropy(
            hidden,
            self.linear.weight,
            targets,
            self.linear.bias,
            reduction=self.reduction,
            ignore_index=self.ignore_index,
            chunk_rows=self.chunk_rows,
        )
