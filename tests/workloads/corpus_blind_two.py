"""A second blind batch of planted CPU workloads for an honest held-out score: ``half="fresh2"``.

Written on 2026-12-01 (17:35-18:20 UTC) by an engineer who had NOT read the diagnosis rules
(workbench/hypotheses), the analysis code (workbench/analysis), the health check
(workbench/capture/health.py), their tests (tests/hypotheses, tests/analysis), the other planted
corpora's workload bodies (tests/workloads/planted.py, corpus.py, corpus_blind_one.py) or the scorer
(benchmarks/diagnosis_accuracy.py), and who never ran workbench's diagnosis on these workloads.
Only DESIGN.md's "Hypotheses" table (the category meanings), corpus.py's ``Workload`` type and
``registrars`` function, corpus_blind_one.py's header and registration pattern, and the signature of
``wb.profile`` were read (the grep that showed corpus.py's ``Workload`` and ``registrars`` also printed,
by its -A40 context, corpus.py's first launch_overhead workload and the name of its second; nothing
here is taken from them). Each workload was checked with plain ``time.perf_counter`` timing (and,
where it helped, ``torch.profiler`` op tables) so that its planted problem is the one a person
looking at the profile would name; no threshold was guessed at.

Every workload is ``half="fresh2"``: a fourth half, on which no threshold may ever be tuned. If a
rule is changed after looking at these results, this batch is no longer held out either.

The workloads vary op types (recurrences, convs, matmuls, attention, reductions, indexing,
embeddings, layer norm, optimizer steps, strided copies), sizes, thread counts (1 or 2), repeat
counts (5-50), training (backward) and inference; a call stays short (about 50 ms or less on a
2-core machine), except the compiles of the torch.compile workloads (the recompilation ones compile
up to torch's recompile limit of 8 times: 0.1-0.6 s each with a warm inductor cache, several seconds
cold). The builders of compiled workloads call ``torch._dynamo.reset()`` so that every build starts
like a fresh kernel; the background-noise workload's thread stops itself 0.25 s after its last call.
"""

from __future__ import annotations

import functools
import io
import itertools
import math
import random
import re
import threading
import time

import numpy as np
import torch
import torch.nn.functional as functional

from tests.workloads.corpus import Workload, registrars

HALF = "fresh2"
FRESH2: list[Workload] = []


planted, clean, workloads = registrars(FRESH2, lambda index: HALF)


def _fresh_compiler_state() -> None:
    """Forget earlier torch.compile work, as a fresh notebook kernel would: a builder that compiles
    starts from no cached frames, so its first call compiles and its recompile budget is whole."""
    torch._dynamo.reset()


# == launch_overhead: thousands of ops, each far cheaper than its dispatch ==========================
@planted("launch_overhead")
def unrolled_tiny_rnn_cell():
    # an RNN over 150 steps with an 8-wide hidden state, written as a Python loop: ~600 dispatches of
    # 8x8 work per call
    generator = torch.Generator().manual_seed(11)
    inputs = torch.randn(150, 1, 4, generator=generator)
    w_in, w_hidden = torch.randn(4, 8, generator=generator), torch.randn(8, 8, generator=generator) * 0.3
    bias = torch.zeros(8)

    def step():
        hidden = torch.zeros(1, 8)
        for frame in inputs:
            hidden = torch.tanh(frame @ w_in + hidden @ w_hidden + bias)
        return hidden

    return step, {"threads": 1, "repeat": 20}


@planted("launch_overhead")
def per_sample_standardize_loop():
    # 256 samples of 12 features standardised one by one (mean, std, sub, div), then stacked
    generator = torch.Generator().manual_seed(12)
    batch = torch.randn(256, 12, generator=generator) * 3.0 + 1.0

    def step():
        rows = []
        for sample in batch:
            rows.append((sample - sample.mean()) / (sample.std() + 1e-5))
        return torch.stack(rows)

    return step, {"threads": 2, "repeat": 15}


@planted("launch_overhead", kind="training")
def deep_stack_of_6_wide_layers_training():
    # 48 Linear(6, 6) layers: forward, backward and a hand-written per-parameter SGD update, each op
    # on 36 numbers
    torch.manual_seed(13)
    layers = torch.nn.ModuleList(torch.nn.Linear(6, 6) for _ in range(48))
    batch, target = torch.randn(4, 6), torch.randn(4, 6)

    def step():
        hidden = batch
        for layer in layers:
            hidden = torch.relu(layer(hidden)) + hidden
        loss = ((hidden - target) ** 2).mean()
        loss.backward()
        with torch.no_grad():
            for parameter in layers.parameters():
                parameter.add_(parameter.grad, alpha=-1e-3)
                parameter.grad = None
        return loss.detach()

    return step, {"threads": 1, "repeat": 10}


