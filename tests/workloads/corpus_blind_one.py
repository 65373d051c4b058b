"""A fresh batch of planted CPU workloads for an honest held-out score: ``half="fresh"``.

Written on 2026-12-01 (15:40-16:05 UTC) by an engineer who had NOT read the diagnosis rules
(workbench/hypotheses), the analysis code (workbench/analysis), their thresholds or their tests:
each workload was written from the category meanings in DESIGN.md (its "Hypotheses" table) alone,
the way an independent user would write a slow cell, and its planted problem is meant to be the one
a person looking at the profile would name (it dominates clearly; no threshold was guessed at).
Nothing here is copied from tests/workloads/planted.py or tests/workloads/corpus.py (only the
``Workload`` type and the ``(fn, profile_options)`` builder format are shared).

Every workload is ``half="fresh"``: a third half, beside corpus.py's tuning and held-out halves,
on which no threshold may ever be tuned. If a rule is changed after looking at these results, this
batch is no longer held out, and a new fresh batch has to be written for the next honest score.
benchmarks/diagnosis_accuracy.py scores it (``--half fresh``); it is deliberately not part of the
test suite.

The workloads vary op types, sizes, thread counts (1 or 2), repeat counts (5-50), training
(backward) and inference; a call stays short (about 50 ms or less).
"""

from __future__ import annotations

import concurrent.futures
import functools
import gc
import itertools
import math
from typing import Any, Callable

import numpy as np
import torch
import torch.nn.functional as functional

from tests.workloads.corpus import Workload, registrars

HALF = "fresh"
FRESH: list[Workload] = []


planted, clean, workloads = registrars(FRESH, lambda index: HALF)


# == launch_overhead: per-op dispatch cost dominates (many ops, each far smaller than its cost) ======
@planted("launch_overhead")
def scalar_dot_product_loop():
    # a dot product written element by element: ~800 dispatches on 0-d tensors per call
    v = torch.randn(200)

    def dot():
        acc = torch.zeros(())
        for i in range(200):
            acc = acc + v[i] * v[(i + 1) % 200]
        return acc

    return dot, {"threads": 1, "repeat": 20}


@planted("launch_overhead")
def chained_tiny_matmuls():
    mats = [torch.randn(6, 6) * 0.4 for _ in range(64)]

    def chain():
        return functools.reduce(lambda a, b: torch.tanh(a @ b), mats)

    return chain, {"threads": 2, "repeat": 25}


@planted("launch_overhead", kind="training")
def tiny_conv_stack_training():
    layers: list[torch.nn.Module] = []
    for _ in range(8):
        layers += [torch.nn.Conv2d(4, 4, 3, padding=1), torch.nn.ReLU()]
    model = torch.nn.Sequential(*layers)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3, foreach=False)
    x, target = torch.randn(1, 4, 8, 8), torch.randn(1, 4, 8, 8)

    def step():
        opt.zero_grad(set_to_none=True)
        loss = (model(x) - target).abs().mean()
        loss.backward()
        opt.step()
        return loss.detach()

    return step, {"threads": 1, "repeat": 15}


@planted("launch_overhead")
def ema_over_many_small_tensors():
    params = [torch.randn(10) for _ in range(120)]
    shadow = [p.clone() for p in params]

    def update():
        with torch.no_grad():
            for s, p in zip(shadow, params):
                s.mul_(0.99).add_(p, alpha=0.01)
        return shadow[0]

    return update, {"threads": 1, "repeat": 40}


# == host_bound: the time is in host work outside PyTorch ops (Python, numpy, data preparation) ====
@planted("host_bound")
def python_tokenise_and_pad():
    rng = np.random.default_rng(3)
    vocab_words = [f"w{i}" for i in range(3000)]
    sentences = [" ".join(rng.choice(vocab_words, size=int(rng.integers(6, 20)))) for _ in range(400)]
    table = torch.nn.Embedding(5000, 32)

    def encode():
        rows = []
        for s in sentences:
            ids = [(sum(ord(c) for c in word) * 31) % 5000 for word in s.split()]
            rows.append((ids + [0] * 24)[:24])
        with torch.no_grad():
            return table(torch.tensor(rows)).mean(1)

    return encode, {"threads": 1, "repeat": 10}


@planted("host_bound")
def numpy_spectral_features():
    rng = np.random.default_rng(5)
    signals = rng.standard_normal((48, 8192)).astype(np.float32)
    proj = torch.nn.Linear(4097, 16)

    def features():
        spec = np.log1p(np.abs(np.fft.rfft(signals * np.hanning(8192), axis=1)))
        spec = (spec - spec.mean(axis=1, keepdims=True)) / (spec.std(axis=1, keepdims=True) + 1e-6)
        with torch.no_grad():
            return proj(torch.from_numpy(spec.astype(np.float32)))

    return features, {"threads": 2, "repeat": 12}


