"""A real JupyterLab, driven by headless chromium: `%%gpuprofile` on the demo shows its charts,
the run's tables and the variant widgets, with no request leaving 127.0.0.1 and no console error.

The server runs from this interpreter on 127.0.0.1, a free port and a random token, in a temp
root holding one small notebook; its config dir disables the network features (news,
update check, extension manager listing from PyPI). A screenshot is kept in test-artifacts/.
"""
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

pytestmark = [pytest.mark.browser, pytest.mark.slow]

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


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _write_root(tmp: Path) -> Path:
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "language": "python", "display_name": "Python 3"}
    nb.cells = [nbformat.v4.new_code_cell(c) for c in CELLS]
    (tmp / "root").mkdir()
    nbformat.write(nb, tmp / "root" / "profile.ipynb")
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
    env = {**os.environ, "JUPYTER_CONFIG_DIR": str(tmp / "config"), "JUPYTER_RUNTIME_DIR": str(tmp / "runtime"),
           "JUPYTERLAB_SETTINGS_DIR": str(tmp / "settings"), "JUPYTERLAB_WORKSPACES_DIR": str(tmp / "ws"),
           "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p),
           "OMP_WAIT_POLICY": "PASSIVE"}
    args = [str(LAB), "--allow-root", "--no-browser", "--ServerApp.open_browser=False",
            "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={port}", "--ServerApp.port_retries=0",
            f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root}",
            "--LabApp.news_url=", "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
            "--LabApp.extension_manager=readonly"]
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


def test_gpuprofile_in_jupyterlab_shows_charts_tables_and_widgets(browser, lab):
    visit = LabVisit(browser, lab["base"])
    page = visit.page
    page.goto(f"{lab['base']}/lab/tree/profile.ipynb?token={lab['token']}", wait_until="load", timeout=30000)
    page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=30000)
    page.wait_for_function("() => /Idle/.test(document.querySelector('#jp-main-statusbar')?.textContent || '')",
                           timeout=30000)
    try:
        _run_all_cells(page)
        page.wait_for_function(OUTPUT_READY, timeout=60000, polling=500)
    finally:
        shot = ARTIFACTS / "jupyterlab_gpuprofile.png"
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(shot), full_page=True)
    run_output = page.locator(".jp-Cell").nth(1).locator(".jp-OutputArea")
    titles = run_output.locator(".workbench-chart svg").evaluate_all(
        "els => els.map(e => e.getAttribute('aria-label') || e.textContent.slice(0, 80))")
    marks = run_output.locator(".workbench-chart svg g[class*=mark] path").count()
    assert len(titles) >= 4 and marks > 20, (titles, marks)
    assert "aten::mm" in run_output.locator(".workbench-run").inner_text()
    texts = run_output.locator(".workbench-chart").evaluate_all("els => els.map(e => e.textContent)")
    assert any("Roofline" in t for t in texts) and any("Timeline" in t for t in texts), texts
    assert page.locator(".jp-OutputArea .widget-checkbox").count() >= 1
    assert visit.external == [], visit.external
    assert visit.real_errors() == [], visit.errors
    assert shot.stat().st_size > 20_000
    page.close()