@planted("launch_overhead")
def scalar_by_scalar_weighted_sum():
    # a weighted sum written element by element: 400 x (select, select, mul, add) on 0-d tensors
    generator = torch.Generator().manual_seed(14)
    values, weights = torch.randn(400, generator=generator), torch.rand(400, generator=generator)

    def step():
        total = torch.zeros(())
        for index in range(values.shape[0]):
            total = total + values[index] * weights[index]
        return total

    return step, {"threads": 1, "repeat": 25}


# == host_bound: Python / numpy work on the host, the torch ops are a small part ===================
@planted("host_bound")
def python_tokenizer_before_embedding():
    # a regex tokenizer, a suffix-stripping stemmer and a dict vocabulary in Python for 10,000 words,
    # then one embedding lookup
    rng = random.Random(21)
    words = ["".join(rng.choice("abcdefghij") for _ in range(rng.randint(2, 7))) for _ in range(500)]
    text = " ".join(
        rng.choice(words).capitalize() + rng.choice(["", "ing", "ed", "s"]) + rng.choice(["", ",", "."])
        for _ in range(10_000)
    )
    vocabulary = {word: index for index, word in enumerate(sorted(set(words)))}
    embedding = torch.nn.Embedding(len(vocabulary) + 1, 32)
    unknown = len(vocabulary)

    @torch.no_grad()
    def step():
        tokens = []
        for token in re.findall(r"[A-Za-z]+", text):
            token = token.lower()
            for suffix in ("ing", "ed", "s"):
                if token.endswith(suffix) and len(token) > len(suffix) + 1:
                    token = token[: -len(suffix)]
                    break
            tokens.append(token)
        ids = [vocabulary.get(token, unknown) for token in tokens]
        counts: dict[int, int] = {}
        for token_id in ids:
            counts[token_id] = counts.get(token_id, 0) + 1
        return embedding(torch.tensor(ids)).mean(0), len(counts)

    return step, {"threads": 1, "repeat": 20}


@planted("host_bound")
def numpy_image_augmentation_then_projection():
    # per call: numpy random crops, flips, colour jitter, per-image normalisation and a box blur of 16
    # images; torch then runs only a small projection of the result
    rng = np.random.default_rng(22)
    images = rng.random((16, 3, 72, 72), dtype=np.float32)
    projection = torch.randn(3 * 64 * 64, 16) / 110.0

    @torch.no_grad()
    def step():
        batch = np.empty((16, 3, 64, 64), dtype=np.float32)
        for index in range(16):
            top, left = rng.integers(0, 8, size=2)
            crop = images[index, :, top : top + 64, left : left + 64]
            if rng.random() < 0.5:
                crop = crop[:, :, ::-1]
            crop = crop * rng.uniform(0.8, 1.2, size=(3, 1, 1)).astype(np.float32)
            crop = (crop - crop.mean(axis=(1, 2), keepdims=True)) / (crop.std(axis=(1, 2), keepdims=True) + 1e-6)
            padded = np.pad(crop, ((0, 0), (1, 1), (1, 1)), mode="edge")
            blurred = sum(padded[:, row : row + 64, col : col + 64] for row in range(3) for col in range(3)) / 9.0
            batch[index] = np.clip(blurred, -3.0, 3.0)
        return torch.from_numpy(batch).flatten(1) @ projection

    return step, {"threads": 2, "repeat": 15}


@planted("host_bound")
def python_feature_engineering_records():
    # 4,000 dict records turned into 8 features each by plain Python (math, string ops, hashing),
    # then one Linear(8, 1) over the batch
    rng = random.Random(23)
    records = [
        {
            "price": rng.uniform(1, 500),
            "qty": rng.randint(0, 40),
            "name": f"item-{rng.randint(0, 9999)}",
            "tags": rng.sample(["a", "b", "c", "d", "e"], rng.randint(0, 4)),
        }
        for _ in range(4000)
    ]
    head = torch.nn.Linear(8, 1)

    @torch.no_grad()
    def step():
        rows = []
        for record in records:
            price, qty = record["price"], record["qty"]
            rows.append(
                [
                    math.log1p(price),
                    math.sqrt(qty),
                    price * qty / 1000.0,
                    len(record["name"]) / 10.0,
                    (hash(record["name"]) % 97) / 97.0,
                    len(record["tags"]) / 4.0,
                    1.0 if "a" in record["tags"] else 0.0,
                    math.sin(price / 50.0),
                ]
            )
        return head(torch.tensor(rows)).mean()

    return step, {"threads": 1, "repeat": 20}


