"""Memory benchmarks (not timed tests): what the memory table and analyses cost, and what recording memory
costs the traced pass.

1. ``load_trace`` of the owlv2 trace (``cache=False``) with the memory table as read now, against the same load
   with the ``[memory]`` events stripped from the file (goal: under 10 % more time with them), and the memory
   analyses (events with their context, timeline, peak) on it.
2. ``wb.profile(step, memory=True)`` of a GPT-style training step on CPU: ``run.memory["recording_overhead"]``
   (the traced pass with allocator events over the same pass without).

Run: ``python benchmarks/memory.py [--repeat N]``; prints one JSON object.
"""

from __future__ import annotations

import argparse
import glob
import gzip
import json
import statistics
import tempfile
import time
from pathlib import Path

SHARED = Path(__file__).resolve().parents[2] / "shared" / "traces"


def _best(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def load_cost(repeat: int) -> dict:
    import workbench as wb
    from workbench.analysis import memory as mem

    files = glob.glob(str(SHARED / "tracelens_h100_owlv2" / "*.json.gz"))
    if not files:
        return {"skipped": f"no owlv2 trace under {SHARED}"}
    path = files[0]
    doc = json.loads(gzip.open(path).read())
    stripped = dict(doc, traceEvents=[e for e in doc["traceEvents"] if e.get("name") != "[memory]"])
    with tempfile.TemporaryDirectory() as tmp:
        without = Path(tmp) / "no_memory.json"
        with_memory = Path(tmp) / "with_memory.json"
        without.write_text(json.dumps(stripped))
        with_memory.write_text(json.dumps(doc))
        t_with = _best(lambda: wb.load_trace(str(with_memory), cache=False), repeat)
        t_without = _best(lambda: wb.load_trace(str(without), cache=False), repeat)
        trace = wb.load_trace(str(with_memory), cache=False)
        t_analysis = _best(lambda: mem.memory_peak(trace), repeat)
    return {
        "memory_events": int(len(trace.memory)),
        "load_with_memory_s": t_with,
        "load_without_memory_s": t_without,
        "load_extra_pct": 100.0 * (t_with / t_without - 1.0),
        "goal_pct": 10.0,
        "memory_peak_analysis_s": t_analysis,
    }


def recording_overhead(repeat: int) -> dict:
    import torch

    import workbench as wb

    torch.manual_seed(0)
    d, heads, seq, batch, layers = 256, 4, 128, 8, 2
    block = torch.nn.TransformerEncoderLayer(d, heads, dim_feedforward=4 * d, batch_first=True, norm_first=True)
    model = torch.nn.Sequential(torch.nn.Embedding(1000, d), *[block for _ in range(layers)], torch.nn.Linear(d, 1000))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    tokens = torch.randint(0, 1000, (batch, seq))

    def step(tokens):
        opt.zero_grad(set_to_none=True)
        logits = model(tokens)
        torch.nn.functional.cross_entropy(logits.view(-1, 1000), tokens.view(-1)).backward()
        opt.step()

    ratios = []
    for _ in range(repeat):
        run = wb.profile(step, tokens, warmup=2, repeat=5, trace_repeat=5, memory=True, history=False, threads=1)
        ratios.append(run.memory.recording_overhead)
    return {
        "workload": f"GPT-style step: {layers} pre-norm encoder layers d={d}, batch {batch}x{seq}, AdamW",
        "recording_overhead_median": statistics.median(ratios),
        "recording_overhead_all": ratios,
        "peak_bytes": run.memory.peak.peak_bytes,
        "peak_with_named_tensors_bytes": run.memory.peak.live_bytes,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    print(json.dumps({"load": load_cost(args.repeat), "recording": recording_overhead(args.repeat)}, indent=1))


if __name__ == "__main__":
    main()
