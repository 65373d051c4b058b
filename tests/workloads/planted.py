"""Planted workloads: small functions with one known performance problem each, and clean ones.

Each builder returns ``(fn, profile_options)``; ``wb.profile(fn, **profile_options)`` then
``run.hypotheses`` must rank the planted category first (tests/workloads/test_planted.py, on runs recorded
by tests/data/record_planted_runs.py). Sizes: the planted problem dominates on one thread, calls stay short.
"""
from __future__ import annotations

import functools
import itertools
import time

import numpy as np
import torch

PLANTED: dict[str, list] = {}
CLEAN: list = []


def planted(category: str):
    def register(builder):
        PLANTED.setdefault(category, []).append(builder)
        return builder
    return register


# -- launch_overhead: many ops far smaller than their dispatch cost ---------------------------
@planted("launch_overhead")
def scalar_loop():
    x = torch.randn(16)

    def step():
        y = x
        for _ in range(60):
            y = y * 0.5 + 1.0
        return y
    return step, {}


@planted("launch_overhead")
def deep_narrow_matmuls():
    weights = [torch.randn(8, 8) * 0.3 for _ in range(30)]
    x = torch.randn(4, 8)

    def forward():
        y = x
        for w in weights:
            y = torch.relu(y @ w)
        return y
    return forward, {}


# -- host_bound: the host works outside PyTorch ops between them -----------------------------
@planted("host_bound")
def python_feature_loop():
    def features():
        acc = [((i * 7919) % 104729) / 104729.0 for i in range(20000)]
        return torch.tensor(acc[:64]).sum()
    return features, {}


@planted("host_bound")
def numpy_preprocessing():
    rng = np.random.default_rng(0)
    raw = rng.random(150_000)

    def prepare():
        ranks = np.argsort(np.argsort(raw))          # single-threaded numpy work, invisible to the profiler
        return torch.from_numpy(ranks[:256]).float().mean()
    return prepare, {}


# -- memory_bound: chains of full passes over large tensors ----------------------------------
@planted("memory_bound")
def elementwise_chain():
    x = torch.randn(1_000_000)

    def chain():
        y = torch.sigmoid(x * 1.5 + 0.25)
        return torch.relu(y - 0.5) * y
    return chain, {}


@planted("memory_bound")
def norm_softmax_rows():
    x = torch.randn(256, 4096)

    def rows():
        z = torch.nn.functional.layer_norm(x, (4096,))
        return torch.softmax(z, dim=-1).amax(dim=0)
    return rows, {}


# -- compute_bound: matrix work above the ridge ----------------------------------------------
@planted("compute_bound")
def square_matmul():
    a, b = torch.randn(384, 384), torch.randn(384, 384)
    return (lambda: a @ b), {}


@planted("compute_bound")
def batched_attention_scores():
    q, k = torch.randn(8, 128, 256), torch.randn(8, 256, 128)
    return (lambda: torch.bmm(q, k)), {}


def fresh_buffer_cost_ratio(n_floats: int = 9_000_000, samples: int = 7) -> float:
    """How much more filling a freshly allocated buffer costs than filling a reused one, in this
    process now (median of interleaved samples). The allocation-churn workloads plant the cost of
    fresh pages (mmap, first-touch faults, zeroing); whether the OS charges it depends on the state of
    the process and the machine (a freed block served again from the heap, a host that already backs
    the guest's pages). Below ~1.5x the planted problem is absent, and no diagnosis can be judged on it."""
    reused = torch.empty(n_floats)
    fresh_ns, reused_ns = [], []
    for _ in range(samples):
        t0 = time.perf_counter_ns()
        torch.empty(n_floats).fill_(1.0)
        t1 = time.perf_counter_ns()
        reused.fill_(1.0)
        t2 = time.perf_counter_ns()
        fresh_ns.append(t1 - t0)
        reused_ns.append(t2 - t1)
    return float(np.median(fresh_ns) / max(np.median(reused_ns), 1.0))


PLANTED_COST_MIN_RATIO = 1.5


