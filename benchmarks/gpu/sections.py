"""The sections of ``benchmarks/gpu/run.sh``: each runs in its own process and writes ``$OUT/<name>.json``.

    python benchmarks/gpu/sections.py run NAME --limit S       # one section (run.sh wraps it in `timeout`)
    python benchmarks/gpu/sections.py finalize NAME --rc RC --log FILE --seconds S --limit S
    python benchmarks/gpu/sections.py imports                  # every workbench module imported, to $WB_GPU_WORK
    python benchmarks/gpu/sections.py summary --wheels STATUS  # $OUT/summary.json; its exit status is run.sh's

A section does all it can before its first CUDA call (imports, an IPython shell with the extension
loaded, a notebook kernel started, the kernels defined) and records each step in ``reached``; on a
machine without CUDA it stops there as ``not_applicable``. Statuses:

  ok, failed            the section ran on a CUDA device
  not_applicable        no CUDA device (the dry run on CPU ends every section so)
  skipped               a package it needs is not installed ("skipped: papermill not installed")
  timeout, crashed      set by ``finalize`` when the process was killed or died without a verdict

A workbench module that later work adds (``workbench.kernels``, ``wb.profile(..., memory=True)``,
``Trace.critical_path``) is run when it exists and reported "not built yet: <module> missing" (not a
failure) when it does not; the direct evidence (a Triton kernel, a memory snapshot, a recorded trace) is
gathered either way. ``workbench.kernels.device_check(workdir) -> dict`` (with an ``ok`` key), where it
exists, is that module's own check on the device.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import inspect
import json
import os
import pickle
import platform
import re
import subprocess
import sys
import time
import traceback
from pathlib import Path
from typing import Any, Callable

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
SECTIONS = ("gpu_check", "gpu_tests", "gpuprofile_cells", "triton_kernels", "memory", "critical_path", "report")
RAN = ("ok", "not_applicable", "skipped")  # a section that ran (or could not apply) on this machine
NO_CUDA = "not applicable: no CUDA device (torch.cuda.is_available() is False)"
TAIL_CHARS = 4000
# workbench modules whose absence of one of these packages is expected on the GPU image
OPTIONAL_PACKAGES = {
    "altair",
    "vl_convert",
    "ipywidgets",
    "anywidget",
    "papermill",
    "nbconvert",
    "nbformat",
    "nbclient",
    "ipykernel",
    "jupyter_client",
    "IPython",
    "traitlets",
    "distributed",
    "dask",
    "playwright",
    "orjson",
}
# WB_GPU_REHEARSE=1: a CPU rehearsal of the code after each gate (tensors on CPU, small sizes, Triton under its
# interpreter, no snapshot), so that a slip in it shows on CPU and not on the device; its verdicts mean nothing.
REHEARSE = os.environ.get("WB_GPU_REHEARSE") == "1"
DEV = "cpu" if REHEARSE else "cuda"
if REHEARSE:
    os.environ.setdefault("TRITON_INTERPRET", "1")
    os.environ.setdefault("WB_GPU_DEMO_DEVICE", "cpu")
REPORT_PACKAGES = (
    "papermill",
    "nbconvert",
    "nbclient",
    "nbformat",
    "ipykernel",
    "jupyter_client",
    "zmq",
    "altair",
    "vl_convert",
)


def out_dir() -> Path:
    path = Path(os.environ.get("WB_GPU_OUT") or os.environ.get("OUT") or ROOT / "benchmarks" / "out" / "gpu")
    path.mkdir(parents=True, exist_ok=True)
    return path


def work_dir() -> Path:
    path = Path(os.environ.get("WB_GPU_WORK") or out_dir() / "work")
    path.mkdir(parents=True, exist_ok=True)
    return path


def tail(text: str, n: int = TAIL_CHARS) -> str:
    return text if len(text) <= n else "..." + text[-n:]


# ----------------------------------------------------------------------------------------- environment
def _dist_version(name: str) -> str | None:
    from importlib import metadata

    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def versions() -> dict[str, Any]:
    """Interpreter, packages (distribution versions, without importing them) and the device."""
    out: dict[str, Any] = {"python": platform.python_version(), "executable": sys.executable}
    for dist in (
        "torch",
        "triton",
        "numpy",
        "pandas",
        "pyarrow",
        "msgspec",
        "ipython",
        "pytest",
        "pytest-timeout",
        "rich",
        "papermill",
        "nbconvert",
        "ipykernel",
        "altair",
        "vl-convert-python",
    ):
        out[dist] = _dist_version(dist)
    try:
        import torch

        out["torch_cuda"] = torch.version.cuda
        out["torch_hip"] = getattr(torch.version, "hip", None)
        out["cuda_available"] = bool(torch.cuda.is_available())
        if out["cuda_available"]:
            out["device"] = torch.cuda.get_device_name(0)
            out["capability"] = list(torch.cuda.get_device_capability(0))
    except Exception as exc:  # noqa: BLE001 - a broken torch is itself the finding
        out["torch_error"] = f"{type(exc).__name__}: {exc}"
    try:
        smi = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=15,
        )
        out["nvidia_smi"] = smi.stdout.strip() if smi.returncode == 0 else None
    except (OSError, subprocess.SubprocessError):
        out["nvidia_smi"] = None
    return out


def missing(modules: tuple[str, ...] | list[str]) -> list[str]:
    """The modules of ``modules`` that cannot be found (none is imported)."""
    gone = []
    for name in modules:
        try:
            if importlib.util.find_spec(name) is None:
                gone.append(name)
        except (ImportError, ValueError):
            gone.append(name)
    return gone


# ------------------------------------------------------------------------------------------- harness
class Outcome(Exception):
    """Ends a section with a verdict other than ``ok``."""

    def __init__(self, status: str, reason: str) -> None:
        super().__init__(reason)
        self.status, self.reason = status, reason


class Section:
    def __init__(self, name: str, limit_s: float) -> None:
        self.name, self.limit_s = name, limit_s
        self.start = time.perf_counter()
        self.artifacts = work_dir() / name
        self.artifacts.mkdir(parents=True, exist_ok=True)
        self.doc: dict[str, Any] = {
            "section": name,
            "status": "running",
            "reason": "",
            "limit_s": limit_s,
            "reached": [],
            "result": {},
            "versions": versions(),
        }
        self.save()

    @property
    def result(self) -> dict[str, Any]:
        return self.doc["result"]

    def left_s(self) -> float:
        return self.limit_s - (time.perf_counter() - self.start)

    def step(self, what: str) -> None:
        """One step reached; saved at once, so a killed section still shows how far it got."""
        print(f"[{self.name}] {what}", flush=True)
        self.doc["reached"].append(what)
        self.save()

    def gate(self, what: str) -> None:
        """The section's first CUDA call: on a machine without CUDA the section ends here."""
        import torch

        self.step(f"first CUDA call: {what}")
        if REHEARSE:
            self.step("rehearsal on CPU (WB_GPU_REHEARSE=1): the rest runs on CPU tensors; its verdict means nothing")
            self.doc["rehearsal"] = True
            return
        if not torch.cuda.is_available():
            raise Outcome("not_applicable", f"{NO_CUDA}, at {what}")

    def save(self) -> None:
        self.doc["seconds"] = round(time.perf_counter() - self.start, 2)
        path = out_dir() / f"{self.name}.json"
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(self.doc, indent=2, default=str), encoding="utf-8")
        tmp.replace(path)


