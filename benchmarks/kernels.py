"""Fused Triton kernels (workbench.kernels) against eager torch, forward and forward+backward.

    python benchmarks/kernels.py [--json OUT.json] [--dtype bf16|fp16|fp32] [--kernels a,b] [--no-compile] [--quick]

On a CUDA device each kernel is timed with triton.testing.do_bench (L2 flushed before each call,
its default; medians of its samples) against eager and, unless --no-compile, torch.compile of the
eager function; it prints the medians, the speedups and each side's peak memory over one
forward+backward. Without CUDA (or triton) every kernel is reported "not applicable: ..." and the
exit status is 0. --json writes the results (and the versions) to a file. Exit status 1 when a
kernel failed.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--json", metavar="OUT.json", help="write the results as JSON to this file")
    p.add_argument("--dtype", choices=sorted(DTYPES), default="bf16", help="input dtype (default bf16)")
    p.add_argument("--kernels", help="comma-separated subset of the kernels (default: all)")
    p.add_argument("--no-compile", action="store_true", help="do not time torch.compile of the eager version")
    p.add_argument("--quick", action="store_true", help="half the rows and shorter do_bench runs")
    a = p.parse_args(argv)

    from workbench import kernels as wk

    reason = wk.missing_reason()
    kernels = a.kernels.split(",") if a.kernels else None
    unknown = [k for k in kernels or () if k not in wk.KERNELS]
    if unknown:
        p.error(f"unknown kernels {unknown}; the kernels are {', '.join(wk.KERNELS)}")
    if reason is None:
        from workbench.kernels import bench

        results = bench.run_all(dtype=DTYPES[a.dtype], quick=a.quick, compile_eager=not a.no_compile, kernels=kernels)
        meta = bench.versions()
    else:
        msg = "not applicable: no CUDA device" if wk.triton_installed() else reason
        results = [
            {"kernel": k, "status": "not_applicable", "reason": msg} for k in wk.KERNELS if not kernels or k in kernels
        ]
        for r in results:
            print(f"{r['kernel']:22s} {msg}")
        meta = {"torch": torch.__version__, "device": "cpu"}
    if a.json:
        Path(a.json).parent.mkdir(parents=True, exist_ok=True)
        Path(a.json).write_text(
            json.dumps({"versions": meta, "dtype": a.dtype, "results": results}, indent=1, default=str)
        )
    return 1 if any(r.get("status") == "failed" for r in results) else 0


if __name__ == "__main__":
    raise SystemExit(main())