@planted("host_bound", kind="training")
def python_collate_padding_training():
    # each training step tokenises 96 raw text lines in Python (split, hash each word into a
    # 1,000-id vocabulary), pads them in Python loops (a hand-written collate), then a small
    # embedding model runs forward, backward and an SGD step
    rng = random.Random(24)
    syllables = ["ka", "lo", "mi", "ter", "un", "ba", "zo", "rin"]
    lines = [
        " ".join("".join(rng.choice(syllables) for _ in range(rng.randint(1, 3))) for _ in range(rng.randint(20, 120)))
        for _ in range(512)
    ]
    labels = [rng.random() for _ in range(512)]
    torch.manual_seed(24)
    embedding, head = torch.nn.Embedding(1001, 8, padding_idx=0), torch.nn.Linear(8, 1)
    optimizer = torch.optim.SGD([*embedding.parameters(), *head.parameters()], lr=0.01)
    cursor = [0]

    def step():
        start = cursor[0] % 512
        cursor[0] += 96
        chosen = [lines[(start + offset) % 512] for offset in range(96)]
        tokenised = [
            [1 + sum(ord(char) * (31**place) for place, char in enumerate(word)) % 1000 for word in line.split()]
            for line in chosen
        ]
        width = max(len(row) for row in tokenised)
        padded, mask = [], []
        for row in tokenised:
            padded.append(row + [0] * (width - len(row)))
            mask.append([1.0] * len(row) + [0.0] * (width - len(row)))
        target = torch.tensor([labels[(start + offset) % 512] for offset in range(96)])
        ids, weights = torch.tensor(padded), torch.tensor(mask)
        pooled = (embedding(ids) * weights.unsqueeze(-1)).sum(1) / weights.sum(1, keepdim=True)
        loss = functional.mse_loss(head(pooled).squeeze(-1), target)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        return loss.detach()

    return step, {"threads": 1, "repeat": 10}


# == memory_bound: full passes over large tensors, little arithmetic per byte ======================
@planted("memory_bound")
def elementwise_chain_on_3m_floats():
    # seven separate full passes (scale, shift, sigmoid, mul, clamp, square, add) over 3M floats
    generator = torch.Generator().manual_seed(31)
    x = torch.randn(3_000_000, generator=generator)

    def step():
        scaled = x * 1.5 + 0.25
        gated = torch.sigmoid(scaled) * x
        return torch.clamp(gated, -2.0, 2.0) + x.square()

    return step, {"threads": 1, "repeat": 10}


@planted("memory_bound")
def residual_layernorm_rows():
    # residual add, layer norm, affine, a second residual over a (2048, 768) activation
    generator = torch.Generator().manual_seed(32)
    hidden, residual = torch.randn(2048, 768, generator=generator), torch.randn(2048, 768, generator=generator)
    gamma, beta = torch.ones(768) * 1.1, torch.zeros(768) + 0.05

    def step():
        summed = hidden + residual
        normed = functional.layer_norm(summed, (768,))
        return normed * gamma + beta + summed

    return step, {"threads": 1, "repeat": 20}


@planted("memory_bound")
def strided_transpose_copies():
    # layout changes: a 2048 x 2048 transpose made contiguous and an NCHW -> NHWC permute copy
    generator = torch.Generator().manual_seed(33)
    matrix = torch.randn(2048, 2048, generator=generator)
    feature_map = torch.randn(16, 64, 32, 32, generator=generator)

    def step():
        flipped = matrix.t().contiguous()
        channels_last = feature_map.permute(0, 2, 3, 1).contiguous()
        return flipped[0, 0] + channels_last[0, 0, 0, 0]

    return step, {"threads": 1, "repeat": 15}


@planted("memory_bound", kind="training")
def softplus_chain_training():
    # a 1M-parameter elementwise model: forward is a chain of full passes, backward doubles it
    generator = torch.Generator().manual_seed(34)
    weight = torch.randn(1_000_000, generator=generator).requires_grad_()
    x = torch.randn(1_000_000, generator=generator)

    def step():
        weight.grad = None
        activation = functional.softplus(weight * x) * x - torch.exp(weight * 0.1) * 0.01
        loss = activation.mean()
        loss.backward()
        return loss.detach()

    return step, {"threads": 1, "repeat": 10}


