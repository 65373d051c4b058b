"""``sdpa_attention``'s graph matching on the common ways attention is written by hand: nanoGPT (a tril
buffer sliced from its corner, an nn.Dropout), timm (``attn.softmax``, a scale attribute, no mask), the
Llama reference (``transpose(2, 3)`` on 4-D tensors, an additive ``triu(-inf, 1)`` mask, a float cast
around the softmax); each rewrite gives the eager output. Attention weights that are also returned, and
einsum attention, are not matched, and say why."""

from __future__ import annotations

import copy
import math

import pytest

torch = pytest.importorskip("torch")

import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from workbench.fixes import sdpa_attention as sdpa  # noqa: E402

D, NH, T = 32, 4, 16


class NanoGPT(nn.Module):
    def __init__(self, p=0.1):
        super().__init__()
        self.c_attn, self.c_proj, self.n_head = nn.Linear(D, 3 * D), nn.Linear(D, D), NH
        self.attn_dropout = nn.Dropout(p)
        self.register_buffer("bias", torch.tril(torch.ones(T, T)).view(1, 1, T, T))

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(C, dim=2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
        att = F.softmax(att, dim=-1)
        att = self.attn_dropout(att)
        y = att @ v
        return self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))


class Timm(nn.Module):
    def __init__(self):
        super().__init__()
        self.h, self.scale = NH, (D // NH) ** -0.5
        self.qkv, self.proj = nn.Linear(D, 3 * D), nn.Linear(D, D)

    def forward(self, x):
        B, N, C = x.shape
        q, k, v = self.qkv(x).reshape(B, N, 3, self.h, C // self.h).permute(2, 0, 3, 1, 4).unbind(0)
        attn = (q @ k.transpose(-2, -1)) * self.scale
        attn = attn.softmax(dim=-1)
        return self.proj((attn @ v).transpose(1, 2).reshape(B, N, C))


class Llama(nn.Module):
    def __init__(self):
        super().__init__()
        self.h, self.hd = NH, D // NH
        self.wq, self.wk, self.wv = (nn.Linear(D, D, bias=False) for _ in range(3))

    def forward(self, x, cache=None):
        bsz, seqlen, _ = x.shape
        xq = self.wq(x).view(bsz, seqlen, self.h, self.hd).transpose(1, 2)
        keys = self.wk(x).view(bsz, seqlen, self.h, self.hd).transpose(1, 2)
        values = self.wv(x).view(bsz, seqlen, self.h, self.hd).transpose(1, 2)
        scores = torch.matmul(xq, keys.transpose(2, 3)) / math.sqrt(self.hd)
        scores = scores + torch.full((seqlen, seqlen), float("-inf")).triu(1)
        scores = F.softmax(scores.float(), dim=-1).type_as(xq)
        return torch.matmul(scores, values).transpose(1, 2).contiguous().view(bsz, seqlen, -1)


class ReturnsWeights(Timm):
    def forward(self, x):
        B, N, C = x.shape
        q, k, v = self.qkv(x).reshape(B, N, 3, self.h, C // self.h).permute(2, 0, 3, 1, 4).unbind(0)
        attn = ((q @ k.transpose(-2, -1)) * self.scale).softmax(dim=-1)
        return (attn @ v).transpose(1, 2).reshape(B, N, C), attn


class Einsum(Timm):
    def forward(self, x):
        B, N, C = x.shape
        q, k, v = self.qkv(x).reshape(B, N, 3, self.h, C // self.h).permute(2, 0, 3, 1, 4).unbind(0)
        attn = torch.einsum("bhid,bhjd->bhij", q, k).softmax(-1)
        return torch.einsum("bhij,bhjd->bhid", attn, v)


def rewritten(module):
    out = copy.deepcopy(module)
    found = sdpa.scan([("m", out)])
    for path, mod, matches in found.matched:
        sdpa.rewrite(found.graphs[path], mod, matches)
        mod.forward = found.graphs[path].forward
    return out, found


@pytest.mark.parametrize(
    "cls, expect",
    [
        (NanoGPT, "causal tril mask), dropout 0.1 @ v -> F.scaled_dot_product_attention(is_causal=True, scale, "),
        (Timm, "softmax(q @ k^T * scale) @ v -> F.scaled_dot_product_attention(scale)"),
        (Llama, "softmax(q @ k^T * scale + mask) @ v -> F.scaled_dot_product_attention(attn_mask, scale)"),
    ],
)
def test_hand_written_forms_are_matched_and_rewritten_to_the_same_output(cls, expect):
    torch.manual_seed(0)
    module = cls().eval()
    new, found = rewritten(module)
    (path, _, (match,)) = found.matched[0]
    assert path == "m" and expect in match.describe() and "test_sdpa_forms.py:" in match.describe()
    x = torch.randn(2, T, D)
    assert torch.allclose(new(x), module(x), rtol=1e-5, atol=1e-6)
    assert "scaled_dot_product_attention" in new.forward.__self__.code and "softmax" not in new.forward.__self__.code
    assert [n for n, _ in new.named_parameters()] == [n for n, _ in module.named_parameters()]


def test_the_dropout_follows_the_copys_training_mode():
    torch.manual_seed(0)
    new, _ = rewritten(NanoGPT(p=0.5).eval())
    x = torch.randn(2, T, D)
    assert torch.equal(new(x), new(x))  # eval: no dropout
    new.train()
    assert not torch.equal(new(x), new(x))  # training: sdpa's dropout, p carried over


@pytest.mark.parametrize(
    "cls, why", [(ReturnsWeights, "is used more than once"), (Einsum, "is not followed by a matmul with v")]
)
def test_forms_that_cannot_be_replaced_say_why(cls, why):
    found = sdpa.scan([("m", cls())])
    assert not found.matched and why in found.not_attention[0][1]
