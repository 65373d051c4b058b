"""The catalog of fixes on a GPT-style training step written the ordinary way (hand-written causal
attention, LayerNorm, a GELU MLP in an nn.Sequential, an LM head, cross-entropy, AdamW foreach=False,
globals ``model`` and ``opt``).

1. How long recognising takes (``wb.fixes.for_callable(step)`` and ``run.fixes`` of a profiled run) on a
   model of about 100 modules (the goal: under 2 s), with what was found.
2. ``wb.compare(run.fixes.variants())`` on a smaller model of the same shape: each fix checked as a
   training step (gradients, updates, optimizer state) and timed against eager in the same process;
   each fix's speedup with its interval.

    OMP_WAIT_POLICY=PASSIVE .venv/bin/python benchmarks/fixes_gpt_step.py [--layers 10] [--budget 6]

On a CPU machine the Triton kernel fixes are listed as not applicable (or, under TRITON_INTERPRET=1,
checked for correctness with their timing marked not meaningful).
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import workbench as wb  # noqa: E402
import workbench.fixes  # noqa: E402, F401


class Attention(nn.Module):
    def __init__(self, d, h):
        super().__init__()
        self.h = h
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(x).split(c, dim=2)
        q = q.view(b, t, self.h, c // self.h).transpose(1, 2)
        k = k.view(b, t, self.h, c // self.h).transpose(1, 2)
        v = v.view(b, t, self.h, c // self.h).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        mask = torch.tril(torch.ones(t, t, dtype=torch.bool))
        att = att.masked_fill(~mask, float("-inf"))
        att = F.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(b, t, c)
        return self.proj(y)


class Block(nn.Module):
    def __init__(self, d, h):
        super().__init__()
        self.ln1, self.attn, self.ln2 = nn.LayerNorm(d), Attention(d, h), nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    def __init__(self, vocab, d, h, layers, block_size):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(block_size, d)
        self.blocks = nn.ModuleList([Block(d, h) for _ in range(layers)])
        self.lnf, self.head = nn.LayerNorm(d), nn.Linear(d, vocab, bias=False)

    def forward(self, idx):
        x = self.tok(idx) + self.pos(torch.arange(idx.shape[1]))
        for block in self.blocks:
            x = block(x)
        return self.head(self.lnf(x))


model: GPT
opt: torch.optim.Optimizer
idx: torch.Tensor
tgt: torch.Tensor


def build(vocab=512, d=64, h=4, layers=2, block_size=64, batch=8, seed=0) -> None:
    """The notebook's cell: the globals ``model``, ``opt``, ``idx``, ``tgt``."""
    global model, opt, idx, tgt
    torch.manual_seed(seed)
    model = GPT(vocab, d, h, layers, block_size)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, foreach=False)
    idx = torch.randint(0, vocab, (batch, block_size))
    tgt = torch.randint(0, vocab, (batch, block_size))


def loss_fn():
    logits = model(idx)
    return F.cross_entropy(logits.view(-1, logits.size(-1)), tgt.view(-1))


def step():
    opt.zero_grad()
    loss = loss_fn()
    loss.backward()
    opt.step()
    return loss.detach()


def recognition(layers: int) -> None:
    build(layers=layers, d=64, vocab=512, block_size=32, batch=2)
    n_modules = sum(1 for _ in model.modules())
    t0 = time.perf_counter()
    listed = wb.fixes.for_callable(step)
    t_callable = time.perf_counter() - t0
    run = wb.profile(step, warmup=1, repeat=3, trace_repeat=2, history=False)
    t0 = time.perf_counter()
    fixes = run.fixes
    t_run = time.perf_counter() - t0
    print(f"recognition on a {layers}-block model: {n_modules} modules, {sum(1 for _ in model.parameters())} tensors")
    print(f"  wb.fixes.for_callable(step): {t_callable:.3f} s (its own count: {listed.elapsed_s:.3f} s)")
    print(f"  run.fixes of a profiled run (hypotheses attached): {t_run:.3f} s")
    print(f"  goal < 2 s: {'met' if max(t_callable, t_run) < 2.0 else 'MISSED'}")
    for row in fixes:
        where = f" at {row.where}" if row.where else ""
        stake = f" [{row.stake_ms:.3g} ms at stake]" if row.stake_ms else ""
        print(f"  - {row.fix}{where if row.applies else ''}: {row.reason}{stake}"[:400])


def comparison(layers: int, budget_s: float) -> None:
    build(layers=layers)
    run = wb.profile(step, warmup=2, repeat=5, trace_repeat=2, history=False)
    variants = run.fixes.variants()
    print(
        f"\nwb.compare over run.fixes.variants() ({', '.join(n for n in variants if n != 'eager')}), {layers} blocks:"
    )
    t0 = time.perf_counter()
    cmp = wb.compare(variants, budget_s=budget_s, min_rounds=10, profile=False)
    print(f"  mode {cmp.settings['mode']}, {time.perf_counter() - t0:.1f} s")
    for name in variants:
        if name == "eager":
            continue
        r = cmp[name]
        s = r.speedup
        speed = f"x{s.point:.2f} [{s.ci_low:.2f}, {s.ci_high:.2f}]" if s is not None else "no speedup measured"
        meaningful = "" if r.timing_meaningful else " (timing not meaningful here)"
        print(f"  {name:28s} {r.status:14s} {speed}{meaningful}: {r.decision}: {r.decision_reason}"[:300])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", type=int, default=10, help="blocks of the recognition model (10: ~106 modules)")
    ap.add_argument("--compare-layers", type=int, default=2, help="blocks of the compared model")
    ap.add_argument("--budget", type=float, default=6.0, help="wb.compare's time budget (s)")
    args = ap.parse_args()
    recognition(args.layers)
    comparison(args.compare_layers, args.budget)


if __name__ == "__main__":
    main()
