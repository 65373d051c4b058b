"""Record the planted workloads' runs once, on a quiet machine, for the diagnosis tests to replay.

    .venv/bin/python tests/data/record_planted_runs.py                  # planted.py and corpus.py's tuning half
    .venv/bin/python tests/data/record_planted_runs.py --set planted    # only tests/workloads/planted.py
    .venv/bin/python tests/data/record_planted_runs.py --only lazy_module_init   # refresh one case

Every planted and clean workload of tests/workloads/planted.py is profiled as
tests/workloads/test_planted.py profiled it live (``warmup=3, repeat=20, threads=1`` and the
builder's own options) and saved with ``run.save`` under ``tests/data/planted_runs/<case>/``;
corpus.py's tuning half at each workload's own settings under ``tests/data/corpus_runs/<case>/``.
``<case>`` is ``<category>-<name>`` (``clean-<name>`` for a clean one). The diagnosis tests then load
them (``tests/workloads/recorded.py``) and judge the rankings deterministically, on any machine.

The runs must not be tuned on. A case is profiled again only for **machine noise**, judged from
the run's own health check, never from its diagnosis: the machine loaded (``machine_load``), the
process kept waiting for a CPU (``cpu_wait``), or the clean samples' spread above the health check's
limit (``noisy_timing``; not for a workload planted with ``measurement`` or ``recompilation``, whose
spread is the planted problem). Before each attempt the script waits (a bounded time) for the 1-minute load average to fall.
The first quiet attempt is kept; if none was quiet, the least noisy one, said in the log. Each
attempt and its reason are appended to ``recording_log.txt`` in the output folder; ``manifest.json``
holds, per case, the attempts, the kept run's health, the fresh-buffer cost ratio (for the
allocation-churn cases: whether this process charged the planted cost at all) and the live ranking.
After saving, the run is loaded back and its hypotheses re-diagnosed: they must equal the live
run's (the script exits non-zero, naming the case, if not).

The machine state a fresh clone has is reproduced: ``OMP_WAIT_POLICY=PASSIVE`` (as ``make test``),
the default malloc mode (as tests/conftest.py), and an empty cache folder (no measured CPU ceiling:
the documented default ceiling, which the replay tests also use).
"""

from __future__ import annotations

import os
import sys
import tempfile

_SCRATCH = tempfile.mkdtemp(prefix="record-planted-")
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
os.environ["WORKBENCH_ALLOCATOR"] = "default"
os.environ["XDG_CACHE_HOME"] = os.path.join(_SCRATCH, "xdg")  # no measured CPU ceiling
os.environ["WORKBENCH_CACHE_DIR"] = os.path.join(_SCRATCH, "cache")
os.environ["WORKBENCH_HISTORY"] = os.path.join(_SCRATCH, "history.jsonl")

import argparse  # noqa: E402
import gzip  # noqa: E402
import json  # noqa: E402
import shutil  # noqa: E402
import time  # noqa: E402
from datetime import datetime, timezone  # noqa: E402
from pathlib import Path  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

import workbench as wb  # noqa: E402
from tests.workloads.planted import fresh_buffer_cost_ratio  # noqa: E402
from tests.workloads.recorded import CORPUS_RUNS, PLANTED_RUNS, corpus_cases, planted_cases  # noqa: E402

ATTEMPTS = 4
QUIET_LOAD_PER_CORE = 0.75  # the health check's machine_load limit
MAX_WAIT_S = 40  # per attempt, for the load average to fall
BUDGET_S = 45 * 60  # past this (the whole recording), one attempt per case and no waiting, logged
_STARTED = time.monotonic()
NOISE_CHECKS = ("machine_load", "cpu_wait", "noisy_timing")
# categories whose planted problem itself spreads the clean samples: data-dependent waits and too few
# samples (measurement), a recompile in the timed calls (a call 100x the others): their spread is the
# workload's, not the machine's, and only machine_load / cpu_wait send them round again
WORKLOAD_SPREAD = frozenset({"measurement", "recompilation"})


def _usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def wait_for_quiet(log) -> float:
    """Wait (at most MAX_WAIT_S) for the 1-minute load average to fall below the health check's limit."""
    limit = QUIET_LOAD_PER_CORE * _usable_cores()
    t0 = time.monotonic()
    while os.getloadavg()[0] >= limit and time.monotonic() - t0 < MAX_WAIT_S and not _over_budget():
        time.sleep(5)
    load = os.getloadavg()[0]
    if time.monotonic() - t0 >= 5:
        log(f"  waited {time.monotonic() - t0:.0f} s for the load average ({load:.2f}, limit {limit:.2f})")
    return load


def _over_budget() -> bool:
    return time.monotonic() - _STARTED > BUDGET_S


def machine_noise(run, category: str | None) -> list[str]:
    """What the run's health check says about the machine (never about the diagnosis)."""
    out = []
    for name in NOISE_CHECKS:
        if name == "noisy_timing" and category in WORKLOAD_SPREAD:
            continue  # the planted problem makes the spread: not a reason to profile again
        c = run.health.check(name)
        if c is not None and c.level == "warn":
            out.append(f"{name}: {c.observed}")
    return out


# the profiler's own event indices, which nothing in workbench reads: dropped from the saved trace
# (with compact JSON at gzip level 9 this saves about a third) before the replay check below
UNREAD_TRACE_ARGS = ("Ev Idx", "Record function id")