# == compute_bound: big dense matmuls / convolutions dominate ========================================
@planted("compute_bound")
def chained_square_matmuls():
    # (768 x 768) @ (768 x 768) twice: ~1.8 GFLOP per call in fp32
    generator = torch.Generator().manual_seed(41)
    a, b, c = (torch.randn(768, 768, generator=generator) / 28.0 for _ in range(3))

    def step():
        return (a @ b) @ c

    return step, {"threads": 1, "repeat": 15}


@planted("compute_bound")
def conv3x3_pair_64_channels():
    # two 3x3 convolutions, 64 -> 64 channels on 8 x 32 x 32 maps: ~1.2 GFLOP per call
    torch.manual_seed(42)
    first, second = torch.nn.Conv2d(64, 64, 3, padding=1), torch.nn.Conv2d(64, 64, 3, padding=1)
    images = torch.randn(8, 64, 32, 32)

    @torch.no_grad()
    def step():
        return second(torch.relu(first(images)))

    return step, {"threads": 1, "repeat": 10}


@planted("compute_bound")
def attention_scores_bmm_d256():
    # 4 heads, 256 tokens, head size 256: QK^T and PV batched matmuls (~270 MFLOP) around a softmax
    # over only 262k scores
    generator = torch.Generator().manual_seed(43)
    query, key, value = (torch.randn(4, 256, 256, generator=generator) for _ in range(3))

    def step():
        scores = torch.bmm(query, key.transpose(1, 2)) / 16.0
        return torch.bmm(torch.softmax(scores, dim=-1), value)

    return step, {"threads": 1, "repeat": 20}


@planted("compute_bound", kind="training")
def wide_mlp_training_step():
    # Linear(512, 1024) -> GELU -> Linear(1024, 512) on a batch of 256, forward + backward + SGD:
    # ~1.6 GFLOP of matmul per step
    torch.manual_seed(44)
    model = torch.nn.Sequential(torch.nn.Linear(512, 1024), torch.nn.GELU(), torch.nn.Linear(1024, 512))
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    batch, target = torch.randn(256, 512), torch.randn(256, 512)

    def step():
        optimizer.zero_grad(set_to_none=True)
        loss = functional.mse_loss(model(batch), target)
        loss.backward()
        optimizer.step()
        return loss.detach()

    return step, {"threads": 1, "repeat": 8}


# == allocation_churn: fresh buffers allocated and freed on every call ==============================
@planted("allocation_churn")
def growing_cat_accumulator():
    # results collected by re-concatenating: 120 torch.cat calls, each allocating a buffer one chunk
    # larger than the last and freeing the previous one
    generator = torch.Generator().manual_seed(51)
    chunks = [torch.randn(4096, generator=generator) for _ in range(8)]

    def step():
        collected = torch.empty(0)
        for index in range(120):
            collected = torch.cat([collected, chunks[index % 8]])
        return collected.sum()

    return step, {"threads": 1, "repeat": 20}


@planted("allocation_churn")
def fresh_zeroed_scatter_buffer():
    # a 48 MB zero-filled accumulator allocated anew each call for a 20k-element scatter_add
    generator = torch.Generator().manual_seed(52)
    index = torch.randint(0, 12_000_000, (20_000,), generator=generator)
    values = torch.rand(20_000, generator=generator)

    def step():
        accumulator = torch.zeros(12_000_000)
        accumulator.index_add_(0, index, values)
        return accumulator[index[:16]]

    return step, {"threads": 1, "repeat": 12}


@planted("allocation_churn", kind="training")
def out_of_place_updates_and_snapshots_training():
    # a 1M-parameter model on a batch of 2: each step re-allocates every gradient (set to None),
    # clones every gradient for a "log", snapshots the state dict, and replaces every parameter
    # with a freshly allocated out-of-place update
    torch.manual_seed(53)
    weights = [(torch.randn(512, 512) / 22.0).requires_grad_() for _ in range(4)]
    batch, target = torch.randn(2, 512), torch.randn(2, 512)
    log: list[list[torch.Tensor]] = []

    def step():
        nonlocal weights
        hidden = batch
        for weight in weights:
            hidden = torch.tanh(hidden @ weight)
        loss = ((hidden - target) ** 2).mean()
        loss.backward()
        log[:] = [[weight.grad.clone() for weight in weights]]
        snapshot = [weight.detach().clone() for weight in weights]
        weights = [(weight.detach() - 1e-3 * weight.grad).requires_grad_() for weight in weights]
        return loss.detach(), snapshot[0][0, 0]

    return step, {"threads": 1, "repeat": 20}


