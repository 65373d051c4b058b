"""``workbench profile --nproc-per-node N --out DIR SCRIPT [ARGS...]``: every rank of a torchrun job under
torch.profiler, one trace per rank, a run summary, then the diagnosis."""

from __future__ import annotations

import argparse
import os
import shlex
import signal
import subprocess
import sys
import time
import warnings
from typing import Any

import workbench.capture.distributed as distributed
from workbench.errors import InvalidArgumentError, WorkbenchError

EXIT_OK, EXIT_BAD_INPUT, EXIT_RANK_FAILED, EXIT_TIMEOUT = 0, 2, 3, 4

DESCRIPTION = f"""\
Run SCRIPT under torchrun (python -m torch.distributed.run: torch's own launcher, its rendezvous and
its environment: RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, ...) with torch.profiler on every rank,
and write into DIR:

  rank-<R>.pt.trace.json  one Kineto trace per rank, with distributedInfo (rank, world_size, backend)
  rank-<R>.status         each rank's status, exit code and wall time
  summary.json            written last: the command, world size, each rank's status and exit code,
                          the wall time, and "complete": true only when every rank finished and
                          exported its trace (a folder without it, or with complete false, is partial;
                          `workbench analyze DIR` warns on it)

then print where the traces are and the top hypotheses (`workbench analyze DIR` shows all of it).

By default the whole script is profiled. A script that marks its steps, calling
workbench.api.distributed.step() once per step (a no-op when not profiled), can be profiled over a window
of steps: --wait steps skipped, --warmup steps traced and dropped, --active steps kept
(torch.profiler.schedule with repeat=1). A window is the way to leave start-up (process-group setup,
the first collectives, the profiler's own first-session cost) out of the ranks' comparison.

On one node (--nnodes 1, the default) with no rendezvous option, torchrun runs --standalone (a
rendezvous on a free local port). --nnodes and the rendezvous options pass through to torchrun, so the
same command runs on each node of a cluster job; each node writes the traces of its own ranks into its
DIR.

A node runs at most {distributed.MAX_RANKS_PER_CPU} ranks per CPU core ({distributed.MAX_RANKS_PER_CPU} x os.cpu_count()), and
needs {distributed.RANK_MEMORY_BYTES // 2**20} MiB of available memory per rank: more is refused before anything runs.
"""

