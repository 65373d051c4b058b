"""Hostile names (NUL and other characters XML cannot hold) never abort a chart export (issue 12)."""

from __future__ import annotations

import subprocess
import sys
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import pandas as pd

from workbench import charts
from workbench.charts.export import xml_safe

BAD = Path(__file__).resolve().parents[1] / "data" / "bad"
NUL_NAME = "aten::mm\x00<evil>\x01\x1f"


def test_xml_safe_replaces_what_xml_cannot_hold_in_keys_and_values():
    spec = {"title": "a\x00b", "data": {"values": [{"name\x0b": "k\x07\ufffe", "n": 3, "t": "tab\tok\n"}]}}
    clean = xml_safe(spec)
    assert clean == {
        "title": "a\ufffdb",
        "data": {"values": [{"name\ufffd": "k\ufffd\ufffd", "n": 3, "t": "tab\tok\n"}]},
    }
    text = "plain name"
    assert xml_safe(text) is text


def test_a_nul_in_a_name_saves_as_svg_and_png(tmp_path):
    chart = charts.top_ops_chart(pd.DataFrame({"name": [NUL_NAME, "aten::add"], "self_us": [3.0, 2.0]}))
    svg = charts.save(chart, tmp_path / "ops.svg").read_text(encoding="utf-8")
    ElementTree.fromstring(svg)  # well-formed XML
    assert "\x00" not in svg and "aten::mm\ufffd" in svg
    assert charts.save(chart, tmp_path / "ops.png").read_bytes()[:4] == b"\x89PNG"


def test_analyze_writes_svg_charts_of_a_trace_with_hostile_names(tmp_path):
    out = tmp_path / "charts"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "workbench.cli",
            "analyze",
            str(BAD / "hostile_names.json"),
            "--charts",
            str(out),
            "--chart-format",
            "svg",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    svgs = sorted(out.glob("*.svg"))
    assert len(svgs) >= 4, proc.stdout[-1000:]
    for svg in svgs:
        ElementTree.parse(svg)
    texts = "".join(p.read_text(encoding="utf-8") for p in svgs)
    assert "aten::mm\ufffd" in texts and "gemm_kernel" in texts