def run_section(name: str, limit_s: float) -> int:
    sec = Section(name, limit_s)
    try:
        SECTION_FUNCS[name](sec)
        sec.doc["status"] = "ok"
    except Outcome as out:
        sec.doc["status"], sec.doc["reason"] = out.status, out.reason
    except Exception as exc:  # noqa: BLE001 - written into the section's JSON
        sec.doc["status"], sec.doc["reason"] = "failed", f"{type(exc).__name__}: {exc}"
        sec.doc["traceback"] = traceback.format_exc(limit=12)
    sec.save()
    print(f"[{name}] {sec.doc['status']}: {sec.doc['reason']}", flush=True)
    return 0 if sec.doc["status"] in RAN else 1


def finalize(name: str, rc: int, log: str | None, seconds: float, limit_s: float, reason: str | None = None) -> None:
    """Merge the process's exit status and log tail into its JSON; a missing or unfinished one is a
    timeout (rc 124/137) or a crash."""
    path = out_dir() / f"{name}.json"
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        doc = {"section": name, "status": "running", "reason": "", "reached": [], "result": {}}
    text = ""
    if log and os.path.exists(log):
        with open(log, encoding="utf-8", errors="replace") as f:
            text = f.read()
    if doc.get("status") == "running":
        if reason:
            doc["status"], doc["reason"] = "timeout", reason
        elif rc in (124, 137):
            doc["status"], doc["reason"] = "timeout", f"ran past its limit of {limit_s:.0f} s (killed, rc {rc})"
        else:
            doc["status"], doc["reason"] = "crashed", f"the section's process ended with rc {rc} before a verdict"
    doc.update(rc=rc, seconds=round(seconds, 2), limit_s=limit_s, stdout_tail=tail(text))
    doc.setdefault("versions", {})
    path.write_text(json.dumps(doc, indent=2, default=str), encoding="utf-8")


