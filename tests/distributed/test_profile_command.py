"""`workbench profile` runs a script under torchrun with the profiler on every rank: a planted CPU straggler
is named by `workbench analyze DIR`; crashes, hangs, too many ranks and a used folder are said plainly."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from workbench.cli import main

SCRIPTS = os.path.join(os.path.dirname(__file__), "scripts")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _workbench(*args, env=None, timeout=60):
    full_env = {**os.environ, "OMP_WAIT_POLICY": "PASSIVE", **(env or {})}
    full_env["PYTHONPATH"] = os.pathsep.join([ROOT] + ([full_env["PYTHONPATH"]] if full_env.get("PYTHONPATH") else []))
    return subprocess.run(
        [sys.executable, "-m", "workbench.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=full_env,
        cwd=ROOT,
    )


def _summary(out):
    with open(os.path.join(out, "summary.json"), encoding="utf-8") as fh:
        return json.load(fh)


@pytest.mark.timeout(90)
def test_planted_straggler_is_named_by_analyze(tmp_path):
    out = str(tmp_path / "job")
    # rank 0 is the slow one here (wb.profile_distributed's test plants it on rank 1): the rank is found, not assumed
    proc = _workbench(
        "profile",
        "--nproc-per-node",
        "2",
        "--out",
        out,
        "--wait",
        "1",
        "--warmup",
        "1",
        "--active",
        "5",
        os.path.join(SCRIPTS, "straggler_job.py"),
        "8",
        env={"SLOW_RANK": "0"},
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert sorted(n for n in os.listdir(out) if n.endswith(".pt.trace.json")) == [
        "rank-0.pt.trace.json",
        "rank-1.pt.trace.json",
    ]
    for rank in (0, 1):
        with open(os.path.join(out, f"rank-{rank}.pt.trace.json"), encoding="utf-8") as fh:
            info = json.load(fh)["distributedInfo"]
        assert (info["rank"], info["world_size"], info["backend"]) == (rank, 2, "gloo")
    summary = _summary(out)
    assert summary["complete"] is True and summary["world_size"] == 2 and summary["exit_code"] == 0
    assert [(r["rank"], r["status"], r["exit_code"]) for r in summary["ranks"]] == [(0, "ok", 0), (1, "ok", 0)]
    assert summary["window"] == {"wait": 1, "warmup": 1, "active": 5}
    assert all(r["steps"] == 8 for r in summary["ranks"]) and summary["wall_s"] > 0
    assert out in proc.stdout and "[load_imbalance] Rank 0 is a straggler" in proc.stdout  # printed at the end

    analyzed = _workbench("analyze", out, "--json")
    assert analyzed.returncode == 0, analyzed.stderr
    result = json.loads(analyzed.stdout)
    imbalance = [h for h in result["hypotheses"] if h["category"] == "load_imbalance"]
    assert len(imbalance) == 1 and imbalance[0]["title"].startswith("Rank 0 is a straggler")
    assert "CPU idle" in imbalance[0]["observed"]  # the planted work is Python outside any op: the host is late
    stragglers = result["analyses"]["stragglers"]
    assert stragglers["stragglers"] == [0]
    # issue 25: the straggler leads, and no stake is taken from the fast rank's waits in its collectives
    first = result["hypotheses"][0]
    assert first["category"] == "load_imbalance", [h["title"] for h in result["hypotheses"]]
    on_fast_rank = [
        h for h in result["hypotheses"] if h["category"] in ("host_bound", "launch_overhead") and "1" in h["scope"]
    ]
    assert not on_fast_rank, [(h["title"], h["scope"]) for h in on_fast_rank]


@pytest.mark.timeout(60)
def test_a_crash_on_one_rank_is_named_with_its_exit_code(tmp_path):
    out = str(tmp_path / "crash")
    proc = _workbench(
        "profile", "--nproc-per-node", "2", "--out", out, "--top", "0", os.path.join(SCRIPTS, "crash_job.py")
    )
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert (
        "INCOMPLETE" in proc.stdout
        and "rank 1: failed, exit code 1: RuntimeError: planted failure on rank 1" in proc.stdout
    )
    summary = _summary(out)
    assert summary["complete"] is False and "rank 1 failed (exit code 1)" in summary["reason"]
    by_rank = {r["rank"]: r for r in summary["ranks"]}
    assert by_rank[0]["status"] == "ok" and by_rank[0]["trace"] == "rank-0.pt.trace.json"
    assert by_rank[1]["status"] == "failed" and by_rank[1]["exit_code"] == 1
    assert os.path.exists(os.path.join(out, "rank-0.pt.trace.json"))  # the rank that finished is kept
    analyzed = _workbench("analyze", out)
    assert analyzed.returncode == 0
    assert "warning:" in analyzed.stdout and "incomplete profiled run" in analyzed.stdout


@pytest.mark.timeout(120)
def test_a_hanging_rank_times_out_plainly_and_the_others_traces_are_kept(tmp_path):
    # rank 0 must start torch, profile and write its trace before the timeout, on a loaded machine too
    out = str(tmp_path / "hang")
    proc = _workbench(
        "profile",
        "--nproc-per-node",
        "2",
        "--out",
        out,
        "--timeout",
        "25",
        "--top",
        "0",
        os.path.join(SCRIPTS, "hang_job.py"),
    )
    assert proc.returncode == 4, proc.stdout + proc.stderr
    assert "timed out after 25 s" in proc.stdout
    summary = _summary(out)
    assert summary["timed_out"] is True and summary["complete"] is False
    by_rank = {r["rank"]: r for r in summary["ranks"]}
    assert by_rank[0]["status"] == "ok" and by_rank[0]["trace"]
    assert by_rank[1]["status"] in ("terminated", "missing")
    assert "still running after --timeout 25 s" in by_rank[1]["error"]
    assert "rank 1 was still running at the timeout" in summary["reason"]


def test_too_many_ranks_are_refused_with_the_rule(tmp_path, capsys):
    n = (os.cpu_count() or 1) * 4 + 1
    code = main(
        ["profile", "--nproc-per-node", str(n), "--out", str(tmp_path / "o"), os.path.join(SCRIPTS, "straggler_job.py")]
    )
    err = capsys.readouterr().err
    assert code == 2 and "too many" in err and "4 ranks per core" in err
    assert not (tmp_path / "o").exists()  # refused before anything ran


def test_a_folder_with_other_traces_is_refused_unless_force(tmp_path, capsys):
    out = tmp_path / "used"
    out.mkdir()
    (out / "old-rank-0.json").write_text("{}")
    code = main(["profile", "--nproc-per-node", "2", "--out", str(out), os.path.join(SCRIPTS, "straggler_job.py")])
    err = capsys.readouterr().err
    assert code == 2 and "never mixed" in err and "--force" in err
    assert (out / "old-rank-0.json").exists()

    from workbench.capture.distributed import prepare_out

    (out / "notes.txt").write_text("mine")
    assert prepare_out(str(out), force=True) == ["old-rank-0.json"]
    assert sorted(os.listdir(out)) == ["notes.txt"]  # only trace and run files are removed


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--wait", "2"], "give --active"),
        (["--active", "0"], "active >= 1"),
        (["--timeout", "0"], "--timeout must be a positive"),
    ],
)
def test_bad_options_are_refused_before_anything_runs(tmp_path, capsys, argv, message):
    out = tmp_path / "o"
    code = main(
        ["profile", "--nproc-per-node", "2", "--out", str(out), *argv, os.path.join(SCRIPTS, "straggler_job.py")]
    )
    assert code == 2 and message in capsys.readouterr().err
    assert not out.exists()


def test_a_missing_script_is_refused(tmp_path, capsys):
    assert main(["profile", "--nproc-per-node", "2", "--out", str(tmp_path / "o"), str(tmp_path / "nope.py")]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_help_explains_every_option():
    out = _workbench("profile", "--help").stdout
    for option in (
        "--nproc-per-node",
        "--out",
        "--force",
        "--timeout",
        "--wait",
        "--warmup",
        "--active",
        "--nnodes",
        "--node-rank",
        "--rdzv-backend",
        "--rdzv-endpoint",
        "--rdzv-id",
        "--master-addr",
        "--master-port",
        "--top",
        "SCRIPT",
        "ARGS",
    ):
        assert option in out, option
    for text in (
        "torchrun",
        "workbench.api.distributed.step()",
        "summary.json",
        "complete",
        "distributedInfo",
        "4 ranks per CPU core",
        "exit status",
    ):
        assert text in out, text
    for code in ("0", "2", "3", "4"):
        assert f"\n  {code}  " in out


def test_torchrun_gets_the_rendezvous_options():
    from workbench.cli import build_parser
    from workbench.cli.profile import torchrun_command

    one = build_parser().parse_args(["profile", "--nproc-per-node", "2", "--out", "o", "s.py", "--lr", "1"])
    cmd = torchrun_command(one)
    assert "--standalone" in cmd and cmd[-4:] == ["workbench.capture.rank_entry", "s.py", "--lr", "1"]
    many = build_parser().parse_args(
        [
            "profile",
            "--nproc-per-node",
            "8",
            "--nnodes",
            "2",
            "--node-rank",
            "1",
            "--rdzv-backend",
            "c10d",
            "--rdzv-endpoint",
            "head:29400",
            "--rdzv-id",
            "j",
            "--master-addr",
            "head",
            "--master-port",
            "29500",
            "--out",
            "o",
            "s.py",
        ]
    )
    cmd = torchrun_command(many)
    assert "--standalone" not in cmd
    for flag, value in (
        ("--nnodes", "2"),
        ("--node-rank", "1"),
        ("--rdzv-backend", "c10d"),
        ("--rdzv-endpoint", "head:29400"),
        ("--rdzv-id", "j"),
        ("--master-addr", "head"),
        ("--master-port", "29500"),
        ("--nproc-per-node", "8"),
    ):
        assert cmd[cmd.index(flag) + 1] == value


def _job_processes(out):
    """PIDs of live processes whose environment names this run's folder (torchrun and its ranks)."""
    marker = f"WORKBENCH_PROFILE_DIR={os.path.abspath(out)}".encode()
    pids = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as fh:
                env = fh.read().split(b"\0")
            with open(f"/proc/{name}/stat", "rb") as fh:
                state = fh.read().rsplit(b")", 1)[1].split()[0]
        except OSError:
            continue
        if marker in env and state != b"Z":
            pids.append(int(name))
    return pids


