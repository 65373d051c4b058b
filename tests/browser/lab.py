"""The JupyterLab the browser tests drive: a server from this interpreter on 127.0.0.1 (a free port,
a random token, network features off) as the module-scoped ``lab`` fixture, and the page helpers
that open a notebook, wait for its kernel and run its cells. Support code, not a test module."""

from __future__ import annotations

import json
import os
import re
import secrets
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts"
LAB = Path(sys.executable).with_name("jupyter-lab")
DISABLED_PLUGINS = {  # both fetch from the internet when enabled
    "@jupyterlab/apputils-extension:announcements": True,
    "@jupyterlab/extensionmanager-extension": True,
}
# Console messages that are not failures of the page under test, and why:
IGNORED_CONSOLE = {
    # chromium logs each request the test itself aborted (none is expected; `external` lists them)
    r"net::ERR_FAILED": "a request the test aborted because it left 127.0.0.1",
    # no favicon route for a tree URL with a token in headless mode
    r"favicon": "favicon lookups are not part of the page",
}
CELLS = [
    "import torch\ntorch.set_num_threads(1)\n%load_ext workbench\nfrom workbench import demo\n"
    "x, w = demo.make_inputs(rows=256, hidden=256, out_features=64)",
    "%%gpuprofile -w 1 -r 3 -n demo -o run\nout = demo.workload(x, w)",
    "from workbench.widgets import VariantPanel\n"
    "panel = VariantPanel(demo.workload, lambda: demo.make_inputs(rows=256, hidden=256, out_features=64), "
    "user_variants={'rewrite': lambda x, w: demo.workload(x, w)})\npanel.widget",
]
# 12,697 timeline events over ~1.07 s: more than the detail threshold (3,000), so the first view is bins
LIVE_TRACE = ROOT / "tests" / "data" / "gpu" / "v100_resnet50_2021.json.gz"
LIVE_CELLS = [
    f"import workbench as wb\nfrom workbench import charts\ntrace = wb.load_trace({str(LIVE_TRACE)!r})",
    "charts.live_timeline(trace, width=900)",
]


def _training_cells() -> list[str]:
    """A GPT-style training step written the ordinary way (tests/magics/test_training_notebook.py's), profiled
    as ``loss = step()``, then a foreach=True rewrite and a doubled loss as ``%%gpuvariant`` cells."""
    from tests.magics.training_cells import FAST, PROFILE, SETUP, VARIANTS

    return [
        SETUP,
        PROFILE,
        VARIANTS,
        f"%%gpuvariant foreach {FAST}\nloss = step_foreach()",
        f"%%gpuvariant doubled {FAST}\nloss = step_foreach() * 2",
    ]


TRAINING_CELLS = _training_cells()


def _fixes_cells() -> list[str]:
    """The same training step profiled, its applicable fixes listed (``run.fixes``), then two of them run
    against the profiled cell with ``%gpuvariant --fix``: issue 24 as a user meets it."""
    from tests.magics.training_cells import FAST, PROFILE, SETUP

    return [SETUP, PROFILE, "_gpuprofile.fixes", f"%gpuvariant --fix sdpa_attention,fused_optimizer {FAST}"]


FIXES_CELLS = _fixes_cells()
# the same step profiled with its trace, then where its time went: by module (forward, backward and the
# optimizer's step per module) and by source line
ATTRIBUTION_CELLS = [
    _fixes_cells()[0],
    "%%gpuprofile -w 1 -r 5\nloss = step()",
    "_gpuprofile.attribution",
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _write_notebook(path: Path, cells: list[str]) -> None:
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "language": "python", "display_name": "Python 3"}
    nb.cells = [nbformat.v4.new_code_cell(c) for c in cells]
    nbformat.write(nb, path)


def _write_root(tmp: Path) -> Path:
    (tmp / "root").mkdir()
    _write_notebook(tmp / "root" / "profile.ipynb", CELLS)
    _write_notebook(tmp / "root" / "live.ipynb", LIVE_CELLS)
    _write_notebook(tmp / "root" / "training.ipynb", TRAINING_CELLS)
    _write_notebook(tmp / "root" / "fixes.ipynb", FIXES_CELLS)
    _write_notebook(tmp / "root" / "attribution.ipynb", ATTRIBUTION_CELLS)
    labconfig = tmp / "config" / "labconfig"
    labconfig.mkdir(parents=True)
    (labconfig / "page_config.json").write_text(json.dumps({"disabledExtensions": DISABLED_PLUGINS}))
    return tmp / "root"


