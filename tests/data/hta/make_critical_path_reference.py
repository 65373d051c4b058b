"""Record Holistic Trace Analysis's critical path on the shared traces, for tests/analysis/test_critical_path.py.

Run with HTA's successor on PyPI (HTA 0.5.0 fails under pandas 3), in a venv outside the repository:

    python3 -m venv /tmp/hta && /tmp/hta/bin/pip install traceinsight==0.6.1
    /tmp/hta/bin/python tests/data/hta/make_critical_path_reference.py [/work/shared/traces]

Each case is run twice, with HTA's default sub-µs rounding and with ``HTA_DISABLE_NS_ROUNDING=1``
(in a fresh process each, since HTA reads its options once). Recorded per case: the path length (sum of
the weights of the edges on the path, as ``get_critical_path_breakdown`` gives them), the number of
edges, the share per ``bound_by`` (``summary()``), the window and the seconds HTA took; or the error.
Writes ``critical_path.json`` beside this script.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ALEXNET_FORWARD = "[param|pytorch.model.alex_net|0|0|0|measure|forward]"
# (case, trace set, rank, annotation, instance): HTA's own test cases first, then ProfilerStep 0 (and 1)
CASES = [
    ("hta_simple_add", "hta_simple_add", 0, ALEXNET_FORWARD, 1),
    ("hta_a100_alexnet", "hta_a100_alexnet", 0, ALEXNET_FORWARD, 1),
    ("hta_event_sync", "hta_event_sync", 0, "ProfilerStep", 0),
    (
        "hta_event_sync_multistream",
        "hta_event_sync_multistream",
        0,
        "",
        None,
    ),  # no ProfilerStep: HTA's test's whole trace
    ("hta_a100_ddp_2rank_r0:step0", "hta_a100_ddp_2rank_r0", 0, "ProfilerStep", 0),
    ("hta_a100_ddp_2rank_r0:step1", "hta_a100_ddp_2rank_r0", 0, "ProfilerStep", 1),
    ("hta_a100_torchrec_cudagraph_16rank_r0:step0", "hta_a100_torchrec_cudagraph_16rank_r0", 0, "ProfilerStep", 0),
    ("hta_a100_torchrec_cudagraph_16rank_r0:step1", "hta_a100_torchrec_cudagraph_16rank_r0", 0, "ProfilerStep", 1),
    ("hta_v100_ddp_resnet_1rank:step0", "hta_v100_ddp_resnet_1rank", 0, "ProfilerStep", 0),
    ("hta_v100_ddp_resnet_1rank:step1", "hta_v100_ddp_resnet_1rank", 0, "ProfilerStep", 1),
    ("hta_v100_rec_2rank_r1:step0", "hta_v100_rec_2rank_r1", 1, "ProfilerStep", 0),
    ("hta_v100_rec_2rank_r1:step1", "hta_v100_rec_2rank_r1", 1, "ProfilerStep", 1),
    ("kineto_v100_resnet50_2021:step0", "kineto_v100_resnet50_2021", 0, "ProfilerStep", 0),
    ("param_rtx2080ti_linear:all", "param_rtx2080ti_linear", 0, "", 0),
    ("param_v100_dlrm_8rank:r0", "param_v100_dlrm_8rank", 0, "ProfilerStep", 0),
    ("tracelens_h100_bert_small:step0", "tracelens_h100_bert_small", 0, "ProfilerStep", 0),
    ("tracelens_h100_owlv2:step0", "tracelens_h100_owlv2", 0, "ProfilerStep", 0),
    ("tracelens_mi300x_sglang_prefilldecode:all", "tracelens_mi300x_sglang_prefilldecode", 0, "", 0),
]


def run_one(folder: str, rank: int, annotation: str, instance: int) -> dict:
    """In this process: load the folder with HTA, compute the path, summarise it."""
    import logging

    logging.disable(logging.WARNING)
    from hta.trace_analysis import TraceAnalysis

    t0 = time.perf_counter()
    ta = TraceAnalysis(trace_dir=folder)
    t1 = time.perf_counter()
    out: dict = {"load_s": round(t1 - t0, 3)}
    try:
        cp, ok = ta.critical_path_analysis(rank=rank, annotation=annotation, instance_id=instance)
    except Exception as exc:  # recorded: the suite states where HTA gives no path
        out.update(error=f"{type(exc).__name__}: {exc}"[:300], path_s=round(time.perf_counter() - t1, 3))
        return out
    t2 = time.perf_counter()
    out["path_s"] = round(t2 - t1, 3)
    out["ok"] = bool(ok)
    if not ok:
        return out
    edges = cp.get_critical_path_breakdown()
    out["length_us"] = float(edges["duration"].sum())
    out["n_edges"] = int(len(edges))
    out["n_nodes"] = int(len(cp.critical_path_nodes))
    shares = edges.groupby("bound_by")["duration"].sum()
    total = float(edges["duration"].sum())
    out["bound_by_us"] = {str(k) or "dependency": float(v) for k, v in shares.items()}
    out["bound_by_pct"] = {
        str(k) or "dependency": (100.0 * float(v) / total if total else 0.0) for k, v in shares.items()
    }
    out["edge_type_us"] = {str(k): float(v) for k, v in edges.groupby("type")["duration"].sum().items()}
    nodes = [cp.node_list[n] for n in cp.critical_path_nodes]
    out["first_node_ts"], out["last_node_ts"] = float(nodes[0].ts), float(nodes[-1].ts)
    return out


def main() -> None:
    if len(sys.argv) >= 2 and sys.argv[1] == "--one":
        folder, rank, annotation = sys.argv[2], int(sys.argv[3]), sys.argv[4]
        instance = None if sys.argv[5] == "none" else int(sys.argv[5])
        print(json.dumps(run_one(folder, rank, annotation, instance)))
        return
    only = set(sys.argv[sys.argv.index("--only") + 1].split(",")) if "--only" in sys.argv else None
    args = [a for i, a in enumerate(sys.argv[1:], 1) if a != "--only" and sys.argv[i - 1] != "--only"]
    traces = Path(args[0] if args else "/work/shared/traces")
    from importlib.metadata import version

    import hta  # noqa: F401  (fail early outside HTA's venv)

    result = {
        "made_by": "/tmp/hta/bin/python tests/data/hta/make_critical_path_reference.py " + str(traces),
        "hta_package": f"traceinsight {version('traceinsight')}",
        "zero_weight_launch_edges": "HTA default (off)",
        "cases": {},
    }
    out_path = HERE / "critical_path.json"
    if only is not None and out_path.exists():  # --only CASE,...: rerun those, keep the others
        result["cases"] = json.loads(out_path.read_text())["cases"]
    with tempfile.TemporaryDirectory() as tmp:
        for case, tset, rank, annotation, instance in CASES:
            if only is not None and case not in only:
                continue
            src = traces / tset
            folder = Path(tmp) / tset  # the trace files alone: HTA reads every trace file in its folder
            if not folder.exists():
                folder.mkdir()
                for f in src.iterdir():
                    if f.is_file() and (f.name.endswith(".json") or f.name.endswith(".json.gz")):
                        (folder / f.name).symlink_to(f)
            entry = {"trace_set": tset, "rank": rank, "annotation": annotation, "instance": instance}
            for mode, extra in (("rounded", {}), ("noround", {"HTA_DISABLE_NS_ROUNDING": "1"})):
                env = {**os.environ, **extra}
                p = subprocess.run(
                    [
                        sys.executable,
                        __file__,
                        "--one",
                        str(folder),
                        str(rank),
                        annotation,
                        "none" if instance is None else str(instance),
                    ],
                    capture_output=True,
                    text=True,
                    env=env,
                    timeout=900,
                )
                lines = [ln for ln in p.stdout.splitlines() if ln.startswith("{")]
                entry[mode] = json.loads(lines[-1]) if lines else {"error": (p.stderr or "no output")[-300:]}
                print(case, mode, {k: entry[mode].get(k) for k in ("length_us", "error", "path_s")}, flush=True)
            result["cases"][case] = entry
    out_path.write_text(json.dumps(result, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
