"""A larger corpus of planted CPU workloads, split into a tuning half and a held-out half.

Each workload is a builder returning ``(fn, profile_options)`` with one known performance problem
(its ``category``), or none (``category=None``: clean, no high-confidence hypothesis may fire).
``wb.profile(fn, **profile_options)`` then ``run.hypotheses`` should put the planted category
first (benchmarks/diagnosis_accuracy.py scores it; tests/workloads/test_corpus.py holds the
tuning half).

The split rule, fixed before any result was looked at: workloads are numbered in definition order
across the whole file (clean ones included), starting at 0; an even number is ``half="tuning"``,
an odd one ``half="heldout"``. No threshold may be tuned on a held-out workload.

The workloads vary op types, sizes, thread counts (1 or 2), repeat counts (5-50), training
(backward) and inference. A call stays short (about 50 ms or less) and the planted problem is
meant to dominate clearly, not sit at a rule's threshold.

This file is independent of tests/workloads/planted.py (the small planted set the rules were
first written against): none of these functions is a copy of one there.
"""
from __future__ import annotations

import functools
import itertools
import json
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
import torch

HALVES = ("tuning", "heldout")


@dataclass(frozen=True)
class Workload:
    name: str
    category: str | None          # None: clean
    half: str
    kind: str                     # "inference" or "training"
    builder: Callable[[], tuple[Callable[[], Any], dict]] = field(repr=False)

    def build(self) -> tuple[Callable[[], Any], dict]:
        return self.builder()

    @property
    def compiled(self) -> bool:
        return self.category in ("graph_break", "recompilation")


CORPUS: list[Workload] = []


def registrars(store: list[Workload], half_of: Callable[[int], str]):
    """``(planted, clean, workloads)`` over ``store``: the decorators that add a builder to it
    (``half_of(index)`` gives a new workload's half) and the filter that reads it back."""
    def register(category: str | None, kind: str):
        def add(builder):
            store.append(Workload(builder.__name__, category, half_of(len(store)), kind, builder))
            return builder
        return add

    def planted(category: str, kind: str = "inference"):
        return register(category, kind)

    def clean(kind: str = "inference"):
        return register(None, kind)

    def workloads(half: str | None = None, category: str | None = "*") -> list[Workload]:
        return [w for w in store if (half is None or w.half == half) and (category == "*" or w.category == category)]

    return planted, clean, workloads


# the split rule: alternate in definition order
planted, clean, workloads = registrars(CORPUS, lambda index: HALVES[index % 2])


# == launch_overhead: many ops far smaller than their dispatch cost ============================
@planted("launch_overhead")
def fused_elementwise_loop():
    # single fused ops (addcmul, lerp, clamp) on 32 elements: each is one dispatch, almost no work
    x, y = torch.randn(32), torch.randn(32)

    def step():
        z = x
        for _ in range(80):
            z = torch.addcmul(z, y, z, value=0.01).lerp_(y, 0.1).clamp_(-3.0, 3.0)
        return z
    return step, {"threads": 1}


@planted("launch_overhead")
def deep_tiny_mlp():
    layers = torch.nn.Sequential(*[m for _ in range(40) for m in (torch.nn.Linear(16, 16), torch.nn.Tanh())])
    x = torch.randn(2, 16)

    def forward():
        with torch.no_grad():
            return layers(x)
    return forward, {"threads": 2}


@planted("launch_overhead", kind="training")
def tiny_mlp_training_step():
    model = torch.nn.Sequential(*[m for _ in range(12) for m in (torch.nn.Linear(8, 8), torch.nn.ReLU())])
    opt = torch.optim.SGD(model.parameters(), lr=1e-3, foreach=True)
    x, y = torch.randn(4, 8), torch.randn(4, 8)

    def step():
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        return loss.detach()
    return step, {"threads": 1, "repeat": 30}


@planted("launch_overhead")
def per_row_reductions():
    rows = list(torch.randn(150, 24).unbind(0))

    def reduce_rows():
        return torch.stack([r.abs().max() + r.mean() for r in rows])
    return reduce_rows, {"threads": 1}


@planted("launch_overhead")
def scalar_rnn_cell_loop():
    cell = torch.nn.GRUCell(6, 6)
    xs = torch.randn(60, 1, 6)

    def run_sequence():
        with torch.no_grad():
            h = torch.zeros(1, 6)
            for t in range(xs.shape[0]):
                h = cell(xs[t], h)
            return h
    return run_sequence, {"threads": 2, "repeat": 15}


