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
    _write("truncated_gzip.json.gz", gzip.compress(full, mtime=0)[:-200])
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
            # two files of one job, not one file copied (a copy is left out of a folder as such)
            extra["trace_id"] = f"worker{i}"
            (BAD / folder / f"worker{i}.json").write_bytes(_dump({**good, **extra}))
    _more(good, events)


def _nested(levels: int) -> str:
    return "[" * levels + "]" * levels


def _more(good: dict, events: list[dict]) -> None:
    """The kinds of bad input from issue 14 (a user's files as they come)."""
    head = json.dumps({k: v for k, v in good.items() if k != "traceEvents"})[:-1]
    # 1k and 100k levels of nesting in one event's args: that event is skipped, the rest loads
    for name, levels in (("nested_args_1k.json", 1_000), ("nested_args_100k.json", 100_000)):
        texts = [json.dumps(e) for e in events]
        texts[3] = (
            texts[3][:-1] + ', "args": {"deep": ' + _nested(levels) + "}}"
            if "args" not in events[3]
            else json.dumps({**events[3], "args": {}})[:-2] + '"deep": ' + _nested(levels) + "}}"
        )
        _write(name, (head + ', "traceEvents": [' + ",\n".join(texts) + "]}").encode())
    _write("rank_2_70.json", _dump({**good, "distributedInfo": {"rank": 2**70, "world_size": 2}}))
    # what Python's json, gzip and HTA accept: NaN/Infinity tokens, a UTF-8 BOM, UTF-16, gzip zero padding
    nan = [dict(e) for e in events]
    nan[2] = {**nan[2], "args": {**nan[2].get("args", {}), "External id": float("nan")}}
    nan[6] = {**nan[6], "dur": float("inf")}
    _write("nan_tokens.json", json.dumps({**good, "traceEvents": nan}).encode())  # json writes NaN, Infinity
    _write("utf8_bom.json", b"\xef\xbb\xbf" + _dump(good))
    _write("utf16.json", json.dumps(good, indent=1).encode("utf-16"))
    _write("gzip_zero_padding.json.gz", gzip.compress(_dump(good), mtime=0) + b"\0" * 512)
    # B/E pairs (the Chrome trace format's other way to write a span), and categories no table reads
    pairs = [dict(e) for e in events]
    ops = [e for e in pairs if e.get("cat") == "cpu_op"][:3]
    for op in ops:
        pairs.remove(op)
    outer, inner = ops[0], ops[1]
    t0 = outer["ts"]
    pairs += [
        {
            "ph": "B",
            "cat": "cpu_op",
            "name": "outer_BE",
            "pid": outer["pid"],
            "tid": outer["tid"],
            "ts": t0,
            "args": {"External id": 9001},
        },
        {"ph": "B", "cat": "cpu_op", "name": "inner_BE", "pid": outer["pid"], "tid": outer["tid"], "ts": t0 + 2},
        {"ph": "E", "pid": outer["pid"], "tid": outer["tid"], "ts": t0 + 5},
        {"ph": "E", "pid": outer["pid"], "tid": outer["tid"], "ts": t0 + 10.5},
        {"ph": "B", "cat": "cpu_op", "name": "never_ends", "pid": inner["pid"], "tid": inner["tid"], "ts": t0 + 20},
        {"ph": "X", "cat": "my_tool", "name": "custom", "pid": 1, "tid": 1, "ts": t0, "dur": 1},
        {"ph": "X", "cat": "my_tool", "name": "custom", "pid": 1, "tid": 1, "ts": t0 + 1, "dur": 1},
        {"ph": "C", "cat": "counters", "name": "memory", "pid": 1, "tid": 1, "ts": t0, "args": {"v": 3}},
    ]
    _write("begin_end_pairs.json", _dump({**good, "traceEvents": pairs}))
    # timestamps written in ns (epoch ns, ~1.7e18): the unit is said, not "profile a region"
    ns = [{**e, "ts": int(e["ts"] * 1000) + 1_700_000_000_000_000_000} if "ts" in e else e for e in events]
    _write("ns_timestamps.json", _dump({**good, "traceEvents": ns}))
    # a folder with one unreadable rank file: the good ranks load, the bad one is named
    folder = BAD / "one_bad_rank"
    folder.mkdir(exist_ok=True)
    for i in range(3):
        text = _dump({**good, "distributedInfo": {"rank": i, "world_size": 3}})
        (folder / f"rank{i}.json").write_bytes(text[: len(text) // 2] if i == 1 else text)
    # odd but loadable: for the analyses' numeric warnings (kernels, launches and ops)
    with gzip.open(HERE / "gpu" / "h100_bert_small.json.gz") as fh:
        full = json.load(fh)["traceEvents"]
    rich = [e for e in full if e.get("cat") == "cpu_op"][:100] + [
        e for e in full if e.get("cat") in ("kernel", "cuda_runtime")
    ]
    kernel = next(e for e in rich if e.get("cat") == "kernel")
    launch = next(
        e
        for e in rich
        if e.get("cat") == "cuda_runtime" and e.get("args", {}).get("correlation") == kernel["args"]["correlation"]
    )
    one = [e for e in rich if e.get("cat") == "cpu_op"][:1] + [launch, kernel]
    _write("one_kernel.json", _dump({**good, "traceEvents": one}))
    zero = [{**e, "dur": 0} if "dur" in e else e for e in rich]
    _write("zero_durations.json", _dump({**good, "traceEvents": zero}))
    cpu_only = [e for e in events if e.get("cat") == "cpu_op"]
    _write("cpu_ops_only.json", _dump({"traceEvents": cpu_only}))


if __name__ == "__main__":
    main()
