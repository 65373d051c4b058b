"""Importers and diff: import time of each shared file of another tool's format, and ``wb.diff`` of two
~130 MB Kineto traces against the time to load them (goal: the diff costs less than the two loads).

    .venv/bin/python benchmarks/importers.py                 # the shared files + two 130 MB traces
    .venv/bin/python benchmarks/importers.py --mb 30         # smaller Kineto traces
    .venv/bin/python benchmarks/importers.py --no-kineto     # the shared files only

The shared files are ../shared/formats beside the clone (or $WORKBENCH_SHARED_FORMATS). The large
Kineto trace is ``benchmarks/ingest.py``'s (a real trace repeated to the size asked, timestamps and
ids shifted); the second trace is the same with two kernel names rewritten (an elementwise kernel
"replaced" by a Triton one, a GEMM's tile renamed), so the diff has appeared / disappeared rows.
Each timing is the best of ``--repeat`` runs in this process (the columnar cache off), wall and CPU.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))


def _formats() -> Path | None:
    for p in (
        os.environ.get("WORKBENCH_SHARED_FORMATS"),
        ROOT / "shared" / "formats",
        ROOT.parent / "shared" / "formats",
    ):
        if p and (Path(p) / "manifest.json").exists():
            return Path(p)
    return None


def _best(fn, repeat: int):
    best = None
    out = None
    for _ in range(repeat):
        c0, t0 = time.process_time(), time.perf_counter()
        out = fn()
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        best = (wall, cpu) if best is None or wall < best[0] else best
    return out, best


def shared_files(repeat: int) -> None:
    from workbench.trace import read_trace

    folder = _formats()
    if folder is None:
        print("shared formats folder not found (../shared/formats or $WORKBENCH_SHARED_FORMATS): skipped")
        return
    files = sorted((folder / "nsys").glob("*.sqlite")) + sorted((folder / "rocprof").glob("*.json*"))
    print(f"{'file':32} {'MB':>6} {'wall s':>7} {'cpu s':>7} {'kernels':>8} {'events':>8}  source")
    for path in files:
        data, (wall, cpu) = _best(lambda: read_trace(path), repeat)
        print(
            f"{path.name:32} {path.stat().st_size / 1e6:6.2f} {wall:7.3f} {cpu:7.3f} {len(data.kernels):8,} "
            f"{data.event_count():8,}  {data.meta.source}"
        )
    before, after = folder / "nsys" / "mfu_2gpu_before.sqlite", folder / "nsys" / "mfu_2gpu_after.sqlite"
    if before.exists() and after.exists():
        import workbench as wb

        a, b = read_trace(before), read_trace(after)
        _, (wall, cpu) = _best(lambda: wb.diff(a, b), repeat)
        print(f"wb.diff(before, after) of the shared nsys pair: {wall:.3f} s wall, {cpu:.3f} s CPU")


def _second(first: Path) -> Path:
    """The first trace with two kernel names rewritten."""
    target = first.with_name("rank0_changed.json")
    if target.exists() and target.stat().st_mtime >= first.stat().st_mtime:
        return target
    text = first.read_bytes()
    names = re.findall(rb'"name": "(void at::native::[a-z_]*elementwise_kernel[^"]{0,200})"', text[:50_000_000])
    gemm = re.findall(rb'"name": "([^"]*(?:gemm|sm90|nvjet|cutlass)[^"]{0,200})"', text[:50_000_000], re.I)
    for pattern, new in (
        (names[0] if names else None, b"triton_poi_fused_add_mul_0"),
        (gemm[0] if gemm else None, b"triton_tem_fused_mm_1"),
    ):
        if pattern:
            text = text.replace(b'"' + pattern + b'"', b'"' + new + b'"')
    target.write_bytes(text)
    return target


def kineto_pair(mb: float, repeat: int) -> None:
    import ingest

    import workbench as wb
    from workbench.trace import read_trace

    source = ingest.DEFAULT_SOURCE if ingest.DEFAULT_SOURCE.exists() else ingest.FALLBACK_SOURCE
    first = ingest.build_trace(source, mb / 1000)
    second = _second(first)
    print(
        f"kineto traces: {first} ({first.stat().st_size / 1e6:.0f} MB), {second.name} "
        f"({second.stat().st_size / 1e6:.0f} MB), from {source.name}"
    )
    a, (la, ca) = _best(lambda: read_trace(first, decode_workers=1), repeat)
    b, (lb, cb) = _best(lambda: read_trace(second, decode_workers=1), repeat)
    d, (wd, cd) = _best(lambda: wb.diff(a, b), repeat)
    print(f"load a: {la:.2f} s wall ({ca:.2f} s CPU), {a.event_count():,} events; load b: {lb:.2f} s ({cb:.2f} s CPU)")
    print(f"wb.diff(a, b): {wd:.2f} s wall ({cd:.2f} s CPU); {d.counts}")
    print(
        f"diff / (load a + load b) = {wd / (la + lb):.3f} wall, {cd / (ca + cb):.3f} CPU "
        f"(goal: < 1) ; summary: {d.summary[:200]}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mb", type=float, default=130.0, help="size of each Kineto trace (default: 130 MB)")
    parser.add_argument("--repeat", type=int, default=2, help="runs per timing, best kept (default: 2)")
    parser.add_argument("--no-kineto", action="store_true", help="time the shared files only")
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    shared_files(args.repeat)
    if not args.no_kineto:
        kineto_pair(args.mb, args.repeat)


if __name__ == "__main__":
    main()