# == host_bound: the host works outside PyTorch ops ============================================
@planted("host_bound")
def python_string_features():
    words = [f"token{i % 977}_{i % 13}" for i in range(6000)]

    def featurise():
        counts: dict[str, int] = {}
        for w in words:
            key = w.split("_")[0].upper()
            counts[key] = counts.get(key, 0) + len(w)
        return torch.tensor(sorted(counts.values())[:32], dtype=torch.float32).sum()
    return featurise, {"threads": 1}


@planted("host_bound")
def numpy_augmentation():
    rng = np.random.default_rng(3)
    img = rng.random((256, 256)).astype(np.float32)

    def augment():
        a = np.rot90(img).copy()
        a = np.sort(a, axis=1)                       # numpy work the profiler cannot see
        a = np.cumsum(a, axis=0)
        return torch.from_numpy(a[:8, :8].copy()).mean()
    return augment, {"threads": 2}


@planted("host_bound", kind="training")
def python_batch_assembly_training():
    model = torch.nn.Linear(32, 4)
    opt = torch.optim.SGD(model.parameters(), lr=1e-2)
    records = [{"x": [float((i * j) % 7) for j in range(32)], "y": i % 4} for i in range(400)]

    def step():
        # building the batch in Python, record by record, dominates the tiny model's step
        xs = [[v / 7.0 for v in r["x"]] for r in records]
        ys = [r["y"] for r in records]
        xb, yb = torch.tensor(xs[:16]), torch.tensor(ys[:16])
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.cross_entropy(model(xb), yb)
        loss.backward()
        opt.step()
        return loss.detach()
    return step, {"threads": 1, "repeat": 25}


@planted("host_bound")
def json_round_trip():
    payload = {"rows": [{"id": i, "v": [i * 0.5, i * 0.25, i * 0.125]} for i in range(1500)]}

    def decode():
        data = json.loads(json.dumps(payload))
        return torch.tensor([r["v"][0] for r in data["rows"][:64]]).sum()
    return decode, {"threads": 1, "repeat": 12}


@planted("host_bound")
def pure_python_prime_sieve():
    def sieve():
        n = 60000
        flags = [True] * n
        for p in range(2, int(n ** 0.5) + 1):
            if flags[p]:
                for q in range(p * p, n, p):
                    flags[q] = False
        return torch.tensor(sum(flags), dtype=torch.float32)
    return sieve, {"threads": 2}


# == memory_bound: chains of full passes over large tensors ====================================
@planted("memory_bound")
def gelu_residual_chain():
    x, r = torch.randn(2_000_000), torch.randn(2_000_000)

    def chain():
        y = torch.nn.functional.gelu(x) + r
        y = y * 0.5 - r * 0.25
        return torch.tanh(y) * y
    return chain, {"threads": 1}


@planted("memory_bound", kind="training")
def elementwise_loss_backward():
    w = torch.randn(1_000_000, requires_grad=True)
    x = torch.randn(1_000_000)

    def step():
        w.grad = None
        loss = (torch.sigmoid(x * w) - 0.5).pow(2).mean()
        loss.backward()
        return loss.detach()
    return step, {"threads": 1, "repeat": 20}


@planted("memory_bound")
def layernorm_softmax_rows():
    x = torch.randn(512, 2048)
    g = torch.randn(2048)

    def rows():
        z = torch.nn.functional.layer_norm(x, (2048,)) * g
        return torch.softmax(z, dim=-1) + z
    return rows, {"threads": 2}


@planted("memory_bound")
def masked_scale_chain():
    x = torch.randn(1024, 1536)
    mask = torch.rand(1024, 1536) > 0.3

    def chain():
        y = torch.where(mask, x * 1.25, torch.zeros_like(x))
        y = y.abs().sqrt() + y
        return y.clamp(-2.0, 2.0).sum(dim=0)
    return chain, {"threads": 1, "repeat": 30}


@planted("memory_bound")
def bias_relu_dropout_chain():
    x = torch.randn(4096, 512)
    b = torch.randn(512)
    keep = (torch.rand(4096, 512) > 0.1).float()

    def chain():
        with torch.no_grad():
            y = torch.relu(x + b) * keep
            return y * (1 / 0.9) + x
    return chain, {"threads": 2, "repeat": 15}


