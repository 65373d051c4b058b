"""The cells of a training step written the ordinary way (a tiny GPT-style model with a hand-written attention,
an AdamW(foreach=False), ``loss = step()``), shared by the notebook test in a real kernel
(tests/magics/test_training_notebook.py) and the JupyterLab test (tests/browser/test_training_step_lab.py).
Support code, not a test module."""

from __future__ import annotations

FAST = "--budget 0.5 --checks 2"

SETUP = """%load_ext workbench
import copy, json
import torch, torch.nn as nn, torch.nn.functional as F
torch.set_num_threads(1)
torch.manual_seed(0)

class Attention(nn.Module):
    def __init__(self, d, detach_softmax=False):
        super().__init__()
        self.qkv, self.proj, self.detach_softmax = nn.Linear(d, 3 * d), nn.Linear(d, d), detach_softmax

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(x).split(C, dim=2)
        att = (q @ k.transpose(-2, -1)) / C ** 0.5
        att = att.masked_fill(~torch.tril(torch.ones(T, T, dtype=torch.bool)), float("-inf"))
        att = F.softmax(att, dim=-1)
        if self.detach_softmax:
            att = att.detach()
        return self.proj(att @ v)

class TinyGPT(nn.Module):
    def __init__(self, vocab=32, d=16, block=8, detach_softmax=False):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(block, d)
        self.ln, self.attn, self.head = nn.LayerNorm(d), Attention(d, detach_softmax), nn.Linear(d, vocab)

    def forward(self, idx):
        x = self.tok(idx) + self.pos(torch.arange(idx.shape[1]))
        x = x + self.attn(self.ln(x))
        return self.head(x)

def loss_fn(model, x, y):
    logits = model(x)
    return F.cross_entropy(logits.view(-1, logits.size(-1)), y.view(-1))

model = TinyGPT()
opt = torch.optim.AdamW(model.parameters(), lr=1e-3, foreach=False)
x, y = torch.randint(0, 32, (4, 8)), torch.randint(0, 32, (4, 8))

def step():
    opt.zero_grad()
    loss = loss_fn(model, x, y)
    loss.backward()
    opt.step()
    return loss.detach()
"""

PROFILE = "%%gpuprofile -T -w 1 -r 3\nloss = step()"

# the variants start from the state the profiled step has reached: the same weights, the optimizer's state
VARIANTS = """opt_f = torch.optim.AdamW(model.parameters(), lr=1e-3, foreach=True)
opt_f.load_state_dict(copy.deepcopy(opt.state_dict()))
for group in opt_f.param_groups:
    group["foreach"] = True

def step_foreach():
    opt_f.zero_grad()
    loss = loss_fn(model, x, y)
    loss.backward()
    opt_f.step()
    return loss.detach()

bad = TinyGPT(detach_softmax=True)
bad.load_state_dict(model.state_dict())
opt_bad = torch.optim.AdamW(bad.parameters(), lr=1e-3, foreach=False)
opt_bad.load_state_dict(copy.deepcopy(opt.state_dict()))

def step_detached():
    opt_bad.zero_grad()
    loss = loss_fn(bad, x, y)
    loss.backward()
    opt_bad.step()
    return loss.detach()

loss_before = loss
weight_before = model.head.weight.detach().clone()
"""