@planted("allocation_churn")
def defensive_clone_before_inplace_clamp():
    # the caller's 40 MB activation is cloned "to be safe" on every call before an in-place clamp
    # and a sum: the clone maps and faults in a fresh 40 MB buffer each time (reusing one buffer, or
    # an out-of-place clamp, would not)
    generator = torch.Generator().manual_seed(54)
    activation = torch.randn(10_000_000, generator=generator)

    def step():
        staged = activation.clone()
        staged.clamp_(-1.5, 1.5)
        return staged.sum()

    return step, {"threads": 1, "repeat": 15}


# == graph_break: a torch.compile'd region split by Python the compiler cannot trace ===============
@planted("graph_break")
def compiled_with_progress_prints():
    # a compiled three-stage transform that prints progress between the stages (each print splits
    # the graph)
    _fresh_compiler_state()
    sink = io.StringIO()
    generator = torch.Generator().manual_seed(61)
    x = torch.randn(262_144, generator=generator)

    @torch.compile
    def transform(values):
        first = torch.sin(values * 2.0) + values
        print("stage 1 done", file=sink)
        second = torch.cos(first) * first
        print("stage 2 done", file=sink)
        third = torch.tanh(second) + 0.5 * first
        print("stage 3 done", file=sink)
        return third.sum()

    def step():
        sink.seek(0)
        sink.truncate()
        return transform(x)

    return step, {"threads": 1, "repeat": 20}


@planted("graph_break")
def compiled_item_driven_branches():
    # a compiled three-stage normaliser that reads a statistic with .item() before each stage and
    # branches on it in Python: every .item() splits the graph
    _fresh_compiler_state()
    generator = torch.Generator().manual_seed(62)
    x = torch.randn(512, 512, generator=generator) * 1.7

    def stage(values: torch.Tensor, spread: float) -> torch.Tensor:
        values = values / spread if spread > 1.0 else values * 1.01 + 0.001
        return torch.relu(values) - 0.1 * values

    @torch.compile
    def normalise(values):
        values = stage(values, values.std().item())
        values = stage(values * 1.3, values.std().item())
        values = stage(values.exp() - 1.0, values.std().item())
        return values

    def step():
        return normalise(x)

    return step, {"threads": 1, "repeat": 15}


@planted("graph_break")
def compiled_boolean_mask_selection():
    # a compiled scoring function that keeps the positive scores with a boolean mask (a data-dependent
    # output shape) between two matmuls
    _fresh_compiler_state()
    generator = torch.Generator().manual_seed(63)
    features, projection = torch.randn(1024, 128, generator=generator), torch.randn(128, 64, generator=generator)
    readout = torch.randn(64, 16, generator=generator)

    @torch.compile
    def score(inputs):
        scores = torch.relu(inputs @ projection) - 0.5
        kept = scores[scores > 0]
        scaled = torch.tanh(scores @ readout)
        return scaled.mean() + kept.sum() / (kept.numel() + 1)

    def step():
        return score(features)

    return step, {"threads": 1, "repeat": 20}


@planted("graph_break", kind="training")
def compiled_loss_with_python_checks_training():
    # a compiled forward + loss that checks its activations for non-finite values with a Python `if`
    # on a tensor and logs loss.item() into a list: both break the graph (torch._dynamo.explain: 2
    # graphs, break reasons "generic_jump" and "Tensor.item()"); backward and the optimizer step run
    # outside the compiled function
    _fresh_compiler_state()
    torch.manual_seed(64)
    first, second = torch.nn.Linear(64, 256), torch.nn.Linear(256, 1)
    optimizer = torch.optim.SGD([*first.parameters(), *second.parameters()], lr=1e-2)
    batch, target = torch.randn(256, 64), torch.randn(256, 1)
    losses: list[float] = []

    @torch.compile
    def forward_loss(inputs, labels):
        hidden = torch.relu(first(inputs))
        if not torch.isfinite(hidden).all():
            raise FloatingPointError("non-finite activations")
        loss = functional.mse_loss(second(hidden), labels)
        value = loss.item()
        losses.append(value)
        return loss

    def step():
        del losses[:-5]
        optimizer.zero_grad(set_to_none=True)
        loss = forward_loss(batch, target)
        loss.backward()
        optimizer.step()
        return loss.detach()

    return step, {"threads": 1, "repeat": 10}