# == compute_bound: matrix work above the ridge ================================================
@planted("compute_bound")
def square_matmul_512():
    a, b = torch.randn(512, 512), torch.randn(512, 512)
    return (lambda: a @ b), {"threads": 2}


@planted("compute_bound")
def conv2d_inference():
    conv = torch.nn.Conv2d(64, 64, 3, padding=1, bias=False)
    x = torch.randn(1, 64, 40, 40)

    def forward():
        with torch.no_grad():
            return conv(x)
    return forward, {"threads": 1}


@planted("compute_bound", kind="training")
def wide_linear_training_step():
    layer = torch.nn.Linear(768, 768)
    x = torch.randn(192, 768)

    def step():
        layer.zero_grad(set_to_none=True)
        layer(x).square().mean().backward()
        return layer.weight.grad
    return step, {"threads": 2, "repeat": 20}


@planted("compute_bound")
def attention_scores_and_values():
    q, k, v = torch.randn(4, 192, 256), torch.randn(4, 256, 192), torch.randn(4, 192, 256)

    def attend():
        return torch.bmm(torch.bmm(q, k), v)
    return attend, {"threads": 1, "repeat": 10}


@planted("compute_bound")
def tall_skinny_gemm_chain():
    a = torch.randn(1024, 384)
    w1, w2 = torch.randn(384, 384), torch.randn(384, 384)

    def forward():
        return (a @ w1) @ w2
    return forward, {"threads": 2, "repeat": 40}


# == allocation_churn: large fresh buffers every call ==========================================
@planted("allocation_churn")
def fresh_zeros_scratch():
    x = torch.randn(2048)

    def step():
        scratch = torch.zeros(12_000_000)       # a 48 MiB scratch buffer, made afresh every call
        scratch[:2048] = x
        return scratch[:2048].sum()
    return step, {"threads": 1, "repeat": 12}


@planted("allocation_churn")
def double_precision_copy():
    x = torch.randn(6_000_000)
    return (lambda: x.double()), {"threads": 1, "repeat": 10}


@planted("allocation_churn")
def stack_into_fresh_batch():
    parts = [torch.randn(1_000_000) for _ in range(10)]
    return (lambda: torch.stack(parts)), {"threads": 2, "repeat": 15}


@planted("allocation_churn")
def pad_large_image():
    img = torch.randn(1, 3, 2000, 2000)
    return (lambda: torch.nn.functional.pad(img, (8, 8, 8, 8))), {"threads": 1, "repeat": 10}


@planted("allocation_churn", kind="training")
def fresh_gradient_buffer():
    w = torch.randn(10_000_000, requires_grad=True)

    def step():
        w.grad = None                           # backward allocates a fresh 40 MiB gradient every call
        (w * 2.0).sum().backward()
        return w.grad
    return step, {"threads": 1, "repeat": 12}


# == graph_break: torch.compile (eager backend: dynamo only, cheap) ============================
@planted("graph_break")
def branch_on_tensor_value():
    w = torch.randn(192, 192)

    @torch.compile(backend="eager")
    def f(x):
        y = torch.tanh(x @ w)
        if y.max() > 0.5:                      # Tensor -> Python bool
            y = y @ w
        if y.min() < -0.5:
            y = y.relu() @ w
        return y @ w
    x = torch.randn(192, 192)
    return (lambda: f(x)), {"threads": 1, "repeat": 40}


@planted("graph_break")
def tolist_in_forward():
    w = torch.randn(256, 256)

    @torch.compile(backend="eager")
    def f(x):
        y = (x @ w).sigmoid()
        scale = y.mean(dim=1)[:4].tolist()     # leaves the graph
        return (y * scale[0]) @ w
    x = torch.randn(256, 256)
    return (lambda: f(x)), {"threads": 2, "repeat": 40}


@planted("graph_break")
def explicit_graph_breaks():
    w = torch.randn(160, 160)

    @torch.compile(backend="eager")
    def f(x):
        for _ in range(3):
            x = torch.relu(x @ w)
            torch._dynamo.graph_break()
        return x
    x = torch.randn(160, 160)
    return (lambda: f(x)), {"threads": 1, "repeat": 40}


