"""Write tests/data/bad/: one small file (or folder) per kind of bad input, cut from a real trace
(gpu/h100_bert_small.json.gz). Run again to refresh them:  .venv/bin/python tests/data/make_bad_traces.py
"""
from __future__ import annotations

import gzip
import json
from pathlib import Path

HERE = Path(__file__).resolve().parent
BAD = HERE / "bad"


def _source() -> dict:
    with gzip.open(HERE / "gpu" / "h100_bert_small.json.gz") as fh:
        trace = json.load(fh)
    keep = [e for e in trace["traceEvents"] if e.get("cat") in ("cpu_op", "kernel", "cuda_runtime", "ac2g")]
    return {"schemaVersion": 1, "deviceProperties": trace["deviceProperties"], "traceEvents": keep[:40]}


def _write(name: str, data: bytes) -> None:
    (BAD / name).write_bytes(data)


def _dump(trace: dict) -> bytes:
    return json.dumps(trace, indent=1).encode()


def main() -> None:
    BAD.mkdir(exist_ok=True)
    good = _source()
    full = _dump(good)
    _write("truncated_gzip.json.gz", gzip.compress(full)[:-200])
    _write("truncated_json.json", full[: len(full) // 2])
    _write("not_json.json", b"this is a log file, not a trace\n")
    _write("empty_file.json", b"")
    _write("not_a_trace.json", json.dumps({"model": "bert", "loss": [1.0, 0.5]}).encode())
    _write("empty_events.json", _dump({**good, "traceEvents": []}))
    events = json.loads(full)["traceEvents"]
    wrong = [dict(e) for e in events]
    wrong[5]["name"] = 12345
    _write("wrong_field_type.json", _dump({**good, "traceEvents": wrong}))
    missing = [dict(e) for e in events]
    for e in missing[3:6]:
        e.pop("ts", None)
    missing[7].pop("dur", None)
    _write("missing_fields.json", _dump({**good, "traceEvents": missing}))
    negative = [dict(e) for e in events]
    negative[2]["dur"] = -5.5
    _write("negative_duration.json", _dump({**good, "traceEvents": negative}))
    absurd = [dict(e) for e in events]
    absurd[4]["dur"] = 1e14
    _write("absurd_duration.json", _dump({**good, "traceEvents": absurd}))
    bad_args = [dict(e) for e in events]
    bad_args[1]["args"] = [1, 2, 3]
    _write("args_not_object.json", _dump({**good, "traceEvents": bad_args}))
    for folder, ranks in (("duplicate_ranks", (0, 0)), ("no_ranks", (None, None))):
        (BAD / folder).mkdir(exist_ok=True)
        for i, rank in enumerate(ranks):
            extra = {"distributedInfo": {"rank": rank, "world_size": 2}} if rank is not None else {}
            (BAD / folder / f"worker{i}.json").write_bytes(_dump({**good, **extra}))


if __name__ == "__main__":
    main()