# == recompilation: the compiled function keeps compiling in the steady state =======================
@planted("recompilation")
def static_compile_varying_sequence_length():
    # dynamic=False, and every call brings a new sequence length (a dataloader without bucketing):
    # each call recompiles until the recompile limit, after which new lengths fall back to eager
    _fresh_compiler_state()
    generator = torch.Generator().manual_seed(71)
    full = torch.randn(2, 160, 64, generator=generator)
    weight = torch.randn(64, 64, generator=generator) / 8.0
    lengths = itertools.cycle([40 + 3 * index for index in range(40)])

    @torch.compile(dynamic=False)
    def encode(tokens):
        projected = torch.tanh(tokens @ weight)
        attention = torch.softmax(projected @ projected.transpose(1, 2) / 8.0, dim=-1)
        return (attention @ projected).mean(1)

    def step():
        return encode(full[:, : next(lengths)])

    return step, {"threads": 1, "repeat": 20}


@planted("recompilation")
def compiled_python_int_unroll_count():
    # the number of smoothing passes is a Python int that changes every call; it drives a Python
    # loop inside the compiled function, so every new count is a new graph
    _fresh_compiler_state()
    generator = torch.Generator().manual_seed(72)
    signal = torch.randn(8, 4096, generator=generator)
    counts = itertools.cycle(list(range(1, 31)))

    @torch.compile
    def smooth(values, passes):
        for _ in range(passes):
            values = 0.25 * torch.roll(values, 1, dims=1) + 0.5 * values + 0.25 * torch.roll(values, -1, dims=1)
        return values

    def step():
        return smooth(signal, next(counts))

    return step, {"threads": 1, "repeat": 15}


@planted("recompilation")
def compiled_reads_changing_global_config():
    # the compiled function reads a module-level settings dict that the caller updates every call (a
    # string mode and an int bucket); each new value fails a guard and compiles again
    _fresh_compiler_state()
    generator = torch.Generator().manual_seed(73)
    x = torch.randn(256, 256, generator=generator)
    settings = {"mode": "mode-0", "bucket": 0}
    calls = [0]

    @torch.compile
    def apply(values):
        if settings["mode"].endswith(("0", "2", "4", "6", "8")):
            values = torch.relu(values)
        return values * (settings["bucket"] + 1) + torch.sigmoid(values).sum(0)

    def step():
        calls[0] += 1
        settings["mode"], settings["bucket"] = f"mode-{calls[0]}", calls[0] % 7
        return apply(x)

    return step, {"threads": 1, "repeat": 12}


@planted("recompilation", kind="training")
def static_compile_training_varying_batch():
    # a compiled model (dynamic=False) trained on batches whose size changes every step: forward and
    # backward graphs compile again for each new size
    _fresh_compiler_state()
    torch.manual_seed(74)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.Tanh(), torch.nn.Linear(64, 4))
    compiled = torch.compile(model, dynamic=False)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-2)
    data, labels = torch.randn(200, 32), torch.randint(0, 4, (200,))
    sizes = itertools.cycle([17 + 5 * index for index in range(30)])

    def step():
        size = next(sizes)
        optimizer.zero_grad(set_to_none=True)
        loss = functional.cross_entropy(compiled(data[:size]), labels[:size])
        loss.backward()
        optimizer.step()
        return loss.detach()

    return step, {"threads": 1, "repeat": 10}


# == cold_start: the first call pays a large one-time cost, later calls are cheap ===================
@planted("cold_start")
def memoized_rotary_table():
    # rotary position tables built on first use by a Python loop over 4,096 positions (cached per
    # length); every later call only slices the cache and applies it
    generator = torch.Generator().manual_seed(81)
    x = torch.randn(4, 512, 64, generator=generator)

    @functools.lru_cache(maxsize=None)
    def rotary_table(length: int, width: int) -> tuple[torch.Tensor, torch.Tensor]:
        inverse = 1.0 / (10000 ** (torch.arange(0, width, 2, dtype=torch.float64) / width))
        rows_cos, rows_sin = [], []
        for position in range(length):
            angles = position * inverse
            rows_cos.append(torch.cos(angles).float())
            rows_sin.append(torch.sin(angles).float())
        return torch.stack(rows_cos), torch.stack(rows_sin)

    def step():
        cos, sin = rotary_table(4096, 64)
        even, odd = x[..., 0::2], x[..., 1::2]
        cos, sin = cos[:512], sin[:512]
        return torch.cat([even * cos - odd * sin, even * sin + odd * cos], dim=-1)

    return step, {"threads": 1, "repeat": 50}


