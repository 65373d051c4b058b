"""Per-process medians of one workload in glibc malloc's default and steady modes.

The same code, timed in fresh processes one after another (``workbench.report.sampler``, the code
``workbench report`` uses), once with malloc's adaptive thresholds and once pinned
(``workbench.capture.allocator``). Prints each process's median, the spread between processes
(slowest / fastest median) and the ratio of the two modes' medians, all from this one command:

    .venv/bin/python benchmarks/allocator_modes.py                      # the demo, 6 processes each
    .venv/bin/python benchmarks/allocator_modes.py --workload mod:fn --processes 10

Measured on the demo (4 MiB tensors, 2 threads, 2-core VM, load average 3.5): default 4.47-21.11 ms
between six processes (4.72x), steady 4.05-5.40 ms (1.33x); default / steady 1.90x.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from workbench.report.sampler import run_worker  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workload", default="workbench.workloads.demo:workload")
    ap.add_argument("--processes", type=int, default=6)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=20)
    args = ap.parse_args()
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    medians: dict[str, list[float]] = {"default": [], "steady": []}
    started = time.perf_counter()
    for i in range(args.processes):  # the two modes interleaved, process by process
        for mode in medians:
            result = run_worker(
                args.workload,
                warmup=args.warmup,
                repeat=args.repeat,
                index=i + 1,
                total=args.processes,
                allocator_mode=mode,
            )
            medians[mode].append(statistics.median(result["samples_ms"]))
    for mode, values in medians.items():
        print(
            f"{mode:8s} per-process medians (ms): {', '.join(f'{v:.2f}' for v in values)}; "
            f"median {statistics.median(values):.2f} ms; slowest/fastest {max(values) / min(values):.2f}x"
        )
    ratio = statistics.median(medians["default"]) / statistics.median(medians["steady"])
    print(
        f"default / steady, median of the process medians: {ratio:.2f}x "
        f"({time.perf_counter() - started:.0f} s; load average after: "
        f"{' '.join(f'{x:.2f}' for x in os.getloadavg())})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