def _start_hanging_job(out):
    env = {**os.environ, "OMP_WAIT_POLICY": "PASSIVE"}
    env["PYTHONPATH"] = os.pathsep.join([ROOT] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "workbench.cli",
            "profile",
            "--nproc-per-node",
            "2",
            "--out",
            out,
            "--top",
            "0",
            os.path.join(SCRIPTS, "hang_job.py"),
        ],
        env=env,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    import time

    deadline = time.monotonic() + 60  # rank 0 finishes (its status file) while rank 1 hangs
    while time.monotonic() < deadline and not os.path.exists(os.path.join(out, "rank-0.status")):
        if proc.poll() is not None:
            break
        time.sleep(0.2)
    assert os.path.exists(os.path.join(out, "rank-0.status")), proc.communicate()[0]
    assert _job_processes(out), "the job should be running"
    return proc


def _wait_until_gone(out, timeout_s=40.0):
    import time

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and _job_processes(out):
        time.sleep(0.3)
    return _job_processes(out)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="not applicable: reads /proc (Linux)")
@pytest.mark.timeout(150)
def test_sigterm_to_the_command_stops_the_whole_job_and_says_so(tmp_path):
    import signal

    out = str(tmp_path / "term")
    proc = _start_hanging_job(out)
    proc.send_signal(signal.SIGTERM)  # what `timeout` and a CI step limit send
    text, _ = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signal.SIGTERM, text
    assert _wait_until_gone(out) == [], "torchrun or a rank outlived the command"
    summary = _summary(out)
    assert summary["complete"] is False and summary["stopped_by"] == "SIGTERM"
    assert "stopped by SIGTERM" in summary["reason"]
    by_rank = {r["rank"]: r for r in summary["ranks"]}
    assert by_rank[0]["status"] == "ok" and by_rank[0]["trace"]
    assert "INCOMPLETE" in text
    analyzed = _workbench("analyze", out)
    assert analyzed.returncode == 0
    assert analyzed.stdout.count("incomplete profiled run") == 1, analyzed.stdout


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="not applicable: reads /proc (Linux)")
@pytest.mark.timeout(150)
def test_sigkill_to_the_commands_process_group_leaves_nothing_running(tmp_path):
    import signal

    out = str(tmp_path / "kill")
    proc = _start_hanging_job(out)
    os.killpg(proc.pid, signal.SIGKILL)  # a cancelled CI job: no handler runs in the command
    proc.communicate(timeout=30)
    assert _wait_until_gone(out) == [], "torchrun or a rank outlived the killed command"
    summary = _summary(out)  # the provisional summary written at the start
    assert summary["complete"] is False and summary.get("provisional") is True
    assert "did not finish" in summary["reason"]
    analyzed = _workbench("analyze", out)
    assert analyzed.returncode == 0
    assert analyzed.stdout.count("incomplete profiled run") == 1, analyzed.stdout