EPILOG = """\
examples:
  workbench profile --nproc-per-node 2 --out traces/job train.py --epochs 1
  workbench profile --nproc-per-node 4 --out traces/win --wait 2 --warmup 1 --active 3 train.py
  workbench profile --nnodes 2 --node-rank 0 --rdzv-backend c10d --rdzv-endpoint head:29400 \\
      --nproc-per-node 8 --out traces/node0 train.py

exit status:
  0  every rank finished and exported its trace
  2  bad input, refused before anything ran (a missing script, too many processes for this machine,
     an output folder that holds other traces without --force, an impossible step window)
  3  a rank failed (exception, non-zero exit, killed); summary.json says which, with its exit code,
     and the traces of the ranks that finished are kept
  4  the job ran past --timeout and was stopped (SIGTERM, then SIGKILL); ranks that could still
     export wrote their traces
  128+N  this command was stopped by signal N (SIGINT 130, SIGTERM 143, SIGHUP 129): the whole job got
     SIGTERM, then SIGKILL after the grace period, and summary.json says "complete": false and why

The job is owned by this command: SIGTERM, SIGINT and SIGHUP are passed on to every process of the job
(torchrun and its ranks). If this command is killed outright (SIGKILL, a cancelled CI job), torchrun
gets SIGTERM from the kernel (a parent-death signal), and each rank stops itself when torchrun is gone,
so nothing of the job outlives it; the summary.json written at the start ("complete": false, "the run
did not finish") is then what `workbench analyze DIR` warns on.
"""


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser(
        "profile",
        help="profile every rank of a torchrun job (one trace per rank)",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--nproc-per-node",
        "--nproc_per_node",
        type=int,
        required=True,
        metavar="N",
        help="ranks (processes) on this node, passed to torchrun",
    )
    p.add_argument(
        "--out",
        required=True,
        metavar="DIR",
        help="folder for the rank traces and summary.json (created; one that holds traces or an "
        "earlier run is refused unless --force)",
    )
    p.add_argument(
        "--force",
        action="store_true",
        help="delete the trace files (*.json, *.json.gz) and rank status files already in DIR first",
    )
    p.add_argument(
        "--timeout",
        type=float,
        default=None,
        metavar="S",
        help="stop the job after S seconds (SIGTERM to every rank, which then exports what it "
        "recorded; SIGKILL 10 s later); default: no limit",
    )
    win = p.add_argument_group("step window (for scripts that call workbench.api.distributed.step() once per step)")
    win.add_argument(
        "--wait",
        type=int,
        default=0,
        metavar="STEPS",
        help="steps skipped before tracing starts (default: 0; needs --active)",
    )
    win.add_argument(
        "--warmup",
        type=int,
        default=0,
        metavar="STEPS",
        help="steps traced and dropped before the recorded ones (default: 0; needs --active)",
    )
    win.add_argument(
        "--active",
        type=int,
        default=None,
        metavar="STEPS",
        help="steps recorded; giving it profiles only that window (default: the whole script)",
    )
    rdzv = p.add_argument_group("passed to torchrun (several nodes, rendezvous)")
    rdzv.add_argument("--nnodes", default="1", metavar="N|MIN:MAX", help="nodes in the job (default: 1)")
    rdzv.add_argument(
        "--node-rank",
        "--node_rank",
        type=int,
        default=None,
        metavar="R",
        help="this node's rank, for the static rendezvous",
    )
    rdzv.add_argument(
        "--rdzv-backend", "--rdzv_backend", default=None, metavar="NAME", help="rendezvous backend (static, c10d, etcd)"
    )
    rdzv.add_argument(
        "--rdzv-endpoint", "--rdzv_endpoint", default=None, metavar="HOST:PORT", help="rendezvous endpoint"
    )
    rdzv.add_argument("--rdzv-id", "--rdzv_id", default=None, metavar="ID", help="the job's rendezvous id")
    rdzv.add_argument(
        "--master-addr",
        "--master_addr",
        default=None,
        metavar="HOST",
        help="address of the rank-0 node (static rendezvous)",
    )
    rdzv.add_argument(
        "--master-port",
        "--master_port",
        type=int,
        default=None,
        metavar="PORT",
        help="port on the rank-0 node (static rendezvous)",
    )
    p.add_argument("--top", type=int, default=3, metavar="N", help="hypotheses printed at the end (default: 3)")
    p.add_argument("script", metavar="SCRIPT", help="the Python script every rank runs")
    p.add_argument(
        "script_args", nargs=argparse.REMAINDER, metavar="ARGS", help="arguments for SCRIPT (everything after it)"
    )
    p.set_defaults(handler=run)


def torchrun_command(args: argparse.Namespace) -> list[str]:
    """The torchrun command line this run uses."""
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nproc-per-node",
        str(args.nproc_per_node),
        "--nnodes",
        str(args.nnodes),
    ]
    passed = {
        "--node-rank": args.node_rank,
        "--rdzv-backend": args.rdzv_backend,
        "--rdzv-endpoint": args.rdzv_endpoint,
        "--rdzv-id": args.rdzv_id,
        "--master-addr": args.master_addr,
        "--master-port": args.master_port,
    }
    if str(args.nnodes) == "1" and all(v is None for v in passed.values()):
        cmd.append("--standalone")
    for flag, value in passed.items():
        if value is not None:
            cmd += [flag, str(value)]
    return cmd + ["-m", "workbench.capture.rank_entry", args.script, *args.script_args]


def _expected_ranks(args: argparse.Namespace) -> list[int]:
    n = args.nproc_per_node
    if str(args.nnodes) == "1":
        return list(range(n))
    if args.node_rank is not None:
        return list(range(args.node_rank * n, (args.node_rank + 1) * n))
    return []  # an elastic or c10d rendezvous assigns ranks: the status files say which


def _world_size(args: argparse.Namespace, ranks: list[dict]) -> int | None:
    if str(args.nnodes).isdigit():
        return int(args.nnodes) * args.nproc_per_node
    return None


