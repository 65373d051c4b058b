"""Record the CPU eager / torch.compile trace pair of tests/data/cpu/diff (the diff tests' "compiled variant names
the fused ops" case): three ProfilerStep#N of the same small function, eager and compiled (warmed up first).

    python tests/data/record_diff_traces.py tests/data/cpu/diff   # then gzip the two .json files
"""

import sys
import time

import torch
from torch.profiler import ProfilerActivity, profile, record_function


def f(x, w):
    y = x @ w
    return torch.relu(y * 2 + 1).sum(dim=-1) * 0.5


def main(out: str) -> None:
    t0 = time.time()
    x, w = torch.randn(64, 128), torch.randn(128, 128)
    g = torch.compile(f)
    g(x, w)
    f(x, w)
    for name, fn in (("eager", f), ("compiled", g)):
        with profile(activities=[ProfilerActivity.CPU]) as p:
            for i in range(3):
                with record_function(f"ProfilerStep#{i}"):
                    fn(x, w)
        p.export_chrome_trace(f"{out}/{name}.json")
    print("done", time.time() - t0)


if __name__ == "__main__":
    main(sys.argv[1])
