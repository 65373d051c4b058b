"""The Triton kernels behind LayerNorm and RMSNorm (one pair of kernels, the two norms told apart by
a compile-time flag) and their ``autograd.Function``. Public entry points: ``layer_norm.py`` and
``rms_norm.py``.

Forward (one program per row): the row's statistics in fp32 (mean and variance for LayerNorm, the
mean square for RMSNorm), then ``y = xhat * w (+ b)``; it keeps ``rstd`` (and ``mean``) per row, fp32
``[M]``, for the backward. A row that fits one block (``H <= MAX_BLOCK``) is read once; a longer row
is read in blocks, three passes (two for RMSNorm).

Backward (a few programs per SM, each a contiguous run of rows): per row ``xhat`` from the saved
statistics, ``c1 = mean(xhat * w*dy)`` (and ``c2 = mean(w*dy)`` for LayerNorm) and
``dx = rstd * (w*dy - xhat*c1 - c2)``, written in x's dtype; the weight and bias gradients are summed
over the program's rows in fp32 into a partial ``[programs, H]`` buffer, which torch sums over its
first dimension (the one reduction left to torch). Memory beyond dx: that partial buffer
(``programs x H`` fp32, about 2 x SMs rows, not ``M x H``) and the ``[M]`` statistics.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from workbench.errors import InvalidArgumentError
from workbench.kernels._common import block_for, check_float, num_warps_for, programs_for_rows, rows


@triton.jit
def _norm_fwd_kernel(
    X,
    Y,
    W,
    B,
    MEAN,
    RSTD,
    stride_x,
    stride_y,
    N,
    eps,
    IS_RMS: tl.constexpr,
    HAS_W: tl.constexpr,
    HAS_B: tl.constexpr,
    BLOCK: tl.constexpr,
    SINGLE: tl.constexpr,
):
    row = tl.program_id(0).to(tl.int64)
    X += row * stride_x
    Y += row * stride_y
    if SINGLE:
        cols = tl.arange(0, BLOCK)
        mask = cols < N
        x = tl.load(X + cols, mask=mask, other=0.0).to(tl.float32)
        if IS_RMS:
            xc = x
        else:
            mean = tl.sum(x, axis=0) / N
            xc = tl.where(mask, x - mean, 0.0)
            tl.store(MEAN + row, mean)
        var = tl.sum(xc * xc, axis=0) / N
        rstd = tl.rsqrt(var + eps)
        y = xc * rstd
        if HAS_W:
            y = y * tl.load(W + cols, mask=mask, other=0.0).to(tl.float32)
        if HAS_B:
            y = y + tl.load(B + cols, mask=mask, other=0.0).to(tl.float32)
        tl.store(Y + cols, y.to(Y.dtype.element_ty), mask=mask)
        tl.store(RSTD + row, rstd)
    else:
        if IS_RMS:
            mean = 0.0
        else:
            acc = tl.zeros([BLOCK], dtype=tl.float32)
            for off in range(0, N, BLOCK):
                cols = off + tl.arange(0, BLOCK)
                acc += tl.load(X + cols, mask=cols < N, other=0.0).to(tl.float32)
            mean = tl.sum(acc, axis=0) / N
            tl.store(MEAN + row, mean)
        acc2 = tl.zeros([BLOCK], dtype=tl.float32)
        for off in range(0, N, BLOCK):
            cols = off + tl.arange(0, BLOCK)
            mask = cols < N
            x = tl.load(X + cols, mask=mask, other=0.0).to(tl.float32)
            xc = tl.where(mask, x - mean, 0.0)
            acc2 += xc * xc
        rstd = tl.rsqrt(tl.sum(acc2, axis=0) / N + eps)
        tl.store(RSTD + row, rstd)
        for off in range(0, N, BLOCK):
            cols = off + tl.arange(0, BLOCK)
            mask = cols < N
            x = tl.load(X + cols, mask=mask, other=0.0).to(tl.float32)
            y = (x - mean) * rstd
            if HAS_W:
                y = y * tl.load(W + cols, mask=mask, other=0.0).to(tl.float32)
            if HAS_B:
                y = y + tl.load(B + cols, mask=mask, other=0.0).to(tl.float32)
            tl.store(Y + cols, y.to(Y.dtype.element_ty), mask=mask)


@triton.jit
def _norm_bwd_kernel(
    X,
    DY,
    DX,
    W,
    MEAN,
    RSTD,
    DWP,
    DBP,
    stride_x,
    stride_dy,
    stride_dx,
    M,
    N,
    rows_per_prog,
    IS_RMS: tl.constexpr,
    HAS_W: tl.constexpr,
    HAS_B: tl.constexpr,
    BLOCK: tl.constexpr,
    SINGLE: tl.constexpr,
):
    pid = tl.program_id(0)
    start = pid * rows_per_prog
    end = tl.minimum(start + rows_per_prog, M)
    DWP += tl.cast(pid, tl.int64) * N
    DBP += tl.cast(pid, tl.int64) * N
    if SINGLE:
        cols = tl.arange(0, BLOCK)
        mask = cols < N
        if HAS_W:
            w = tl.load(W + cols, mask=mask, other=0.0).to(tl.float32)
        dw_acc = tl.zeros([BLOCK], dtype=tl.float32)
        db_acc = tl.zeros([BLOCK], dtype=tl.float32)
        for row in range(start, end):
            r = tl.cast(row, tl.int64)
            x = tl.load(X + r * stride_x + cols, mask=mask, other=0.0).to(tl.float32)
            dy = tl.load(DY + r * stride_dy + cols, mask=mask, other=0.0).to(tl.float32)
            rstd = tl.load(RSTD + r)
            if IS_RMS:
                xhat = x * rstd
            else:
                xhat = tl.where(mask, (x - tl.load(MEAN + r)) * rstd, 0.0)
            if HAS_W:
                wdy = w * dy
            else:
                wdy = dy
            c1 = tl.sum(xhat * wdy, axis=0) / N
            if IS_RMS:
                dx = (wdy - xhat * c1) * rstd
            else:
                c2 = tl.sum(wdy, axis=0) / N
                dx = (wdy - (xhat * c1 + c2)) * rstd
            tl.store(DX + r * stride_dx + cols, dx.to(DX.dtype.element_ty), mask=mask)
            dw_acc += dy * xhat
            db_acc += dy
        if HAS_W:
            tl.store(DWP + cols, dw_acc, mask=mask)
        if HAS_B:
            tl.store(DBP + cols, db_acc, mask=mask)
    else:
        for row in range(start, end):
            r = tl.cast(row, tl.int64)
            rstd = tl.load(RSTD + r)
            if IS_RMS:
                mean = 0.0
            else:
                mean = tl.load(MEAN + r)
            a1 = tl.zeros([BLOCK], dtype=tl.float32)
            a2 = tl.zeros([BLOCK], dtype=tl.float32)
            for off in range(0, N, BLOCK):
                cols = off + tl.arange(0, BLOCK)
                mask = cols < N
                x = tl.load(X + r * stride_x + cols, mask=mask, other=0.0).to(tl.float32)
                dy = tl.load(DY + r * stride_dy + cols, mask=mask, other=0.0).to(tl.float32)
                xhat = tl.where(mask, (x - mean) * rstd, 0.0)
                if HAS_W:
                    wdy = tl.load(W + cols, mask=mask, other=0.0).to(tl.float32) * dy
                else:
                    wdy = dy
                a1 += xhat * wdy
                a2 += wdy
            c1 = tl.sum(a1, axis=0) / N
            c2 = tl.sum(a2, axis=0) / N
            for off in range(0, N, BLOCK):
                cols = off + tl.arange(0, BLOCK)
                mask = cols < N
                x = tl.load(X + r * stride_x + cols, mask=mask, other=0.0).to(tl.float32)
                dy = tl.load(DY + r * stride_dy + cols, mask=mask, other=0.0).to(tl.float32)
                xhat = tl.where(mask, (x - mean) * rstd, 0.0)
                if HAS_W:
                    wdy = tl.load(W + cols, mask=mask, other=0.0).to(tl.float32) * dy
                else:
                    wdy = dy
                if IS_RMS:
                    dx = (wdy - xhat * c1) * rstd
                else:
                    dx = (wdy - (xhat * c1 + c2)) * rstd
                tl.store(DX + r * stride_dx + cols, dx.to(DX.dtype.element_ty), mask=mask)
                if HAS_W:
                    dwp = tl.load(DWP + cols, mask=mask, other=0.0)
                    tl.store(DWP + cols, dwp + dy * xhat, mask=mask)
                if HAS_B:
                    dbp = tl.load(DBP + cols, mask=mask, other=0.0)
                    tl.store(DBP + cols, dbp + dy, mask=mask)


class NormFunction(torch.autograd.Function):
    """``apply(x, weight, bias, eps, is_rms, block_size)``: LayerNorm (``is_rms=False``) or RMSNorm over
    the last dimension; ``weight`` / ``bias`` may be None."""

    @staticmethod
    def forward(ctx, x, weight, bias, eps, is_rms, block_size):
        check_float(x, weight, bias)
        shape = x.shape
        h = shape[-1]
        for name, p in (("weight", weight), ("bias", bias)):
            if p is not None and p.shape != (h,):
                raise InvalidArgumentError(f"{name} must have shape ({h},), got {tuple(p.shape)}")
        x2 = rows(x)
        m = x2.shape[0]
        w = weight.contiguous() if weight is not None else None
        b = bias.contiguous() if bias is not None else None
        y = torch.empty((m, h), dtype=x.dtype, device=x.device)
        mean = torch.empty(m, dtype=torch.float32, device=x.device)
        rstd = torch.empty(m, dtype=torch.float32, device=x.device)
        block, single = block_for(h, block_size)
        if m:
            _norm_fwd_kernel[(m,)](
                x2,
                y,
                w if w is not None else x2,
                b if b is not None else x2,
                mean,
                rstd,
                x2.stride(0),
                y.stride(0),
                h,
                float(eps),
                IS_RMS=bool(is_rms),
                HAS_W=w is not None,
                HAS_B=b is not None,
                BLOCK=block,
                SINGLE=single,
                num_warps=num_warps_for(block),
            )
        ctx.save_for_backward(x2, w, mean, rstd)
        ctx.has_b = b is not None
        ctx.b_dtype = b.dtype if b is not None else None
        ctx.is_rms, ctx.block, ctx.single, ctx.shape = bool(is_rms), block, single, shape
        return y.view(shape)

    @staticmethod
    def backward(ctx, dy):
        x2, w, mean, rstd = ctx.saved_tensors
        m, h = x2.shape
        dy2 = rows(dy)
        dx = torch.empty((m, h), dtype=x2.dtype, device=x2.device)
        programs, per = programs_for_rows(m, x2.device)
        dwp = torch.zeros((programs, h), dtype=torch.float32, device=x2.device) if w is not None else None
        dbp = torch.zeros((programs, h), dtype=torch.float32, device=x2.device) if ctx.has_b else None
        if m:
            _norm_bwd_kernel[(programs,)](
                x2,
                dy2,
                dx,
                w if w is not None else x2,
                mean,
                rstd,
                dwp if dwp is not None else mean,
                dbp if dbp is not None else mean,
                x2.stride(0),
                dy2.stride(0),
                dx.stride(0),
                m,
                h,
                per,
                IS_RMS=ctx.is_rms,
                HAS_W=w is not None,
                HAS_B=ctx.has_b,
                BLOCK=ctx.block,
                SINGLE=ctx.single,
                num_warps=num_warps_for(ctx.block),
            )
        dw = dwp.sum(0).to(w.dtype) if w is not None and ctx.needs_input_grad[1] else None
        db = dbp.sum(0).to(ctx.b_dtype) if ctx.has_b and ctx.needs_input_grad[2] else None
        return dx.view(ctx.shape), dw, db, None, None, None