@planted("graph_break", kind="training")
def numpy_call_in_training_forward():
    layer = torch.nn.Linear(128, 128)

    @torch.compile(backend="eager")
    def loss_of(x):
        h = torch.relu(layer(x))
        shift = float(np.tanh(h.detach().numpy()).mean())   # a numpy round trip: a break
        return (layer(h) - shift).pow(2).mean()
    x = torch.randn(256, 128)

    def step():
        layer.zero_grad(set_to_none=True)
        loss = loss_of(x)
        loss.backward()
        return loss.detach()
    return step, {"threads": 1, "repeat": 40}


@planted("graph_break")
def print_free_item_chain():
    w = torch.randn(200, 200)

    @torch.compile(backend="eager")
    def f(x):
        a = (x @ w).abs().sum().item()
        b = (x.t() @ w).abs().sum().item()
        return x * (a / (a + b))
    x = torch.randn(200, 200)
    return (lambda: f(x)), {"threads": 2, "repeat": 40}


# == recompilation: compiles repeat in the steady state ========================================
@planted("recompilation")
def growing_sequence_length():
    @torch.compile(backend="eager", dynamic=False)
    def f(x):
        return torch.softmax(x @ x.transpose(0, 1), dim=-1).sum(0)
    inputs = itertools.cycle([torch.randn(n, 16) for n in range(4, 44)])
    return (lambda: f(next(inputs))), {"threads": 1}


@planted("recompilation")
def python_float_constant():
    @torch.compile(backend="eager", dynamic=False)
    def f(x, scale):
        return (x * scale).cumsum(0)
    x = torch.randn(32, 8)
    scales = itertools.cycle([0.5 + i / 10 for i in range(30)])
    return (lambda: f(x, next(scales))), {"threads": 2}


@planted("recompilation", kind="training")
def changing_batch_training():
    layer = torch.nn.Linear(16, 16)

    @torch.compile(backend="eager", dynamic=False)
    def loss_of(x):
        return layer(x).relu().mean()
    batches = itertools.cycle([torch.randn(n, 16) for n in range(2, 40, 1)])

    def step():
        layer.zero_grad(set_to_none=True)
        loss = loss_of(next(batches))
        loss.backward()
        return loss.detach()
    return step, {"threads": 1}