@planted("host_bound", kind="training")
def python_collate_training():
    rng = np.random.default_rng(11)
    samples = [
        {"x": [float(v) for v in rng.standard_normal(16)], "y": float(rng.standard_normal())} for _ in range(512)
    ]
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))
    opt = torch.optim.SGD(model.parameters(), lr=1e-2)
    order = itertools.cycle(range(0, 512, 128))

    def step():
        start = next(order)
        rows, ys = [], []
        for sample in samples[start : start + 128]:  # per-sample standardisation in Python
            xs = sample["x"]
            mean = sum(xs) / len(xs)
            std = math.sqrt(sum((v - mean) ** 2 for v in xs) / len(xs)) + 1e-6
            rows.append([(v - mean) / std for v in xs])
            ys.append([sample["y"]])
        x, y = torch.tensor(rows), torch.tensor(ys)
        opt.zero_grad(set_to_none=True)
        loss = functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        return loss.detach()

    return step, {"threads": 1, "repeat": 15}


# == memory_bound: chains of full passes over large tensors, low arithmetic intensity ============
@planted("memory_bound")
def inplace_activation_chain():
    # preallocated output, every op a full in-place pass over 8 MB: bandwidth, no allocation
    x = torch.randn(2_000_000)
    buf = torch.empty_like(x)

    def chain():
        buf.copy_(x).mul_(1.7).add_(0.3).sigmoid_().mul_(x).abs_().sqrt_().clamp_(0.0, 0.9)
        return buf

    return chain, {"threads": 2, "repeat": 12}


@planted("memory_bound", kind="training")
def softplus_penalty_training():
    w = torch.randn(1_000_000, requires_grad=True)
    mask = (torch.rand(1_000_000) > 0.3).float()

    def step():
        w.grad = None
        loss = (functional.softplus(w * 1.3 - 0.2) * mask).pow(2).mean()
        loss.backward()
        return loss.detach()

    return step, {"threads": 1, "repeat": 10}


@planted("memory_bound")
def symmetrise_and_centre():
    x = torch.randn(1536, 1536)

    def centre():
        r = (x + x.t()) * 0.5
        r = r - r.mean(dim=1, keepdim=True)
        return r.square().mean()

    return centre, {"threads": 1, "repeat": 12}


# == compute_bound: the dominant ops are matrix work near the compute roof =======================
@planted("compute_bound")
def wide_projection_inference():
    proj = torch.nn.Linear(1024, 1024)
    x = torch.randn(256, 1024)

    def forward():
        with torch.no_grad():
            return proj(x)

    return forward, {"threads": 2, "repeat": 20}


@planted("compute_bound", kind="training")
def conv_block_training():
    conv = torch.nn.Conv2d(32, 64, 3, padding=1)
    opt = torch.optim.SGD(conv.parameters(), lr=1e-3)
    x = torch.randn(2, 32, 32, 32)

    def step():
        opt.zero_grad(set_to_none=True)
        loss = conv(x).square().mean()
        loss.backward()
        opt.step()
        return loss.detach()

    return step, {"threads": 2, "repeat": 8}


@planted("compute_bound")
def einsum_head_mixing():
    q = torch.randn(4, 8, 256, 64)
    k = torch.randn(4, 8, 256, 64)
    v = torch.randn(4, 8, 256, 64)

    def mix():
        scores = torch.einsum("bhqd,bhkd->bhqk", q, k)
        return torch.einsum("bhqk,bhkd->bhqd", scores, v)

    return mix, {"threads": 1, "repeat": 10}


# == allocation_churn: large allocations and frees repeat every call ==============================
@planted("allocation_churn")
def fresh_mask_every_call():
    # a 36 MB mask built every call, of which a 64x64 corner is used
    scores = torch.randn(64, 64)

    def attend():
        mask = torch.full((3072, 3072), -1e9)
        return (scores + mask[:64, :64]).softmax(-1)

    return attend, {"threads": 1, "repeat": 15}


@planted("allocation_churn")
def grow_by_concatenation():
    chunks = [torch.randn(16_384) for _ in range(48)]

    def collect():
        out = torch.empty(0)
        for c in chunks:  # a new, larger buffer every iteration
            out = torch.cat([out, c])
        return out

    return collect, {"threads": 2, "repeat": 20}