def _check(args: argparse.Namespace) -> distributed.Window | None:
    if not os.path.isfile(args.script):
        raise InvalidArgumentError(f"the script {args.script!r} does not exist or is not a file")
    distributed.check_world_size(args.nproc_per_node)
    if args.timeout is not None and not args.timeout > 0:
        raise InvalidArgumentError(f"--timeout must be a positive number of seconds, got {args.timeout}")
    if args.top < 0:
        raise InvalidArgumentError(f"--top must be 0 or more, got {args.top}")
    if args.active is None:
        if args.wait or args.warmup:
            raise InvalidArgumentError(
                "--wait and --warmup shape a step window: give --active STEPS too "
                "(without --active the whole script is profiled)"
            )
        return None
    return distributed.Window(args.wait, args.warmup, args.active)


def run(args: argparse.Namespace) -> int:
    window = _check(args)
    removed = distributed.prepare_out(args.out, force=args.force)
    if removed:
        print(
            f"workbench profile: --force: removed {len(removed)} file(s) of an earlier run from {args.out}",
            file=sys.stderr,
        )
    cmd = torchrun_command(args)
    env = dict(os.environ)
    env[distributed.ENV_OUT] = os.path.abspath(args.out)
    env.pop(distributed.ENV_SCHEDULE, None)
    if window is not None:
        env[distributed.ENV_SCHEDULE] = window.to_env()
    # the ranks import workbench from wherever this command runs it
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(distributed.__file__))))
    env["PYTHONPATH"] = os.pathsep.join([root] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    shown_command = ["workbench", "profile", *sys.argv[2:]] if sys.argv[1:2] == ["profile"] else cmd
    distributed.write_provisional_summary(args.out, command=shown_command, tool="workbench profile")
    started = time.perf_counter()
    timed_out = False
    stopped_by: int | None = None
    with _JobSignals() as signals:
        # a session of its own, so that stopping it reaches every rank and never this process; the
        # parent-death signal stops torchrun if this process is killed before it can do so itself
        proc = subprocess.Popen(cmd, env=env, start_new_session=True, preexec_fn=_die_with_parent)
        try:
            code = proc.wait(timeout=args.timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            code = _stop(proc)
        except (KeyboardInterrupt, _Stopped):
            stopped_by = signals.received or signal.SIGINT
            code = _stop(proc)
    wall_s = time.perf_counter() - started
    ranks = distributed.rank_statuses(args.out, _expected_ranks(args))
    if code == 0 and stopped_by is None and not timed_out:
        for r in ranks:
            if r["status"] == "missing":
                r["status"] = "exited_unreported"
                r["error"] = (
                    "the rank's process ended with exit code 0 (torchrun says so) without writing its "
                    "status or trace: os._exit() or a signal handler of the script skipped the "
                    "profiler's export"
                )
    if stopped_by is not None:
        name = signal.Signals(stopped_by).name
        for r in ranks:
            if r["status"] in ("terminated", "missing", "interrupted"):
                r["error"] = f"still running when workbench profile got {name}: stopped"
    if timed_out:
        for r in ranks:
            if r["status"] in ("terminated", "missing"):
                r["error"] = f"still running after --timeout {args.timeout:g} s: stopped (a hang?)"
    summary = distributed.summarise(
        args.out,
        command=shown_command,
        world_size=_world_size(args, ranks) or len(ranks),
        ranks=ranks,
        wall_s=wall_s,
        exit_code=code,
        timed_out=timed_out,
        timeout_s=args.timeout,
        window=window,
        tool="workbench profile",
        stopped_by=signal.Signals(stopped_by).name if stopped_by is not None else None,
        extra={"torchrun": cmd, "node_ranks": [r["rank"] for r in ranks]},
    )
    _print_outcome(args, summary)
    if stopped_by is not None:
        return 128 + int(stopped_by)
    worked = [r for r in summary["ranks"] if r.get("trace") and r.get("timed_events") != 0]
    if worked and args.top:  # traces of no work have nothing to diagnose (the summary says so)
        _print_hypotheses(args.out, args.top)
    if timed_out:
        return EXIT_TIMEOUT
    return EXIT_OK if summary["complete"] else EXIT_RANK_FAILED


class _Stopped(BaseException):
    """SIGTERM or SIGHUP reached this command while the job ran."""


class _JobSignals:
    """While the job runs, SIGTERM and SIGHUP stop it like Ctrl-C does (``_Stopped``), and a second
    signal during the stop is ignored so the stop itself (grace period, then SIGKILL) finishes."""

    SIGNALS = tuple(s for s in (getattr(signal, "SIGTERM", None), getattr(signal, "SIGHUP", None)) if s is not None)

    def __init__(self) -> None:
        self.received: int | None = None
        self._previous: dict[int, Any] = {}

    def _on_signal(self, signum: int, frame: object) -> None:
        if self.received is not None:
            return  # already stopping
        self.received = signum
        raise _Stopped()

    def __enter__(self) -> "_JobSignals":
        import threading

        if threading.current_thread() is threading.main_thread():
            for sig in self.SIGNALS:
                self._previous[sig] = signal.signal(sig, self._on_signal)
        return self

    def __exit__(self, *exc: object) -> None:
        for sig, previous in self._previous.items():
            signal.signal(sig, previous if previous is not None else signal.SIG_DFL)


PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    """In the torchrun child, before exec (Linux): SIGTERM when this command's process dies, so a
    SIGKILL to this command (a cancelled CI job) still stops the job (torchrun passes SIGTERM on to
    its ranks). Elsewhere a no-op."""
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)
    except Exception:  # noqa: BLE001 - no prctl: the job is stopped by the handlers above only
        pass


def _stop(proc: subprocess.Popen) -> int:
    """SIGTERM the whole job (torchrun and its ranks: each rank exports what it recorded), then SIGKILL.
    A second Ctrl-C (or SIGTERM) meanwhile does not cut the stop short: the job is always ended."""
    import threading

    held: dict[int, Any] = {}
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGINT, *_JobSignals.SIGNALS):
            held[sig] = signal.signal(sig, signal.SIG_IGN)
    try:
        return _terminate_then_kill(proc)
    finally:
        for sig, previous in held.items():
            signal.signal(sig, previous if previous is not None else signal.SIG_DFL)