@planted("recompilation")
def module_attribute_changes():
    class Scaler(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.power = 1

        def forward(self, x):
            return x.pow(self.power).sum(1)

    m = Scaler()
    cm = torch.compile(m, backend="eager", dynamic=False)
    x = torch.randn(24, 24)
    powers = itertools.cycle(range(1, 28))

    def call():
        m.power = next(powers)                 # an int attribute guarded by value
        return cm(x)
    return call, {"threads": 1, "repeat": 25}


@planted("recompilation")
def alternating_ranks():
    @torch.compile(backend="eager", dynamic=False)
    def f(x):
        return x.flatten().sort().values[:8]
    shapes = [(n,) * 1 + (3,) * k for n in (5, 6, 7) for k in range(0, 4)] + [(2,) * k for k in range(2, 6)]
    inputs = itertools.cycle([torch.randn(*s) for s in shapes])
    return (lambda: f(next(inputs))), {"threads": 2}


# == cold_start: expensive one-time work on the first call =====================================
@planted("cold_start")
def lazy_vocabulary_cache():
    @functools.lru_cache(maxsize=None)
    def vocab():
        # a large one-time build (~0.3-0.6 s) against a sub-millisecond steady state
        return {f"w{i}": i for i in range(600_000)}

    ids = torch.arange(64)

    def lookup():
        v = vocab()
        return ids * (len(v) % 7)
    return lookup, {"threads": 1}


@planted("cold_start")
def lazy_orthogonal_init():
    # a weight initialised on the first call with an orthogonal init (a QR factorisation, ~50-150 ms
    # once) against a steady state of one small matmul. (A lazy module of realistic size is not a
    # planted cold start: its init costs only tens of steady-state calls, which reading its weights
    # every call outweighs.)
    state: dict[str, torch.Tensor] = {}
    x = torch.randn(4, 1500)

    def forward():
        if "w" not in state:
            g = torch.Generator().manual_seed(2)
            state["w"] = torch.nn.init.orthogonal_(torch.empty(1500, 1500), generator=g)[:, :16].contiguous()
        return x @ state["w"]
    return forward, {"threads": 2}


@planted("cold_start")
def first_call_factorisation():
    cache: dict[str, torch.Tensor] = {}
    x = torch.randn(8, 1000)

    def solve():
        if "q" not in cache:
            g = torch.Generator().manual_seed(5)
            m = torch.randn(1000, 1000, generator=g, dtype=torch.float64)
            q, _ = torch.linalg.qr(m @ m.T)
            cache["q"] = torch.linalg.eigh(q @ q.T).eigenvectors[:, :8].float()
        return x @ cache["q"]
    return solve, {"threads": 1, "repeat": 30}


@planted("cold_start", kind="training")
def lazy_label_index_training():
    model = torch.nn.Linear(32, 8)
    opt = torch.optim.SGD(model.parameters(), lr=1e-2)
    x = torch.randn(64, 32)
    state: dict[str, torch.Tensor] = {}

    def step():
        if "y" not in state:
            # a label index built once, in Python, on the first step (~0.3 s)
            index = {f"label-{i}": i % 8 for i in range(400_000)}
            state["y"] = torch.tensor([index[f"label-{i}"] for i in range(64)])
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.cross_entropy(model(x), state["y"])
        loss.backward()
        opt.step()
        return loss.detach()
    return step, {"threads": 1, "repeat": 20}


@planted("cold_start")
def compiled_on_first_call():
    @torch.compile(backend="eager")
    def f(x):
        return (x.sin() * x.cos()).sum()
    x = torch.randn(64)
    return (lambda: f(x)), {"threads": 1, "repeat": 50}


# == measurement: the timing itself cannot be trusted ==========================================
@planted("measurement")
def random_sleep():
    rng = np.random.default_rng(7)
    return (lambda: time.sleep(float(rng.uniform(0.0005, 0.006)))), {"threads": 1, "repeat": 30}


@planted("measurement")
def five_repeats_only():
    x = torch.randn(128, 128)
    return (lambda: torch.sigmoid(x @ x).sum()), {"threads": 1, "repeat": 5}


@planted("measurement")
def bimodal_wait():
    counter = itertools.count()

    def work():
        # every other call waits 8x longer (a data-dependent wait: no tensor work to find)
        time.sleep(0.004 if next(counter) % 2 else 0.0005)
    return work, {"threads": 1, "repeat": 24}


@planted("measurement")
def below_timer_resolution():
    x = torch.randn(4)
    return (lambda: x.shape[0]), {"threads": 1, "repeat": 20}


@planted("measurement")
def random_size_matmul():
    rng = np.random.default_rng(11)
    mats = {n: torch.randn(n, n) for n in (48, 96, 192, 320)}

    def work():
        m = mats[int(rng.choice([48, 96, 192, 320]))]
        return m @ m
    return work, {"threads": 2, "repeat": 36}


# == clean: nothing planted; no high-confidence hypothesis may fire ============================
@clean()
def mlp_inference_256():
    model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.GELU(), torch.nn.Linear(512, 256))
    x = torch.randn(128, 256)

    def forward():
        with torch.no_grad():
            return model(x)
    return forward, {"threads": 2}


@clean()
def row_sums():
    x = torch.randn(1024, 1024)
    return (lambda: x.sum(dim=1)), {"threads": 1}


@clean(kind="training")
def moderate_training_step():
    model = torch.nn.Sequential(torch.nn.Linear(256, 256), torch.nn.ReLU(), torch.nn.Linear(256, 64))
    opt = torch.optim.SGD(model.parameters(), lr=1e-3, foreach=True)
    x, y = torch.randn(256, 256), torch.randn(256, 64)

    def step():
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        return loss.detach()
    return step, {"threads": 1}


@clean()
def embedding_bag_lookup():
    bag = torch.nn.EmbeddingBag(20000, 64, mode="sum")
    idx = torch.randint(0, 20000, (4096,))
    offsets = torch.arange(0, 4096, 32)

    def lookup():
        with torch.no_grad():
            return bag(idx, offsets)
    return lookup, {"threads": 1}


@clean()
def sort_values():
    x = torch.randn(200_000)
    return (lambda: torch.sort(x).values), {"threads": 2, "repeat": 15}