@planted("allocation_churn", kind="training")
def snapshot_weights_training():
    model = torch.nn.Sequential(torch.nn.Linear(2048, 4096), torch.nn.ReLU(), torch.nn.Linear(4096, 8))
    opt = torch.optim.SGD(model.parameters(), lr=1e-4)
    x, y = torch.randn(2, 2048), torch.randn(2, 8)

    def step():
        backup = [p.detach().clone() for p in model.parameters()]  # a full copy every step, "to roll back"
        opt.zero_grad(set_to_none=True)
        loss = functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        if not torch.isfinite(loss):
            with torch.no_grad():
                for p, b in zip(model.parameters(), backup):
                    p.copy_(b)
        return loss.detach()

    return step, {"threads": 1, "repeat": 8}


# == graph_break: torch.compile splits the region (eager backend: dynamo only) ====================
@planted("graph_break")
def boolean_mask_in_compiled():
    w = torch.randn(128, 128) * 0.1

    def stage(x):
        h = torch.tanh(x @ w)
        return h + h[h > 0.2].mean()  # data-dependent shape: dynamo cannot trace through

    @torch.compile(backend="eager")
    def f(x):  # stages written out (a break inside a loop skips the frame)
        x = stage(x)
        x = stage(x)
        return stage(x)

    x = torch.randn(128, 128)
    return (lambda: f(x)), {"threads": 1, "repeat": 30}


@planted("graph_break")
def disabled_helper_in_compiled():
    @torch.compiler.disable
    def record_stats(t):
        return t.std()

    w = torch.randn(96, 96) * 0.1

    @torch.compile(backend="eager")
    def f(x):
        x = torch.relu(x @ w) + 0.01
        x = x / (record_stats(x) + 1.0)
        x = torch.relu(x @ w) + 0.01
        x = x / (record_stats(x) + 1.0)
        x = torch.relu(x @ w) + 0.01
        x = x / (record_stats(x) + 1.0)
        return torch.relu(x @ w)

    x = torch.randn(96, 96)
    return (lambda: f(x)), {"threads": 2, "repeat": 25}


@planted("graph_break", kind="training")
def unique_labels_training():
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 20))
    opt = torch.optim.SGD(model.parameters(), lr=1e-2)

    @torch.compile(backend="eager")
    def loss_fn(x, y):
        logits = model(x)
        present = torch.unique(y)  # dynamic output shape: a break
        sub = logits[:, present]
        return functional.cross_entropy(sub, torch.searchsorted(present, y))

    x, y = torch.randn(64, 32), torch.randint(0, 20, (64,))

    def step():
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(x, y)
        loss.backward()
        opt.step()
        return loss.detach()

    return step, {"threads": 1, "repeat": 20}


# == recompilation: compiles repeat in the steady state ===========================================
@planted("recompilation")
def variable_length_tensor_list():
    @torch.compile(backend="eager")
    def merge(parts):
        return torch.stack(parts).sum(0) * 0.5

    pool = [torch.randn(32, 32) for _ in range(30)]
    lengths = itertools.cycle(range(2, 30))
    return (lambda: merge(pool[: next(lengths)])), {"threads": 1, "repeat": 20}


@planted("recompilation", kind="training")
def task_name_dispatch_training():
    tasks = [f"task{i}" for i in range(12)]
    trunk = torch.nn.Linear(24, 48)
    heads = torch.nn.ModuleDict({t: torch.nn.Linear(48, 4) for t in tasks})
    params = list(trunk.parameters()) + list(heads.parameters())
    opt = torch.optim.SGD(params, lr=1e-2)

    @torch.compile(backend="eager")
    def forward(x, task):
        return heads[task](torch.relu(trunk(x)))

    x, y = torch.randn(16, 24), torch.randn(16, 4)
    order = itertools.cycle(tasks)

    def step():
        opt.zero_grad(set_to_none=True)
        loss = functional.mse_loss(forward(x, next(order)), y)
        loss.backward()
        opt.step()
        return loss.detach()

    return step, {"threads": 1, "repeat": 16}


@planted("recompilation")
def varying_image_resolution():
    conv = torch.nn.Conv2d(3, 8, 3, padding=1)

    @torch.compile(backend="eager", dynamic=False)
    def f(img):
        with torch.no_grad():
            return torch.relu(conv(img)).mean((2, 3))

    images = itertools.cycle([torch.randn(1, 3, s, s) for s in range(16, 68, 4)])
    return (lambda: f(next(images))), {"threads": 2, "repeat": 12}