def summary(wheels: str, total_s: float, sections: list[str]) -> int:
    """``$OUT/summary.json``; returns run.sh's exit status: 0 when every section ran (on a machine
    without a GPU, "no CUDA device" counts as ran), 1 when any failed, timed out or crashed, and on a
    machine with a GPU (nvidia-smi sees one, or WB_GPU_REQUIRE_CUDA=1) also when one was not applicable."""
    env = versions()
    require_cuda = os.environ.get("WB_GPU_REQUIRE_CUDA", "") == "1" or bool(env.get("nvidia_smi"))
    if os.environ.get("WB_GPU_REQUIRE_CUDA", "") == "0":
        require_cuda = False
    rows: dict[str, Any] = {}
    bad = []
    for name in sections:
        try:
            doc = json.loads((out_dir() / f"{name}.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            doc = {"status": "crashed", "reason": "no JSON written"}
        rows[name] = {
            "status": doc.get("status"),
            "reason": doc.get("reason", ""),
            "seconds": doc.get("seconds"),
            "last_step": (doc.get("reached") or [None])[-1],
        }
        status = doc.get("status")
        if status not in RAN or (require_cuda and status == "not_applicable"):
            bad.append(name)
    imports = None
    imports_path = work_dir() / "imports.json"
    if imports_path.exists():
        imports = json.loads(imports_path.read_text(encoding="utf-8"))
    wheel_dir = ROOT / os.environ.get("WB_GPU_WHEEL_DIR", ".whl")
    wheel_files = sorted(p.name for p in wheel_dir.glob("*.whl")) if wheel_dir.is_dir() else []
    if wheels.startswith("failed"):
        bad.append("wheels")
    doc = {
        "exit_status": 1 if bad else 0,
        "failed": bad,
        "require_cuda": require_cuda,
        "total_seconds": round(total_s, 1),
        "wheels": wheels,
        "wheel_files": wheel_files,
        "sections": rows,
        "imports": imports,
        "versions": env,
    }
    text = json.dumps(doc, indent=2, default=str)
    (out_dir() / "summary.json").write_text(text, encoding="utf-8")
    print(text)
    return doc["exit_status"]


def check_imports() -> dict[str, Any]:
    """Import every workbench module: ok, optional (a package the image lacks), or an error."""
    import pkgutil

    import workbench

    result: dict[str, Any] = {"ok": [], "optional_missing": {}, "errors": {}}
    # ``__main__`` modules run their command when imported (``workbench.cli.__main__``): not imported here
    names = ["workbench"] + [
        m.name for m in pkgutil.walk_packages(workbench.__path__, "workbench.") if not m.name.endswith(".__main__")
    ]
    for name in names:
        try:
            importlib.import_module(name)
            result["ok"].append(name)
        except ModuleNotFoundError as exc:
            top = (exc.name or "").split(".")[0]
            if top in OPTIONAL_PACKAGES:
                result["optional_missing"][name] = f"{top} not installed"
            else:
                result["errors"][name] = f"{type(exc).__name__}: {exc}"
        except Exception as exc:  # noqa: BLE001
            if type(exc).__name__ == "MissingDependencyError":  # workbench's own "pip install ..." error
                result["optional_missing"][name] = str(exc)[:200]
            else:
                result["errors"][name] = f"{type(exc).__name__}: {exc}"
    result["counts"] = {
        "ok": len(result["ok"]),
        "optional_missing": len(result["optional_missing"]),
        "errors": len(result["errors"]),
    }
    result["ok"] = len(result["ok"])
    return result


# ------------------------------------------------------------------------------------------ sections
def _size(on_cuda: int, rehearsal: int) -> int:
    return rehearsal if REHEARSE else on_cuda


def _sync() -> None:
    import torch

    if DEV == "cuda":
        torch.cuda.synchronize()


def _allocated() -> int:
    import torch

    return int(torch.cuda.memory_allocated()) if DEV == "cuda" else 0


def _bench(fn: Callable[[], Any]) -> float:
    """Milliseconds per call: triton.testing.do_bench on CUDA (it flushes the L2 between calls)."""
    if DEV == "cuda":
        import triton.testing

        return float(triton.testing.do_bench(fn))
    samples = []
    for _ in range(3):
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1e3)
    return sorted(samples)[1]


def _subprocess(
    cmd: list[str], sec: Section, env: dict[str, str] | None = None, cwd: Path = ROOT, reserve_s: float = 10.0
) -> subprocess.CompletedProcess:
    timeout = max(5.0, sec.left_s() - reserve_s)
    try:
        done = subprocess.run(
            cmd, capture_output=True, text=True, timeout=timeout, cwd=cwd, env={**os.environ, **(env or {})}
        )
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode(errors="replace") if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        err = exc.stderr.decode(errors="replace") if isinstance(exc.stderr, bytes) else (exc.stderr or "")
        print(tail(out), tail(err), sep="\n", flush=True)
        raise Outcome("timeout", f"{' '.join(cmd[:3])} ran past {timeout:.0f} s") from None
    print(tail(done.stdout), flush=True)
    print(tail(done.stderr), file=sys.stderr, flush=True)
    return done


def sec_gpu_check(sec: Section) -> None:
    """benchmarks/gpu_check.py: timing with the L2 flush, wb.profile on CUDA, CUDA-graph and compiled decisions."""
    sec.step("run benchmarks/gpu_check.py (it imports workbench, then checks for CUDA)")
    report_path = sec.artifacts / "gpu_check.json"
    try:
        done = _subprocess(
            [sys.executable, str(ROOT / "benchmarks" / "gpu_check.py")], sec, env={"OUT": str(sec.artifacts)}
        )
    except Outcome:
        if report_path.exists():  # rewritten after each of its sections: what it finished before the limit
            sec.result["report"] = json.loads(report_path.read_text(encoding="utf-8"))
        raise
    sec.result["rc"] = done.returncode
    if done.returncode == 2 and "not applicable: no CUDA device" in done.stderr:
        sec.step("first CUDA call: gpu_check.py's torch.cuda.is_available() (after its imports)")
        raise Outcome("not_applicable", done.stderr.strip().splitlines()[-1])
    try:
        report = json.loads(report_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        report = None
    sec.result["report"] = report
    if done.returncode != 0 or report is None:
        failed = (report or {}).get("failed")
        raise Outcome("failed", f"gpu_check.py exited {done.returncode}; failed sections: {failed}")


def _gpu_test_files() -> list[str]:
    files = []
    for path in sorted((ROOT / "tests").rglob("test_*.py")):
        text = path.read_text(encoding="utf-8", errors="replace")
        if "pytest.mark.gpu" in text:
            files.append(str(path.relative_to(ROOT)))
    return files


def sec_gpu_tests(sec: Section) -> None:
    """The tests marked ``gpu`` (pytest -m gpu over the files that hold the mark)."""
    import xml.etree.ElementTree as ET

    files = _gpu_test_files()
    sec.result["files"] = files
    if not files:
        raise Outcome("failed", "no test file carries pytest.mark.gpu")
    junit = sec.artifacts / "junit.xml"
    sec.step(f"pytest -m gpu over {len(files)} files")
    per_test = [] if missing(["pytest_timeout"]) else ["--timeout", "60"]
    done = _subprocess(
        [
            sys.executable,
            "-m",
            "pytest",
            "-m",
            "gpu",
            "-q",
            "-p",
            "no:cacheprovider",
            *per_test,
            f"--junitxml={junit}",
            *files,
        ],
        sec,
    )
    sec.result["rc"] = done.returncode
    if not junit.exists():
        raise Outcome("failed", f"pytest exited {done.returncode} without a junit report: {tail(done.stdout, 300)}")
    root = ET.parse(junit).getroot()
    cases = root.iter("testcase")
    counts = {"tests": 0, "passed": 0, "failed": 0, "errors": 0, "skipped": 0}
    failures, skip_reasons = [], {}
    for case in cases:
        counts["tests"] += 1
        test_id = f"{case.get('classname')}::{case.get('name')}"
        kids = {child.tag: child for child in case}
        if "failure" in kids or "error" in kids:
            tag = "failure" if "failure" in kids else "error"
            counts["failed" if tag == "failure" else "errors"] += 1
            failures.append({"test": test_id, "message": (kids[tag].get("message") or "")[:600]})
        elif "skipped" in kids:
            counts["skipped"] += 1
            reason = kids["skipped"].get("message") or ""
            skip_reasons[reason] = skip_reasons.get(reason, 0) + 1
        else:
            counts["passed"] += 1
    sec.result.update(counts=counts, failures=failures, skip_reasons=skip_reasons)
    if done.returncode == 5 or counts["tests"] == 0:
        raise Outcome("failed", "pytest collected no gpu test")
    if counts["failed"] or counts["errors"] or done.returncode not in (0,):
        raise Outcome("failed", f"{counts['failed']} failed, {counts['errors']} errors of {counts['tests']}")
    if counts["skipped"] == counts["tests"] and all("no CUDA device" in r for r in skip_reasons):
        sec.step("first CUDA call: every gpu test skipped on its CUDA check")
        raise Outcome("not_applicable", f"{NO_CUDA}: all {counts['tests']} gpu tests skipped so")


def sec_gpuprofile_cells(sec: Section) -> None:
    """Ten consecutive %%gpuprofile cells in one real IPython shell."""
    gone = missing(["IPython"])
    if gone:
        raise Outcome("skipped", f"skipped: {gone[0]} not installed (carry its wheels: benchmarks/gpu/wheels.sh)")
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    sec.step(f"IPython {sys.modules['IPython'].__version__} shell started")
    res = shell.run_cell("%load_ext workbench", store_history=True)
    if not res.success:
        raise Outcome("failed", f"%load_ext workbench failed: {res.error_in_exec or res.error_before_exec!r}")
    sec.step("%load_ext workbench")
    res = shell.run_cell("%%gpuprofile -T -w 0 -r 2 -q -o _wb_pre\n_wb_y = sum(range(1000))\n", store_history=True)
    pre = shell.user_ns.get("_wb_pre")
    if not res.success or pre is None:
        raise Outcome("failed", f"a host-only %%gpuprofile cell failed: {res.error_in_exec or res.error_before_exec!r}")
    sec.step(f"a host-only %%gpuprofile cell ran (timer {pre.timing.timer})")
    sec.gate("torch.randn(..., device='cuda') in the shell")
    import torch
    from torch.autograd import profiler as autograd_profiler

    side = _size(4096, 128)
    res = shell.run_cell(
        f"import torch\nx = torch.randn({side}, {side}, device={DEV!r})\n"
        f"w = torch.randn({side}, {side}, device={DEV!r})\n"
    )
    if not res.success:
        raise Outcome("failed", f"making CUDA tensors in the shell failed: {res.error_in_exec!r}")
    cells, problems = [], []
    base_alloc = _allocated()
    for i in range(10):
        body = "y = torch.relu(x @ w).sum()\n" if i % 2 == 0 else "y = (x * 1.0001 + 0.5).sigmoid().sum()\n"
        start = time.perf_counter()
        res = shell.run_cell(f"%%gpuprofile -w 2 -r 10 -q -n cell{i} -o run{i}\n{body}", store_history=True)
        row: dict[str, Any] = {"cell": i, "seconds": round(time.perf_counter() - start, 3), "success": res.success}
        run = shell.user_ns.get(f"run{i}")
        if not res.success or run is None:
            row["error"] = repr(res.error_in_exec or res.error_before_exec)[:600]
            problems.append(f"cell {i} failed")
        else:
            trace = run.trace
            row.update(
                timer=run.timing.timer,
                median_ms=run.timing.median_ms,
                cold_ms=run.cold_ms,
                trace_note=run.trace_note,
                has_gpu=bool(trace is not None and trace.has_gpu),
                kernels=int(len(trace.kernels)) if trace is not None else 0,
                hypotheses=[getattr(h, "category", "?") for h in (run.hypotheses or [])][:5],
            )
            if row["timer"] != "cuda_event":
                problems.append(f"cell {i} timed with {row['timer']}")
            if not row["has_gpu"] or row["kernels"] == 0:
                problems.append(f"cell {i}'s trace has no GPU kernels ({row['trace_note']})")
        row["profiler_left_on"] = bool(autograd_profiler._is_profiler_enabled)
        row["allocated_bytes"] = _allocated()
        if row["profiler_left_on"]:
            problems.append(f"the profiler was left on after cell {i}")
        cells.append(row)
        sec.result["cells"] = cells
        sec.step(f"cell {i}: {'ok' if row['success'] else 'failed'} in {row['seconds']} s")
    growth = cells[-1]["allocated_bytes"] - base_alloc
    sec.result["allocated_growth_bytes"] = growth
    if growth > 512 * 2**20:
        problems.append(f"device memory grew by {growth / 2**20:.0f} MiB over ten cells")
    sec.result["problems"] = problems
    if problems:
        raise Outcome("failed", "; ".join(problems[:5]))


def _load_triton_module():
    spec = importlib.util.spec_from_file_location("wb_gpu_triton_chain", HERE / "triton_chain.py")
    module = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _max_err(a, b) -> float:
    return float((a.double() - b.double()).abs().max())


def sec_triton_kernels(sec: Section) -> None:
    """Fused Triton kernels forward and backward against eager, timed with do_bench: the demo's
    elementwise chain written as one kernel each way (benchmarks/gpu/triton_chain.py); then
    workbench.kernels' own device_check where that module exists."""
    import torch

    wb_kernels_present = importlib.util.find_spec("workbench.kernels") is not None
    sec.result["workbench_kernels"] = "present" if wb_kernels_present else "not built yet: workbench.kernels missing"
    gone = missing(["triton"])
    if gone:
        raise Outcome("skipped", "skipped: triton not installed")
    chain = _load_triton_module()
    import triton
    import triton.testing

    import workbench as wb
    from workbench import demo

    sec.step(
        f"triton {triton.__version__}: the fused chain's kernels defined; workbench.kernels "
        f"{'present' if wb_kernels_present else 'missing'}"
    )
    if wb_kernels_present:
        importlib.import_module("workbench.kernels")
        found = [n for n in KERNEL_SHAPES if importlib.util.find_spec(f"workbench.kernels.{n}") is not None]
        for name in found + ["reference"]:
            importlib.import_module(f"workbench.kernels.{name}")
        sec.step(f"imported workbench.kernels: {', '.join(found)} and their references")
    sec.gate("torch.randn(1 << 24, device='cuda')")
    problems = []
    n = _size(1 << 24, 1 << 12) + 17  # not a multiple of the block: the mask is used
    x = torch.randn(n, device=DEV)
    xg = x.clone().requires_grad_(True)
    xe = x.clone().requires_grad_(True)
    g = torch.randn(n, device=DEV)
    y_t = chain.FusedChain.apply(xg)
    y_e = demo.elementwise_chain(xe)
    (dx_t,) = torch.autograd.grad(y_t, xg, g)
    (dx_e,) = torch.autograd.grad(y_e, xe, g)
    ref_y = demo.elementwise_chain(x.double())
    fwd_err, bwd_err = _max_err(y_t, y_e), _max_err(dx_t, dx_e)
    sec.result["correctness"] = {
        "n": n,
        "forward_max_abs_err_vs_eager": fwd_err,
        "forward_max_abs_err_vs_float64": _max_err(y_t, ref_y),
        "backward_max_abs_err_vs_eager": bwd_err,
    }
    if fwd_err > 1e-5 or bwd_err > 1e-5:
        problems.append(f"Triton differs from eager: forward {fwd_err:.2e}, backward {bwd_err:.2e}")
    sec.step("forward and backward checked against eager")

    def fwd_bwd(fn):
        return lambda: torch.autograd.grad(fn(xg), xg, g)

    fused_fwd = _bench(lambda: chain.fused_chain(x))
    eager_fwd = _bench(lambda: demo.elementwise_chain(x))
    fused_fb = _bench(fwd_bwd(chain.FusedChain.apply))
    eager_fb = _bench(fwd_bwd(demo.elementwise_chain))
    nbytes = 4 * n
    sec.result["timing_ms"] = {
        "forward": {
            "triton": fused_fwd,
            "eager": eager_fwd,
            "speedup": eager_fwd / fused_fwd,
            "triton_gbps": 2 * nbytes / fused_fwd / 1e6,
        },
        "forward_backward": {
            "triton": fused_fb,
            "eager": eager_fb,
            "speedup": eager_fb / fused_fb,
            "triton_gbps": 5 * nbytes / fused_fb / 1e6,
        },
    }
    sec.step("timed with triton.testing.do_bench")
    if fused_fwd >= eager_fwd:
        problems.append(f"the fused forward is not faster than eager ({fused_fwd:.3f} vs {eager_fwd:.3f} ms)")
    try:
        cmp = wb.compare(
            {"eager": demo.elementwise_chain, "triton": wb.variants.triton(chain.fused_chain)},
            inputs=lambda: (torch.randn(_size(1 << 24, 1 << 12), device=DEV),),
            checks=2,
            budget_s=_size(3, 1) * 1.0,
        )
        row = next(r for r in cmp.results if r.name == "triton")
        sec.result["wb_compare"] = {
            "decision": cmp.decision.decision,
            "status": row.status,
            "variant_decision": row.decision,
            "reason": row.reason,
            "speedup": row.speedup.point if row.speedup else None,
            "timer": row.timing.timer if row.timing else None,
            "correct": row.correctness.passed if row.correctness else None,
        }
        if row.status != "ok" or not sec.result["wb_compare"]["correct"]:
            problems.append(f"wb.compare's triton row: {row.status} {row.reason}")
    except Exception as exc:  # noqa: BLE001
        sec.result["wb_compare"] = {"error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc(limit=6)}
        problems.append(f"wb.compare with wb.variants.triton raised {type(exc).__name__}")
    sec.step("wb.compare(eager, wb.variants.triton)")
    if wb_kernels_present:
        module = importlib.import_module("workbench.kernels")
        check = getattr(module, "device_check", None)
        if check is None:
            cases = _kernel_cases(torch)
            sec.result["workbench_kernels"] = cases
            problems += [
                f"workbench.kernels.{name}: {row['problem']}" for name, row in cases.items() if row.get("problem")
            ]
        else:
            try:
                res = check(str(sec.artifacts))
                sec.result["workbench_kernels"] = res
                if not (isinstance(res, dict) and res.get("ok")):
                    problems.append("workbench.kernels.device_check() did not report ok")
            except Exception as exc:  # noqa: BLE001
                sec.result["workbench_kernels"] = {
                    "error": f"{type(exc).__name__}: {exc}",
                    "traceback": traceback.format_exc(limit=8),
                }
                problems.append(f"workbench.kernels.device_check raised {type(exc).__name__}")
        sec.step("workbench.kernels")
    sec.result["problems"] = problems
    if problems:
        raise Outcome("failed", "; ".join(problems))


# workbench.kernels.<name>.<name> against workbench.kernels.reference.<name>: shapes on CUDA, in the rehearsal
KERNEL_SHAPES = {
    "layer_norm": ((8192, 4096), (8, 64)),
    "rms_norm": ((8192, 4096), (8, 64)),
    "bias_gelu": ((8192, 4096), (8, 64)),
    "swiglu": ((8192, 4096), (8, 64)),
    "softmax": ((8192, 4096), (8, 64)),
    "cross_entropy": ((4096, 32768), (8, 64)),
}


def _kernel_inputs(torch, name: str, shape: tuple[int, int]) -> tuple[list[Any], list[bool]]:
    m, n = shape
    randn = lambda *size: torch.randn(*size, device=DEV)  # noqa: E731
    if name in ("layer_norm",):
        return [randn(m, n), 1 + 0.1 * randn(n), 0.1 * randn(n)], [True, True, True]
    if name == "rms_norm":
        return [randn(m, n), 1 + 0.1 * randn(n)], [True, True]
    if name == "bias_gelu":
        return [randn(m, n), 0.1 * randn(n)], [True, True]
    if name == "swiglu":
        return [randn(m, n), randn(m, n)], [True, True]
    if name == "softmax":
        return [randn(m, n)], [True]
    return [randn(m, n), torch.randint(0, n, (m,), device=DEV)], [True, False]


def _kernel_cases(torch) -> dict[str, Any]:
    """Each fused kernel of workbench.kernels, forward and backward, against its eager reference (and
    float64), timed forward and forward+backward."""
    reference = importlib.import_module("workbench.kernels.reference")
    rows: dict[str, Any] = {}
    for name, (on_cuda, rehearsal) in KERNEL_SHAPES.items():
        row: dict[str, Any] = {}
        rows[name] = row
        try:
            kernel = getattr(importlib.import_module(f"workbench.kernels.{name}"), name)
            ref = getattr(reference, name)
        except (ImportError, AttributeError) as exc:
            row["status"] = f"not built yet: workbench.kernels.{name} missing ({type(exc).__name__})"
            continue
        try:
            shape = rehearsal if REHEARSE else on_cuda
            base, grads = _kernel_inputs(torch, name, shape)
            row["shape"] = list(shape)

            def fresh(dtype=None, base=base, grads=grads):
                out = []
                for t, g in zip(base, grads):
                    t = t.detach().clone()
                    if dtype is not None and t.is_floating_point():
                        t = t.to(dtype)
                    out.append(t.requires_grad_(True) if g else t)
                return out

            ins_k, ins_e, ins_64 = fresh(), fresh(), fresh(torch.float64)
            y_k, y_e, y_64 = kernel(*ins_k), ref(*ins_e), ref(*ins_64)
            dy = torch.randn_like(y_e)
            diff = lambda a, b: float((a.double() - b.double()).abs().max()) if a.numel() else 0.0  # noqa: E731
            scale = max(1.0, float(y_64.abs().max()))
            row["forward_err_vs_float64"] = {"kernel": diff(y_k, y_64), "eager": diff(y_e, y_64)}
            leaves = [i for i, g in enumerate(grads) if g]
            g_k = torch.autograd.grad(y_k, [ins_k[i] for i in leaves], dy)
            g_e = torch.autograd.grad(y_e, [ins_e[i] for i in leaves], dy)
            g_64 = torch.autograd.grad(y_64, [ins_64[i] for i in leaves], dy.double())
            row["backward_err_vs_float64"] = [
                {"kernel": diff(a, c), "eager": diff(b, c)} for a, b, c in zip(g_k, g_e, g_64)
            ]
            errs = [row["forward_err_vs_float64"]] + row["backward_err_vs_float64"]
            bad = [e for e in errs if e["kernel"] > max(10 * e["eager"], 1e-5 * scale)]
            if bad:
                row["problem"] = f"outside tolerance: {bad[:2]}"

            def fb(fn, ins):
                return lambda: torch.autograd.grad(fn(*ins), [ins[i] for i in leaves], dy)

            row["ms"] = {
                "forward": {"kernel": _bench(lambda: kernel(*ins_k)), "eager": _bench(lambda: ref(*ins_e))},
                "forward_backward": {"kernel": _bench(fb(kernel, ins_k)), "eager": _bench(fb(ref, ins_e))},
            }
            for part in row["ms"].values():
                part["speedup"] = part["eager"] / part["kernel"] if part["kernel"] else None
            row["status"] = "checked"
        except Exception as exc:  # noqa: BLE001 - one kernel's failure is its row's
            row["status"] = "error"
            row["problem"] = f"{type(exc).__name__}: {exc}"[:500]
            row["traceback"] = traceback.format_exc(limit=6)
    return rows


def _train_step():
    import torch

    width = _size(4096, 256)
    model = torch.nn.Sequential(torch.nn.Linear(1024, width), torch.nn.GELU(), torch.nn.Linear(width, 1024)).to(DEV)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x = torch.randn(_size(256, 32), 1024, device=DEV)

    def step():
        opt.zero_grad(set_to_none=True)
        loss = model(x).square().mean()
        loss.backward()
        opt.step()
        return loss

    return step


def _api(obj: Any, name: str) -> bool:
    try:
        return hasattr(obj, name)
    except Exception:  # noqa: BLE001 - a lazy attribute that fails to import is as good as absent
        return False


def sec_memory(sec: Section) -> None:
    """Memory capture: torch's allocator history and snapshot directly, then wb.profile(..., memory=True),
    trace.memory_timeline()/memory_peak() and wb.load_memory_snapshot where they exist."""
    import torch

    import workbench as wb

    has_memory_arg = "memory" in inspect.signature(wb.profile).parameters
    has_loader = _api(wb, "load_memory_snapshot")
    has_timeline = _api(wb.Trace, "memory_timeline") and _api(wb.Trace, "memory_peak")
    sec.result["workbench_api"] = {
        "profile(memory=True)": "present" if has_memory_arg else "not built yet: wb.profile(..., memory=True) missing",
        "load_memory_snapshot": "present" if has_loader else "not built yet: wb.load_memory_snapshot missing",
        "Trace.memory_timeline": "present" if has_timeline else "not built yet: Trace.memory_timeline missing",
    }
    if not (hasattr(torch.cuda.memory, "_record_memory_history") and hasattr(torch.cuda.memory, "_snapshot")):
        raise Outcome("failed", "this torch has no torch.cuda.memory._record_memory_history/_snapshot")
    sec.step("torch.cuda.memory._record_memory_history and _snapshot present; workbench's memory API looked up")
    sec.gate("torch.cuda.memory._record_memory_history(max_entries=100000)")
    problems = []
    step = _train_step() if REHEARSE else None
    snap: dict[str, Any] = {"segments": [], "device_traces": [[]]}  # the rehearsal has no CUDA allocator
    if not REHEARSE:
        torch.cuda.memory._record_memory_history(max_entries=100000)
        try:
            step = _train_step()
            for _ in range(3):
                step()
            _sync()
            snap = torch.cuda.memory._snapshot()
        finally:
            torch.cuda.memory._record_memory_history(enabled=None)
    assert step is not None
    path = sec.artifacts / "snapshot.pickle"
    with open(path, "wb") as f:
        pickle.dump(snap, f)
    traces = snap.get("device_traces") or [[]]
    actions: dict[str, int] = {}
    for event in traces[0]:
        actions[event.get("action", "?")] = actions.get(event.get("action", "?"), 0) + 1
    segments = snap.get("segments") or []
    sec.result["snapshot"] = {
        "bytes": path.stat().st_size,
        "segments": len(segments),
        "reserved_bytes": sum(s.get("total_size", 0) for s in segments),
        "trace_events": len(traces[0]),
        "actions": actions,
        "max_memory_allocated": int(torch.cuda.max_memory_allocated()) if DEV == "cuda" else 0,
    }
    if not traces[0]:
        problems.append("the snapshot holds no allocator events")
    sec.step(f"snapshot taken: {len(traces[0])} allocator events, {len(segments)} segments")
    if has_loader:
        try:
            loaded = wb.load_memory_snapshot(str(path))
            info: dict[str, Any] = {"type": type(loaded).__name__}
            for attr in ("memory_peak", "memory_timeline"):
                if _api(loaded, attr):
                    value = getattr(loaded, attr)()
                    info[attr] = _summarise(value)
            sec.result["load_memory_snapshot"] = info
        except Exception as exc:  # noqa: BLE001
            sec.result["load_memory_snapshot"] = {
                "error": f"{type(exc).__name__}: {exc}",
                "traceback": traceback.format_exc(limit=8),
            }
            problems.append(f"wb.load_memory_snapshot raised {type(exc).__name__}")
        sec.step("wb.load_memory_snapshot")
    if has_memory_arg:
        try:
            run = wb.profile(step, warmup=1, repeat=3, memory=True, name="memory on cuda")
            info = {"memory": run.memory}
            trace = run.trace
            if trace is not None and has_timeline:
                for attr in ("memory_peak", "memory_timeline"):
                    value = getattr(trace, attr)()
                    info[attr] = _summarise(value)
            sec.result["profile_memory"] = info
        except Exception as exc:  # noqa: BLE001
            sec.result["profile_memory"] = {
                "error": f"{type(exc).__name__}: {exc}",
                "traceback": traceback.format_exc(limit=8),
            }
            problems.append(f"wb.profile(..., memory=True) raised {type(exc).__name__}")
        sec.step("wb.profile(..., memory=True)")
    sec.result["problems"] = problems
    if problems:
        raise Outcome("failed", "; ".join(problems))


SUMMARY_FIELDS = (
    "length_us",
    "step_us",
    "shares_pct",
    "bound_by",
    "notes",
    "saved_us",
    "new_step_us",
    "peak_bytes",
    "peak_allocated_bytes",
    "peak_reserved_bytes",
)


def _summarise(value: Any, rows: int = 15) -> Any:
    """A result's scalar fields and the first rows of its table (a whole table can be large)."""
    out: dict[str, Any] = {"type": type(value).__name__}
    for field in SUMMARY_FIELDS:
        if _api(value, field):
            out[field] = getattr(value, field)
    for part in ("before", "after"):
        if _api(value, part) and not callable(getattr(value, part)):
            out[part] = _summarise(getattr(value, part), rows=5)
    table = getattr(value, "table", None) if _api(value, "table") else None
    if table is not None and hasattr(table, "head"):
        out["table_rows"] = int(len(table))
        out["table_head"] = json.loads(table.head(rows).to_json(orient="records", default_handler=str))
    if len(out) == 1:
        text = json.dumps(value.to_dict(), default=str) if hasattr(value, "to_dict") else repr(value)
        out["value"] = text[:5000]
    return json.loads(json.dumps(out, default=str))


def sec_critical_path(sec: Section) -> None:
    """The critical path of traces the code recorded on CUDA: wb.profile's traced pass, and a
    torch.profiler schedule with ProfilerStep annotations written to a file and loaded back."""
    import torch

    import workbench as wb

    has_cp = _api(wb.Trace, "critical_path")
    has_what_if = _api(wb.Trace, "what_if")
    sec.result["workbench_api"] = {
        "Trace.critical_path": "present" if has_cp else "not built yet: Trace.critical_path missing",
        "Trace.what_if": "present" if has_what_if else "not built yet: Trace.what_if missing",
    }
    sec.step("workbench imported; Trace.critical_path looked up")
    sec.gate("a training step's model moved to 'cuda'")
    problems = []
    step = _train_step()
    run = wb.profile(step, warmup=2, repeat=5, name="critical path on cuda")
    trace = run.trace
    if trace is None:
        raise Outcome("failed", f"wb.profile recorded no trace: {run.trace_note}")
    sec.result["profile_trace"] = {
        "has_gpu": bool(trace.has_gpu),
        "kernels": int(len(trace.kernels)),
        "runtime_calls": int(len(trace.runtime)),
        "trace_note": run.trace_note,
    }
    sec.step(f"wb.profile's trace: {len(trace.kernels)} kernels")
    path = sec.artifacts / "steps.pt.trace.json"
    sched = torch.profiler.schedule(wait=1, warmup=1, active=3)
    acts = [torch.profiler.ProfilerActivity.CPU]
    if DEV == "cuda":
        acts.append(torch.profiler.ProfilerActivity.CUDA)
    with torch.profiler.profile(activities=acts, schedule=sched) as prof:
        for _ in range(5):
            step()
            prof.step()
    _sync()
    prof.export_chrome_trace(str(path))
    stepped = wb.load_trace(str(path))
    sec.result["step_trace"] = {
        "bytes": path.stat().st_size,
        "has_gpu": bool(stepped.has_gpu),
        "kernels": int(len(stepped.kernels)),
    }
    sec.step("a torch.profiler trace with ProfilerStep annotations written and loaded")
    if not trace.has_gpu or not stepped.has_gpu:
        problems.append("a recorded trace holds no GPU activity")
    if has_cp:
        for label, tr, kwargs in (
            ("profile_trace", trace, {}),
            ("step_trace", stepped, {"annotation": "ProfilerStep", "instance": 0, "rank": 0}),
        ):
            try:
                cp = tr.critical_path(**kwargs)
                sec.result[f"{label}_critical_path"] = _summarise(cp)
                if has_what_if and label == "step_trace":
                    top = str(stepped.kernels["name"].value_counts().index[0]) if len(stepped.kernels) else "gemm"
                    pattern = re.escape(top[:60])  # what_if takes regular expressions
                    sec.result["what_if"] = {"pattern": pattern, "result": _summarise(tr.what_if({pattern: 0.5}))}
            except Exception as exc:  # noqa: BLE001
                sec.result[f"{label}_critical_path"] = {
                    "error": f"{type(exc).__name__}: {exc}",
                    "traceback": traceback.format_exc(limit=8),
                }
                problems.append(f"{label}.critical_path raised {type(exc).__name__}")
        sec.step("Trace.critical_path")
    sec.result["problems"] = problems
    if problems:
        raise Outcome("failed", "; ".join(problems))


def sec_report(sec: Section) -> None:
    """The demo report end to end on CUDA (``workbench report --workload cuda_demo:workload``): optional,
    it needs the report wheels (``benchmarks/gpu/wheels.sh --report``)."""
    gone = missing(list(REPORT_PACKAGES))
    if gone:
        raise Outcome(
            "skipped", f"skipped: {', '.join(gone)} not installed (optional: benchmarks/gpu/wheels.sh --report)"
        )
    import nbformat
    import papermill

    from workbench.report.kernel import current_interpreter_kernel

    sec.step("papermill, nbconvert, altair, vl_convert and workbench.report imported")
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "language": "python", "display_name": "Python 3"}
    nb.cells = [nbformat.v4.new_code_cell("import sys, workbench\nprint(sys.version, workbench.__file__)")]
    src, dst = sec.artifacts / "preflight.ipynb", sec.artifacts / "preflight.out.ipynb"
    nbformat.write(nb, str(src))
    with current_interpreter_kernel() as kernel_name:
        papermill.execute_notebook(
            str(src), str(dst), kernel_name=kernel_name, progress_bar=False, execution_timeout=120
        )
    sec.step("a notebook executed by papermill in the current interpreter's kernel")
    sec.gate("cuda_demo.make_inputs() (the workload's inputs on 'cuda')")
    out = sec.artifacts / "report"
    limit = max(30, int(sec.left_s() - 20))
    env = {"PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])}
    done = _subprocess(
        [
            sys.executable,
            "-m",
            "workbench.cli",
            "report",
            "--workload",
            "cuda_demo:workload",
            "--out",
            str(out),
            "--processes",
            "2",
            "--time-limit",
            str(limit),
        ],
        sec,
        env=env,
    )
    sec.result["rc"] = done.returncode
    pages = sorted(str(p.relative_to(out)) for p in out.rglob("*.html")) if out.exists() else []
    sec.result["html"] = {p: (out / p).stat().st_size for p in pages}
    summary_path = out / "summary.json"
    if summary_path.exists():
        data = json.loads(summary_path.read_text(encoding="utf-8"))
        sec.result["summary_keys"] = sorted(data)[:40]
        sec.result["summary"] = {k: data[k] for k in list(data)[:20] if k not in ("samples",)}
    if done.returncode != 0 or not pages:
        raise Outcome("failed", f"workbench report exited {done.returncode}; html pages: {pages}")


SECTION_FUNCS: dict[str, Callable[[Section], None]] = {
    "gpu_check": sec_gpu_check,
    "gpu_tests": sec_gpu_tests,
    "gpuprofile_cells": sec_gpuprofile_cells,
    "triton_kernels": sec_triton_kernels,
    "memory": sec_memory,
    "critical_path": sec_critical_path,
    "report": sec_report,
}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("name", choices=SECTIONS)
    r.add_argument("--limit", type=float, default=120.0)
    f = sub.add_parser("finalize")
    f.add_argument("name", choices=SECTIONS)
    f.add_argument("--rc", type=int, required=True)
    f.add_argument("--log")
    f.add_argument("--seconds", type=float, default=0.0)
    f.add_argument("--limit", type=float, default=0.0)
    f.add_argument("--reason")
    sub.add_parser("imports")
    s = sub.add_parser("summary")
    s.add_argument("--wheels", default="none")
    s.add_argument("--total-seconds", type=float, default=0.0)
    s.add_argument("--sections", default=" ".join(SECTIONS))
    args = p.parse_args(argv)
    if args.cmd == "run":
        return run_section(args.name, args.limit)
    if args.cmd == "finalize":
        finalize(args.name, args.rc, args.log, args.seconds, args.limit, args.reason)
        return 0
    if args.cmd == "imports":
        result = check_imports()
        (work_dir() / "imports.json").write_text(json.dumps(result, indent=2), encoding="utf-8")
        print(json.dumps(result["counts"]), json.dumps(result["errors"], indent=1), sep="\n")
        return 0 if not result["errors"] else 1
    return summary(args.wheels, args.total_seconds, args.sections.split())


if __name__ == "__main__":
    sys.exit(main())