def trim_trace(folder: Path) -> None:
    """Rewrite the bundle's trace.json.gz smaller: the same events, without ``UNREAD_TRACE_ARGS``."""
    path = folder / "trace.json.gz"
    if not path.exists():
        return
    doc = json.loads(gzip.decompress(path.read_bytes()))
    for event in doc.get("traceEvents", ()):
        args = event.get("args")
        if isinstance(args, dict):
            for key in UNREAD_TRACE_ARGS:
                args.pop(key, None)
    data = json.dumps(doc, separators=(",", ":")).encode()
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=9, mtime=0) as out:
        out.write(data)
    tmp.replace(path)


def _ranking(run) -> list[list]:
    return [[h.category, h.rule, h.confidence, round(h.time_at_stake_ms, 6)] for h in run.hypotheses]


def profile_case(build, options: dict):
    if "torch._dynamo" in sys.modules:
        torch._dynamo.reset()  # a rebuilt workload compiles afresh (dynamo caches by code object)
    fn, own = build()
    run = wb.profile(fn, **{**options, **own})
    if "torch._dynamo" in sys.modules:
        torch._dynamo.reset()
    return run


def record_case(case, out: Path, log) -> dict:
    log(f"{case.id}:")
    kept, kept_noise, attempts = None, None, []
    for attempt in range(1, ATTEMPTS + 1):
        load = wait_for_quiet(log)
        ratio = fresh_buffer_cost_ratio() if case.category == "allocation_churn" else None
        run = profile_case(case.build, case.options)
        noise = machine_noise(run, case.category)
        attempts.append(
            {
                "attempt": attempt,
                "load_avg_before": round(load, 2),
                "machine_noise": noise,
                "fresh_buffer_cost_ratio": ratio,
            }
        )
        log(
            f"  attempt {attempt}: load {load:.2f}, median {run.timing.median_ms:.4g} ms, "
            f"IQR {run.timing.relative_iqr:.0%}"
            + (f", fresh-buffer ratio {ratio:.2f}" if ratio else "")
            + (f"; machine noise, profiling again: {'; '.join(noise)}" if noise else "; quiet, kept")
        )
        score = run.timing.relative_iqr
        if kept is None or (not noise) or (kept_noise and score < kept_noise[1]):
            kept, kept_noise, kept_ratio = run, (noise, score), ratio
        if not noise:
            break
        if _over_budget():
            log(f"  past the recording's time budget ({BUDGET_S // 60} min): no more attempts")
            break
    if kept_noise[0]:
        log(
            f"  the machine stayed noisy over {len(attempts)} attempt(s): kept the least noisy (IQR {kept_noise[1]:.0%})"
        )
    folder = out / case.id
    if folder.exists():
        shutil.rmtree(folder)
    kept.save(folder)
    trim_trace(folder)
    live = _ranking(kept)
    replayed = _ranking(wb.load_run(folder))
    if replayed != live:
        log(f"  REPLAY MISMATCH: live {live} vs loaded {replayed}")
    log(
        f"  saved {folder.relative_to(ROOT)} ({sum(p.stat().st_size for p in folder.iterdir()) // 1024} KiB); "
        f"top: {live[:3]}"
    )
    return {
        "category": case.category,
        "workload": case.name,
        "options": {**case.options},
        "attempts": attempts,
        "kept_machine_noise": kept_noise[0],
        "fresh_buffer_cost_ratio": kept_ratio,
        "health_verdict": kept.health.verdict,
        "live_ranking": live,
        "replay_matches": replayed == live,
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--set", choices=("planted", "corpus", "all"), default="all")
    ap.add_argument("--only", nargs="*", help="workload names to record again (default: every case of the set)")
    ap.add_argument(
        "--trim-only",
        action="store_true",
        help="profile nothing: trim the saved traces and check each replay against the live ranking the manifest holds",
    )
    args = ap.parse_args(argv)
    sets = {
        "planted": [(PLANTED_RUNS, planted_cases())],
        "corpus": [(CORPUS_RUNS, corpus_cases())],
        "all": [(PLANTED_RUNS, planted_cases()), (CORPUS_RUNS, corpus_cases())],
    }[args.set]
    mismatched = []
    if args.trim_only:
        for out, cases in sets:
            notes = json.loads((out / "manifest.json").read_text())
            for case in cases:
                if args.only and case.name not in args.only:
                    continue
                trim_trace(out / case.id)
                if _ranking(wb.load_run(out / case.id)) != notes[case.id]["live_ranking"]:
                    mismatched.append(case.id)
                print(f"{case.id}: {sum(p.stat().st_size for p in (out / case.id).iterdir()) // 1024} KiB")
        if mismatched:
            print(f"a trimmed run re-diagnosed differently from the live run: {mismatched}", file=sys.stderr)
        return 1 if mismatched else 0
    for out, cases in sets:
        out.mkdir(parents=True, exist_ok=True)
        log_file = out / "recording_log.txt"
        manifest_file = out / "manifest.json"
        manifest = json.loads(manifest_file.read_text()) if manifest_file.exists() else {}
        with log_file.open("a") as fh:

            def log(line: str) -> None:
                print(line, flush=True)
                fh.write(line + "\n")
                fh.flush()

            log(
                f"\n== {datetime.now(timezone.utc).isoformat(timespec='seconds')}: recording {len(cases)} case(s) "
                f"into {out.relative_to(ROOT)}, torch {torch.__version__}, {_usable_cores()} usable core(s), "
                f"OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY')} =="
            )
            for case in cases:
                if args.only and case.name not in args.only:
                    continue
                entry = record_case(case, out, log)
                manifest[case.id] = entry
                if not entry["replay_matches"]:
                    mismatched.append(case.id)
                manifest_file.write_text(json.dumps(dict(sorted(manifest.items())), indent=1) + "\n")
    shutil.rmtree(_SCRATCH, ignore_errors=True)
    if mismatched:
        print(f"a loaded run re-diagnosed differently from the live run: {mismatched}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