@planted("cold_start")
def compiled_mlp_first_call():
    # a fixed-shape MLP under torch.compile: the first call traces and compiles, then every call reuses
    # the compiled code
    _fresh_compiler_state()
    torch.manual_seed(82)
    model = torch.nn.Sequential(
        torch.nn.Linear(128, 256), torch.nn.GELU(), torch.nn.Linear(256, 128), torch.nn.LayerNorm(128)
    ).eval()
    compiled = torch.compile(model)
    batch = torch.randn(32, 128)

    @torch.no_grad()
    def step():
        return compiled(batch)

    return step, {"threads": 1, "repeat": 30}


@planted("cold_start")
def lazily_built_orthogonal_model():
    # the model is created on the first call, with orthogonal initialisation (a QR per 1024 x 1024
    # weight, four of them); later calls run it on a batch of 4
    torch.manual_seed(83)
    batch = torch.randn(4, 1024)
    model: list[torch.nn.Module] = []

    @torch.no_grad()
    def step():
        if not model:
            layers = []
            for _ in range(4):
                layer = torch.nn.Linear(1024, 1024)
                torch.nn.init.orthogonal_(layer.weight)
                layers += [layer, torch.nn.Tanh()]
            model.append(torch.nn.Sequential(*layers))
        return model[0](batch)

    return step, {"threads": 1, "repeat": 25}


@planted("cold_start", kind="training")
def training_with_one_time_preconditioner():
    # the first step computes an eigendecomposition of a 768 x 768 feature covariance and caches it
    # as a whitening preconditioner; every step (the first too) is a small linear-model update
    generator = torch.Generator().manual_seed(84)
    features = torch.randn(2048, 768, generator=generator)
    batch, target = features[:64], torch.randn(64, 1, generator=generator)
    weight = torch.zeros(768, 1, requires_grad=True)
    cache: dict[str, torch.Tensor] = {}

    def step():
        if "whiten" not in cache:
            covariance = features.T @ features / features.shape[0]
            eigenvalues, eigenvectors = torch.linalg.eigh(covariance.double())
            cache["whiten"] = (eigenvectors / eigenvalues.clamp_min(1e-6).sqrt()).float() @ eigenvectors.T.float()
        weight.grad = None
        loss = ((batch @ weight - target) ** 2).mean()
        loss.backward()
        with torch.no_grad():
            weight.sub_(1e-2 * (cache["whiten"] @ weight.grad))
        return loss.detach()

    return step, {"threads": 1, "repeat": 20}


# == measurement: the timing itself cannot be trusted ===============================================
@planted("measurement")
def random_stalls_bimodal():
    # ~1 ms of matmul, but about one call in five also stalls 12 ms (a seeded random wait on an
    # external resource): the samples fall into two clusters far apart
    rng = random.Random(91)
    generator = torch.Generator().manual_seed(91)
    a, b = torch.randn(448, 448, generator=generator), torch.randn(448, 448, generator=generator)

    def step():
        if rng.random() < 0.2:
            time.sleep(0.012)
        return a @ b

    return step, {"threads": 1, "repeat": 30}


@planted("measurement")
def sub_microsecond_call_five_samples():
    # the call does almost nothing (reads a tensor's metadata) and is timed only five times: its time
    # is at the timer's resolution and the sample is tiny
    x = torch.randn(16, 16)

    def step():
        return x.shape[0] * x.shape[1]

    return step, {"threads": 1, "repeat": 5}


@planted("measurement")
def background_thread_bursts():
    # a ~1 ms matmul (two threads), timed while a background thread runs irregular bursts of numpy
    # work on the same two cores: calls that overlap a burst take several times longer. The thread
    # starts with the first call and stops itself 0.25 s after the last one (or after 5 minutes), so
    # it does not outlive the profile
    generator = torch.Generator().manual_seed(93)
    a, b = torch.randn(384, 384, generator=generator), torch.randn(384, 384, generator=generator)
    last_call = [0.0]
    first_call = threading.Event()

    def noise() -> None:
        rng = np.random.default_rng(93)
        block = rng.random((300, 300))
        if not first_call.wait(timeout=300.0):
            return
        started = time.perf_counter()
        while time.perf_counter() - last_call[0] < 0.25 and time.perf_counter() - started < 300.0:
            if rng.random() < 0.35:
                for _ in range(int(rng.integers(3, 15))):
                    block = np.tanh(block @ block / 300.0)
            else:
                time.sleep(float(rng.uniform(0.005, 0.03)))

    threading.Thread(target=noise, name="fresh2-background-noise", daemon=True).start()

    def step():
        last_call[0] = time.perf_counter()
        first_call.set()
        return a @ b

    return step, {"threads": 2, "repeat": 30}