@pytest.mark.timeout(90)
def test_a_rank_that_os_exits_is_not_called_killed(tmp_path):
    out = str(tmp_path / "osexit")
    proc = _workbench(
        "profile", "--nproc-per-node", "2", "--out", out, "--top", "0", os.path.join(SCRIPTS, "os_exit_job.py")
    )
    assert proc.returncode == 3, proc.stdout + proc.stderr
    by_rank = {r["rank"]: r for r in _summary(out)["ranks"]}
    assert by_rank[0]["status"] == "ok"
    assert by_rank[1]["status"] == "exited_unreported" and "os._exit()" in by_rank[1]["error"]
    assert "killed" not in by_rank[1]["error"]


@pytest.mark.timeout(90)
def test_an_empty_script_is_incomplete_and_says_no_work_was_recorded(tmp_path):
    out = str(tmp_path / "empty")
    proc = _workbench("profile", "--nproc-per-node", "2", "--out", out, os.path.join(SCRIPTS, "empty_job.py"))
    assert proc.returncode == 3, proc.stdout + proc.stderr  # a rank failed to give anything to diagnose
    summary = _summary(out)
    assert summary["complete"] is False
    assert "ranks 0, 1 recorded no work" in summary["reason"]
    assert [r["timed_events"] for r in summary["ranks"]] == [0, 0]
    assert "could not be diagnosed" not in proc.stdout  # no attempt to diagnose traces of nothing