def _wait_ready(url: str, proc: subprocess.Popen, timeout_s: float = 40.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"jupyter-lab exited with {proc.returncode} before serving")
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            time.sleep(0.3)
    raise RuntimeError(f"jupyter-lab did not answer {url} within {timeout_s} s")


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    if not LAB.exists():
        pytest.skip(f"the JupyterLab test needs jupyter-lab next to {sys.executable} (pip install jupyterlab)")
    tmp = tmp_path_factory.mktemp("lab")
    root, port, token = _write_root(tmp), _free_port(), secrets.token_hex(16)
    env = {
        **os.environ,
        "JUPYTER_CONFIG_DIR": str(tmp / "config"),
        "JUPYTER_RUNTIME_DIR": str(tmp / "runtime"),
        "JUPYTERLAB_SETTINGS_DIR": str(tmp / "settings"),
        "JUPYTERLAB_WORKSPACES_DIR": str(tmp / "ws"),
        "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p),
        "OMP_WAIT_POLICY": "PASSIVE",
    }
    args = [
        str(LAB),
        "--allow-root",
        "--no-browser",
        "--ServerApp.open_browser=False",
        "--ServerApp.ip=127.0.0.1",
        f"--ServerApp.port={port}",
        "--ServerApp.port_retries=0",
        f"--IdentityProvider.token={token}",
        f"--ServerApp.root_dir={root}",
        "--LabApp.news_url=",
        "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
        "--LabApp.extension_manager=readonly",
    ]
    log = (tmp / "server.log").open("w")
    proc = subprocess.Popen(args, cwd=root, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        _wait_ready(f"http://127.0.0.1:{port}/api/status?token={token}", proc)
        yield {"base": f"http://127.0.0.1:{port}", "token": token, "log": tmp / "server.log"}
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


class LabVisit:
    """A page where every request not to the lab server is aborted and listed; console errors kept."""

    def __init__(self, browser, base: str):
        self.base, self.external, self.errors = base, [], []
        self.page = browser.new_page(viewport={"width": 1400, "height": 2400})
        self.page.route("**/*", self._route)
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        self.page.on("pageerror", lambda e: self.errors.append(f"pageerror: {e}"))

    def _route(self, route):
        url = route.request.url
        if url.startswith((self.base, "data:", "blob:", "about:")):
            route.continue_()
        else:
            self.external.append(url)
            route.abort()

    def real_errors(self) -> list[str]:
        return [e for e in self.errors if not any(re.search(p, e) for p in IGNORED_CONSOLE)]


NOTEBOOK_READY = """name => {
  const tab = document.querySelector('.lm-DockPanel-tabBar .lm-TabBar-tab.lm-mod-current .lm-TabBar-tabLabel');
  const panel = document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden)');
  const kernel = panel?.querySelector('.jp-Notebook-ExecutionIndicator')?.dataset.status;
  return tab?.textContent === name && kernel === 'idle';
}"""


def _wait_kernel_connected(page, lab: dict, name: str, timeout_s: float = 30.0) -> None:
    """Until the server has a session for notebook ``name`` whose kernel has a client connected.

    Before that the page shows a default "idle" status, and a Run All clicked then is dropped.
    Waits with ``page.wait_for_timeout``: a ``time.sleep`` would stall the page's routed requests."""
    url = f"{lab['base']}/api/sessions?token={lab['token']}"
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with urllib.request.urlopen(url, timeout=5) as r:
            sessions = json.load(r)
        if any(s["path"].endswith(name) and (s.get("kernel") or {}).get("connections", 0) > 0 for s in sessions):
            return
        page.wait_for_timeout(300)
    raise RuntimeError(f"no kernel connected for {name} within {timeout_s} s (server log: {lab['log']})")


def _open_notebook(visit: LabVisit, lab: dict, name: str) -> None:
    page = visit.page
    page.goto(f"{lab['base']}/lab/tree/{name}?token={lab['token']}", wait_until="load", timeout=30000)
    page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=30000)
    _wait_kernel_connected(page, lab, name)
    # the saved workspace may reopen an earlier notebook: wait until this one is current, its kernel idle
    page.wait_for_function(NOTEBOOK_READY, arg=name, timeout=30000)


def _run_all_cells(page) -> None:
    page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(r"^Run$")).click()
    page.get_by_role("menuitem", name=re.compile(r"^Run All Cells")).click()


OUTPUT_READY = """() => {
  const out = document.querySelectorAll('.jp-Cell')[1]?.querySelector('.jp-OutputArea');
  const charts = out ? [...out.querySelectorAll('.workbench-chart')] : [];
  const drawn = charts.filter(c => c.querySelector('svg g[class*=mark] path, svg g[class*=mark] text'));
  return charts.length > 0 && drawn.length === charts.length && !!out.querySelector('.workbench-run table')
    && !!document.querySelector('.jp-OutputArea .widget-button');
}"""