# == cold_start: expensive one-time work on the first call, cheap afterwards ======================
@planted("cold_start")
def lazy_sinusoid_table():
    state: dict[str, torch.Tensor] = {}
    x = torch.randn(32, 64)
    positions = torch.arange(32)

    def embed():
        if "table" not in state:  # built in Python on first use
            rows = [
                [
                    math.sin(p / 10000 ** (d / 64)) if d % 2 == 0 else math.cos(p / 10000 ** ((d - 1) / 64))
                    for d in range(64)
                ]
                for p in range(2048)
            ]
            state["table"] = torch.tensor(rows)
        return x + state["table"][positions]

    return embed, {"threads": 1, "repeat": 30}


@planted("cold_start")
def lazy_kmeans_codebook():
    gen = torch.Generator().manual_seed(2)
    points = torch.randn(10_000, 16, generator=gen)
    queries = torch.randn(64, 16, generator=gen)
    state: dict[str, torch.Tensor] = {}

    def assign():
        if "codebook" not in state:  # k-means on first use
            centroids = points[:256].clone()
            for _ in range(15):
                labels = torch.cdist(points, centroids).argmin(1)
                sums = torch.zeros_like(centroids).index_add_(0, labels, points)
                counts = torch.bincount(labels, minlength=256).clamp_min(1).unsqueeze(1)
                centroids = sums / counts
            state["codebook"] = centroids
        return torch.cdist(queries, state["codebook"]).argmin(1)

    return assign, {"threads": 2, "repeat": 25}


@planted("cold_start", kind="training")
def dataset_statistics_training():
    data = torch.randn(400_000, 32) * 3.0 + 1.0
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))
    opt = torch.optim.SGD(model.parameters(), lr=1e-2)
    stats: dict[str, torch.Tensor] = {}
    batches = itertools.cycle(range(0, 4096, 64))

    def step():
        if not stats:  # normalisation statistics, chunk by chunk, on first step
            total = torch.zeros(32, dtype=torch.float64)
            total_sq = torch.zeros(32, dtype=torch.float64)
            for chunk in data.split(500):
                c = chunk.double()
                total += c.sum(0)
                total_sq += (c * c).sum(0)
            mean = total / data.shape[0]
            stats["mean"] = mean.float()
            stats["std"] = (total_sq / data.shape[0] - mean * mean).sqrt().float()
        i = next(batches)
        x = (data[i : i + 64] - stats["mean"]) / stats["std"]
        opt.zero_grad(set_to_none=True)
        loss = model(x).square().mean()
        loss.backward()
        opt.step()
        return loss.detach()

    return step, {"threads": 1, "repeat": 20}


# == measurement: the timing itself cannot be trusted =============================================
@planted("measurement")
def gc_pause_spikes():
    # every sixth call pauses for a full garbage collection over a large live object graph (and the
    # rest of the process heap): a long tail over a ~1 ms median, so the median is not the story
    live = [{"id": i, "tags": [i, str(i)]} for i in range(30_000)]
    x = torch.randn(512, 512)
    calls = itertools.count()

    def work():
        if next(calls) % 6 == 5:
            gc.collect()
        return torch.relu(x).sum() + len(live)

    return work, {"threads": 1, "repeat": 24}


@planted("measurement")
def oversubscribed_thread_pool():
    # four Python threads each running multi-threaded matmuls on a 2-thread budget
    mats = [torch.randn(320, 320) for _ in range(4)]
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=4)

    def work():
        return [f.result() for f in [pool.submit(lambda m=m: (m @ m).sum()) for m in mats]]

    return work, {"threads": 2, "repeat": 20}


# == clean: well-written code, nothing planted; no high-confidence hypothesis may fire ============
@clean()
def layernorm_mlp_inference():
    block = torch.nn.Sequential(
        torch.nn.LayerNorm(256), torch.nn.Linear(256, 512), torch.nn.GELU(), torch.nn.Linear(512, 256)
    )
    x = torch.randn(64, 256)

    def forward():
        with torch.no_grad():
            return block(x)

    return forward, {"threads": 2, "repeat": 20}


@clean()
def topk_over_scores():
    scores = torch.randn(128, 2048)
    return (lambda: torch.topk(scores, 16, dim=1)), {"threads": 1, "repeat": 30}


@clean()
def gru_batch_inference():
    gru = torch.nn.GRU(64, 64, batch_first=True)
    x = torch.randn(16, 32, 64)

    def forward():
        with torch.no_grad():
            return gru(x)[1]

    return forward, {"threads": 2, "repeat": 20}


@clean(kind="training")
def mlp_training_adam():
    model = torch.nn.Sequential(torch.nn.Linear(128, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, foreach=True)
    x, y = torch.randn(256, 128), torch.randint(0, 10, (256,))

    def step():
        opt.zero_grad(set_to_none=True)
        loss = functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss.detach()

    return step, {"threads": 1, "repeat": 15}