@planted("measurement")
def heavy_tailed_work_few_samples():
    # each call's work is drawn from a heavy-tailed distribution (1 to 40 rounds of a 256 x 256
    # matmul + tanh, seeded so that the timed calls after a 1 + 3 call warm-up span 1 to 40 rounds),
    # and the call is timed only six times: the median of so few, so spread samples says little
    rng = random.Random(98)
    generator = torch.Generator().manual_seed(98)
    a = torch.randn(256, 256, generator=generator) / 16.0

    def step():
        rounds = min(40, max(1, int(rng.lognormvariate(1.0, 1.4))))
        result = a
        for _ in range(rounds):
            result = torch.tanh(result @ a)
        return result

    return step, {"threads": 1, "repeat": 6}


# == clean: reasonable, well-written computations with no single obvious problem =====================
@clean()
def transformer_block_inference():
    # pre-norm transformer block (batch 4, 128 tokens, width 256, 4 heads) with fused SDPA, no grad
    torch.manual_seed(101)
    width, heads = 256, 4
    norm_1, norm_2 = torch.nn.LayerNorm(width), torch.nn.LayerNorm(width)
    qkv, projection = torch.nn.Linear(width, 3 * width), torch.nn.Linear(width, width)
    mlp = torch.nn.Sequential(torch.nn.Linear(width, 4 * width), torch.nn.GELU(), torch.nn.Linear(4 * width, width))
    tokens = torch.randn(4, 128, width)

    @torch.inference_mode()
    def step():
        query, key, value = qkv(norm_1(tokens)).view(4, 128, 3, heads, width // heads).permute(2, 0, 3, 1, 4)
        attended = functional.scaled_dot_product_attention(query, key, value)
        hidden = tokens + projection(attended.transpose(1, 2).reshape(4, 128, width))
        return hidden + mlp(norm_2(hidden))

    return step, {"threads": 1, "repeat": 20}


@clean()
def small_convnet_eval():
    # strided conv-bn-relu x 3 on 8 x 3 x 64 x 64 images, global pooling and a classifier; eval mode,
    # inference mode
    torch.manual_seed(102)

    def block(inputs: int, outputs: int) -> list[torch.nn.Module]:
        return [
            torch.nn.Conv2d(inputs, outputs, 3, stride=2, padding=1, bias=False),
            torch.nn.BatchNorm2d(outputs),
            torch.nn.ReLU(inplace=True),
        ]

    model = torch.nn.Sequential(
        *block(3, 32),
        *block(32, 64),
        *block(64, 128),
        torch.nn.AdaptiveAvgPool2d(1),
        torch.nn.Flatten(),
        torch.nn.Linear(128, 10),
    ).eval()
    images = torch.randn(8, 3, 64, 64)

    @torch.inference_mode()
    def step():
        return model(images)

    return step, {"threads": 1, "repeat": 15}


@clean(kind="training")
def mlp_classifier_training_adamw():
    # 256 -> 512 -> 512 -> 10 classifier, batch 128, cross entropy, AdamW (foreach), grads set to None
    torch.manual_seed(103)
    model = torch.nn.Sequential(
        torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10)
    )
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, foreach=True)
    batch, labels = torch.randn(128, 256), torch.randint(0, 10, (128,))

    def step():
        optimizer.zero_grad(set_to_none=True)
        loss = functional.cross_entropy(model(batch), labels)
        loss.backward()
        optimizer.step()
        return loss.detach()

    return step, {"threads": 1, "repeat": 20}


@clean()
def embedding_bag_ranker():
    # a recommendation-style scorer: EmbeddingBag (50k x 64, sum) over 256 bags of 20 ids, then an MLP
    torch.manual_seed(104)
    bags = torch.nn.EmbeddingBag(50_000, 64, mode="sum")
    head = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 1))
    ids = torch.randint(0, 50_000, (256 * 20,))
    offsets = torch.arange(0, 256 * 20, 20)

    @torch.inference_mode()
    def step():
        return head(bags(ids, offsets)).squeeze(-1)

    return step, {"threads": 1, "repeat": 25}


@clean()
def nearest_neighbour_retrieval():
    # cosine retrieval: 64 normalised queries against 8,192 pre-normalised 128-d keys, top 10 each
    generator = torch.Generator().manual_seed(105)
    keys = functional.normalize(torch.randn(8192, 128, generator=generator), dim=1)
    queries = torch.randn(64, 128, generator=generator)

    @torch.inference_mode()
    def step():
        scores = functional.normalize(queries, dim=1) @ keys.T
        return torch.topk(scores, 10, dim=1)

    return step, {"threads": 1, "repeat": 10}