# -- allocation_churn: a large buffer allocated afresh on every call --------------------------
@planted("allocation_churn")
def clone_large_buffer():
    x = torch.randn(8_500_000)
    return (lambda: x.clone()), {"repeat": 12}


@planted("allocation_churn")
def concat_into_new_buffer():
    a, b = torch.randn(4_500_000), torch.randn(4_500_000)
    return (lambda: torch.cat([a, b])), {"repeat": 12}


# -- cold_start: expensive one-time work on the first call ------------------------------------
@planted("cold_start")
def lazy_lookup_table():
    @functools.lru_cache(maxsize=None)
    def table():
        g = torch.Generator().manual_seed(0)
        # ~60 ms once LAPACK is initialised (700x700 took ~19 ms: too close to the rule's 20 ms
        # threshold in a process where an earlier test had already paid linalg's lazy init)
        m = torch.randn(1200, 1200, generator=g)
        return torch.linalg.inv(m @ m.T + 1200 * torch.eye(1200))[:, :16].contiguous()

    x = torch.randn(4, 1200)
    return (lambda: x @ table()), {}


@planted("cold_start")
def lazy_module_init():
    # weights are created and initialised on the first call: 19.2 M parameters, ~60-200 ms once
    # (6.4 M parameters gave 24-72 ms, too close to the rule's 20 ms excess threshold)
    layer = torch.nn.LazyLinear(32)
    x = torch.randn(2, 600_000)

    def forward():
        with torch.no_grad():
            return layer(x)
    return forward, {}


# -- measurement: the timing itself cannot be trusted -----------------------------------------
@planted("measurement")
def data_dependent_sleep():
    rng = np.random.default_rng(1)
    return (lambda: time.sleep(float(rng.uniform(0.0002, 0.004)))), {"repeat": 24}


@planted("measurement")
def too_few_repeats():
    x = torch.randn(64, 64)
    return (lambda: torch.tanh(x @ x)), {"repeat": 4}


# -- graph_break and recompilation: torch.compile (eager backend: dynamo only, cheap) ----------
@planted("graph_break")
def data_dependent_branch():
    w = torch.randn(256, 256)

    @torch.compile(backend="eager")
    def f(x):
        y = x @ w
        if y.sum() > 0:          # Tensor -> Python bool: dynamo breaks the graph here
            y = y @ w
        if y.mean() < 1.0:       # and again
            y = y.tanh() @ w
        return (y @ w).relu()
    x = torch.randn(256, 256)
    return (lambda: f(x)), {"repeat": 60}


@planted("graph_break")
def item_in_the_middle():
    w = torch.randn(256, 256)

    @torch.compile(backend="eager")
    def f(x):
        y = (x @ w).tanh()
        scale = float(y.abs().max().item())   # .item() leaves the graph
        z = (y / scale) @ w
        print_free = z.sum().item()
        return z @ w * print_free
    x = torch.randn(256, 256)
    return (lambda: f(x)), {"repeat": 60}


@planted("recompilation")
def changing_batch_size():
    @torch.compile(backend="eager", dynamic=False)
    def f(x):
        return torch.relu(x * 2 + 1).sum(0)
    inputs = itertools.cycle([torch.randn(n, 8) for n in range(3, 40)])
    return (lambda: f(next(inputs))), {}


@planted("recompilation")
def python_int_argument():
    @torch.compile(backend="eager", dynamic=False)
    def f(x, shift):
        return torch.roll(x, shifts=shift, dims=0).cumsum(0)   # a static int: guarded on its value
    x = torch.randn(64, 16)
    shifts = itertools.cycle(range(1, 30))
    return (lambda: f(x, next(shifts))), {}


# -- clean: nothing planted; no high-confidence hypothesis may fire ---------------------------
def clean(builder):
    CLEAN.append(builder)
    return builder


@clean
def moderate_linear_layer():
    layer = torch.nn.Linear(512, 512)
    x = torch.randn(64, 512)

    def forward():
        with torch.no_grad():
            return layer(x)
    return forward, {}


@clean
def single_reduction():
    x = torch.randn(512, 1024)
    return (lambda: x.sum(dim=1)), {}