def _terminate_then_kill(proc: subprocess.Popen) -> int:
    for sig, wait_s in ((signal.SIGTERM, distributed.TERMINATE_GRACE_S), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            pass
        try:
            return proc.wait(timeout=wait_s)
        except subprocess.TimeoutExpired:
            continue
    return proc.returncode if proc.returncode is not None else -signal.SIGKILL


def _print_outcome(args: argparse.Namespace, summary: dict) -> None:
    out = args.out
    print()
    if summary["complete"]:
        print(
            f"workbench profile: {len(summary['traces'])} rank trace(s) in {out} "
            f"(summary: {os.path.join(out, distributed.SUMMARY)}, {summary['wall_s']:.1f} s)"
        )
    else:
        print(f"workbench profile: the run is INCOMPLETE: {summary['reason']}")
        for r in summary["ranks"]:
            if r.get("status") != "ok" or not r.get("trace"):
                code = r.get("exit_code")
                print(
                    f"  rank {r['rank']}: {r.get('status')}"
                    + (f", exit code {code}" if code is not None else "")
                    + (f": {r['error']}" if r.get("error") else "")
                )
        kept, partial = summary["traces"], set(summary["partial_traces"])
        whole = [t for t in kept if t not in partial]
        if kept:
            print(
                f"  kept in {out}: {len(whole)} trace(s) of the ranks that finished"
                + (f" ({', '.join(whole)})" if whole else "")
                + (
                    f"; {len(partial)} partial, up to the rank's failure or stop ({', '.join(sorted(partial))})"
                    if partial
                    else ""
                )
            )
        else:
            print(f"  no rank left a trace in {out}")
        print(f"  summary: {os.path.join(out, distributed.SUMMARY)} (complete: false)")
    print(f"  analyse: workbench analyze {shlex.quote(out)}")


def _print_hypotheses(out: str, top: int) -> None:
    from workbench.api.trace import load_trace
    from workbench.hypotheses import render_text

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            trace = load_trace(out)
        text = render_text(trace.hypotheses(), limit=top)
    except WorkbenchError as exc:
        print(f"\nthe traces could not be diagnosed: {exc}")
        return
    print(f"\ntop hypotheses ({trace.summary()}):")
    print(text or "(no hypothesis has evidence)")
