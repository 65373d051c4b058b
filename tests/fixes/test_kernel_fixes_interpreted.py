"""The fused-kernel fixes (``workbench/fixes/fused_kernels.py``) on a tiny GPT-style training step under
``TRITON_INTERPRET=1`` (one subprocess: the variable must be set before triton is imported): each is
listed where its pattern is (LayerNorm, RMSNorm, nn.Softmax, Linear -> GELU in a Sequential, the
cross-entropy call, the Linear head), its variant runs the Triton kernel in a copy of the model (the fused
path really taken: the kernels' autograd Functions counted), ``wb.compare`` finds each correct as a training
step but its timing not meaningful, and the user's model and optimizer are as they were."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HAS_TRITON = importlib.util.find_spec("triton") is not None

SCRIPT = textwrap.dedent("""
    import hashlib, json, math, os, sys
    assert os.environ.get("TRITON_INTERPRET") == "1" and "triton" not in sys.modules
    import torch, torch.nn as nn, torch.nn.functional as F
    torch.set_num_threads(1)
    import workbench as wb, workbench.fixes
    from workbench.variants.clock import FakeTimer
    import workbench.kernels.cross_entropy as ce

    V, T, B, D, H = 37, 8, 2, 16, 2

    class Attn(nn.Module):
        def __init__(s):
            super().__init__()
            s.qkv, s.proj, s.sm = nn.Linear(D, 3 * D, bias=False), nn.Linear(D, D), nn.Softmax(dim=-1)
        def forward(s, x):
            b, t, c = x.shape
            q, k, v = s.qkv(x).split(c, dim=2)
            q, k, v = (z.view(b, t, H, c // H).transpose(1, 2) for z in (q, k, v))
            att = (q @ k.transpose(-2, -1)) / math.sqrt(c // H)
            att = att.masked_fill(torch.tril(torch.ones(t, t, dtype=torch.bool)) == 0, float("-inf"))
            return s.proj((s.sm(att) @ v).transpose(1, 2).contiguous().view(b, t, c))

    class GPT(nn.Module):
        def __init__(s):
            super().__init__()
            s.tok, s.ln1, s.attn, s.ln2 = nn.Embedding(V, D), nn.LayerNorm(D), Attn(), nn.RMSNorm(D)
            s.mlp = nn.Sequential(nn.Linear(D, 4 * D), nn.GELU(), nn.Linear(4 * D, D))
            s.head = nn.Linear(D, V, bias=False)
        def forward(s, idx):
            x = s.tok(idx)
            x = x + s.attn(s.ln1(x))
            return s.head(x + s.mlp(s.ln2(x)))

    torch.manual_seed(0)
    model = GPT()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, foreach=False)
    idx, tgt = torch.randint(0, V, (B, T)), torch.randint(0, V, (B, T))

    def loss_fn():
        logits = model(idx)
        return F.cross_entropy(logits.view(-1, logits.size(-1)), tgt.view(-1))

    def step():
        opt.zero_grad(); loss = loss_fn(); loss.backward(); opt.step(); return loss.detach()

    def fingerprint():
        h = hashlib.sha256()
        for t in list(model.parameters()) + [v for st in opt.state.values() for v in st.values()]:
            h.update(t.detach().contiguous().numpy().tobytes())
        return h.hexdigest()

    step()
    names = ["fused_layer_norm", "fused_rms_norm", "fused_bias_gelu", "fused_softmax",
             "fused_cross_entropy", "fused_linear_cross_entropy"]
    listed = wb.fixes.for_callable(step)
    rows = {r.fix: {"status": r.status, "reason": r.reason, "sites": [[s.where, s.detail] for s in r.sites]}
            for r in listed}
    counts = {"ce": 0, "lce": 0}
    for key, fn in (("ce", ce.CrossEntropyFunction), ("lce", ce.LinearCrossEntropyFunction)):
        orig = fn.apply
        def counted(*a, _orig=orig, _key=key):
            counts[_key] += 1
            return _orig(*a)
        fn.apply = counted
    once = listed.variants(["fused_cross_entropy", "fused_linear_cross_entropy"])
    once["fused_cross_entropy"].fn()  # shares the model (only the function is swapped): a step of the user's
    once["fused_linear_cross_entropy"].fn()
    direct = dict(counts)
    before = fingerprint()
    variants = listed.variants(names)  # copies of the model as it is now, just before the comparison
    swapped = {}
    for n in names:
        copy = variants[n].fn.__globals__.get("model")
        mods = dict(copy.named_modules()) if copy is not model and copy is not None else {}
        swapped[n] = {p: type(mods[p]).__name__ for p in ("ln1", "ln2", "attn.sm", "mlp.0", "mlp.1", "head") if p in mods}
    cmp = wb.compare(variants, checks=1, profile=False, budget_s=0.2, min_rounds=2, max_rounds=3,
                     timer=FakeTimer({"eager": 2.0}, default_ms=1.0, noise=0.02, seed=0, call=True))
    results = {n: {"status": cmp[n].status, "decision": cmp[n].decision, "reason": cmp[n].decision_reason,
                   "timing_meaningful": cmp[n].timing_meaningful, "compared": cmp[n].compared}
               for n in names}
    print("FIXES-JSON" + json.dumps({"rows": rows, "swapped": swapped, "direct": direct, "results": results,
                                     "mode": cmp.settings["mode"], "unchanged": fingerprint() == before}))
""")


@pytest.fixture(scope="module")
def interpreted():
    if not HAS_TRITON:
        pytest.skip("not applicable: triton not installed (pip install triton, ~1 GB)")
    env = {
        **os.environ,
        "TRITON_INTERPRET": "1",
        "OMP_NUM_THREADS": "1",
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, cwd=str(ROOT), env=env, timeout=280
    )
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("FIXES-JSON")), None)
    assert proc.returncode == 0 and line is not None, proc.stderr[-3000:]
    return json.loads(line[len("FIXES-JSON") :])


def test_each_kernel_fix_is_listed_where_its_pattern_is(interpreted):
    rows = interpreted["rows"]
    where = {
        "fused_layer_norm": ["ln1"],
        "fused_rms_norm": ["ln2"],
        "fused_softmax": ["attn.sm"],
        "fused_bias_gelu": ["mlp.0"],
        "fused_linear_cross_entropy": ["head"],
    }
    for name, paths in where.items():
        assert rows[name]["status"] == "applies", (name, rows[name]["reason"])
        assert [s[0] for s in rows[name]["sites"]] == paths, (name, rows[name]["sites"])
        assert "TRITON_INTERPRET=1" in rows[name]["reason"]
    ce = rows["fused_cross_entropy"]
    assert ce["status"] == "applies" and ce["sites"][0][0].startswith("<string>:"), ce
    assert "by name" in rows["fused_linear_cross_entropy"]["sites"][0][1]


def test_each_variant_runs_the_triton_kernel_in_a_copy(interpreted):
    swapped = interpreted["swapped"]
    assert swapped["fused_layer_norm"]["ln1"] == "TritonLayerNorm" and swapped["fused_layer_norm"]["ln2"] == "RMSNorm"
    assert swapped["fused_rms_norm"]["ln2"] == "TritonRMSNorm"
    assert swapped["fused_softmax"]["attn.sm"] == "TritonSoftmax"
    assert swapped["fused_bias_gelu"]["mlp.0"] == "LinearBiasGELU" and swapped["fused_bias_gelu"]["mlp.1"] == "Identity"
    assert swapped["fused_linear_cross_entropy"]["head"] == "DeferredLinearHead"
    assert swapped["fused_cross_entropy"] == {}  # no copy: only the function is swapped
    assert interpreted["direct"] == {"ce": 1, "lce": 1}  # the fused paths were taken, once each


def test_compare_finds_each_correct_as_a_training_step_with_timing_not_meaningful(interpreted):
    assert interpreted["mode"] == "training" and interpreted["unchanged"]
    for name, r in interpreted["results"].items():
        assert r["status"] == "ok" and r["decision"] == "need_more_evidence", (name, r["reason"])
        assert r["timing_meaningful"] is False and "not meaningful" in r["reason"]
        assert r["compared"]["parameter_gradients"] == 12 and r["compared"]["optimizer_states"] == 36, (name, r)
