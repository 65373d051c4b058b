"""Headless Debian chromium through playwright; every test here skips, with the reason, without it."""

import os
from pathlib import Path

import pytest

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
LOCAL_SCHEMES = ("file:", "data:", "about:", "blob:")
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"


@pytest.fixture(scope="session")
def browser():
    if not os.access(CHROMIUM, os.X_OK):
        pytest.skip(f"browser tests need Debian's chromium at {CHROMIUM} (make browser installs it)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip("browser tests need the playwright package (pip install playwright)")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield b
        b.close()


class PageVisit:
    """Opens a local page with every non-local request aborted and counted, console errors kept."""

    def __init__(self, browser):
        self.page = browser.new_page(viewport={"width": 1280, "height": 900})
        self.external: list[str] = []
        self.errors: list[str] = []
        self.page.route("**/*", self._route)
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))

    def _route(self, route):
        url = route.request.url
        if url.startswith(LOCAL_SCHEMES):
            route.continue_()
        else:
            self.external.append(url)
            route.abort()

    def open(self, path: Path, timeout_ms: int = 60000) -> None:
        self.page.goto(path.resolve().as_uri(), wait_until="load", timeout=timeout_ms)
        self.page.wait_for_function(
            "() => { const d = [...document.querySelectorAll('.workbench-chart')];"
            " return d.length > 0 && d.every(c => c.querySelector('svg, canvas') || c.textContent.length); }",
            timeout=timeout_ms,
        )

    def marks_per_chart(self) -> list[int]:
        return self.page.evaluate(
            "() => [...document.querySelectorAll('.workbench-chart')].map(c =>"
            " c.querySelectorAll('svg g[class*=mark] path, svg g[class*=mark] line, svg g[class*=mark] text').length)"
        )

    def screenshot(self, name: str) -> Path:
        ARTIFACTS.mkdir(exist_ok=True)
        path = ARTIFACTS / name
        self.page.screenshot(path=str(path), full_page=True)
        return path


@pytest.fixture
def visit(browser):
    v = PageVisit(browser)
    yield v
    v.page.close()
