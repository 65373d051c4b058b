"""The one display path of the values below the face (issue 23, "render is the only place that
draws"): a Diagnosis, ``run.hypotheses``, ``run.health``, a DecisionRecord, ``run.fixes`` and an
analysis result draw nothing themselves (no ``_repr_html_`` / ``_repr_markdown_`` / ``to_markdown``);
an IPython shell shows them through the formatter registry (``workbench.render.ipython``, by type
name), and what it shows is their ``workbench.render`` rendering. A registration for a base class
(``AnalysisResult``) covers its subclasses, and a subclass with its own renderer keeps it."""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Iterator
from typing import Any, ClassVar

import pandas as pd
import pytest

from workbench import render
from workbench.analysis.result import AnalysisResult
from workbench.capture.health import HealthCheck, ProfileHealth
from workbench.fixes.context import FixContext
from workbench.fixes.fix import Applicability
from workbench.fixes.listing import FixList
from workbench.hypotheses import HypothesisList
from workbench.render.base import DISPLAYED_BY_NAME, PLAIN_TEXT_BY_NAME, RENDERERS
from workbench.render.tables import NOTEBOOK_CSS
from workbench.variants.decision import DecisionRecord

from .conftest import HOSTILE_OP, decision_record, make_diagnosis, make_run

pytest.importorskip("IPython")

MARKUP = '<script>alert("x")</script>'


@dataclasses.dataclass(frozen=True, eq=False)
class Tally(AnalysisResult):
    """An analysis result with no renderer of its own (as a KernelBreakdown has none)."""

    kind: ClassVar[str] = "tally"


def health() -> ProfileHealth:
    return ProfileHealth(
        checks=(
            HealthCheck("machine_load", "warn", f"load 30 on 2 cores {MARKUP}", "profile again on a quiet machine"),
            HealthCheck("omp_wait_policy", "ok", "PASSIVE"),
        )
    )


def fix_list() -> FixList:
    return FixList(
        [
            Applicability("sdpa_attention", "applies", f"attention written by hand {MARKUP}", stake_ms=1.5),
            Applicability("cuda_graph", "not_applicable", "not applicable: no CUDA device"),
        ],
        FixContext(),
    )


def training_record() -> DecisionRecord:
    return dataclasses.replace(
        decision_record(),
        mode="training",
        settings={"gradient_tolerances": {"float32": {"rtol": 1e-4, "atol": 1e-5}}, "checks": 2},
    )


def values() -> dict[str, Any]:
    diagnosis = make_diagnosis()
    return {
        "Diagnosis": diagnosis,
        "HypothesisList": HypothesisList.from_diagnosis(diagnosis),
        "ProfileHealth": health(),
        "DecisionRecord": decision_record(),
        "FixList": fix_list(),
        "AnalysisResult": Tally(pd.DataFrame({"name": [HOSTILE_OP, "b"], "n": [2, 1]})),
    }


@pytest.fixture(scope="module")
def shell() -> Iterator[Any]:
    """The suite's one test shell (``start_ipython``, as tests/magics/conftest.py starts it), with the
    registry's formatters; its HTML formatter, off in a terminal shell, turned on while these run."""
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.testing.globalipapp import start_ipython

    from workbench.render.ipython import register_display_formatters

    sh = start_ipython() or InteractiveShell.instance()
    register_display_formatters(sh)
    html_formatter = sh.display_formatter.formatters["text/html"]
    enabled = html_formatter.enabled
    html_formatter.enabled = True
    yield sh
    html_formatter.enabled = enabled


@pytest.mark.parametrize("name", list(values()))
def test_the_value_draws_nothing_itself(name):
    value = values()[name]
    for method in ("_repr_html_", "_repr_markdown_", "to_markdown"):
        if name == "DecisionRecord" and method == "to_markdown":
            continue  # face shim for workbench/study/rounds.py (see DecisionRecord.to_markdown)
        assert not hasattr(value, method), f"{name}.{method}"


@pytest.mark.parametrize("name", list(values()))
def test_the_shell_displays_the_render_html_through_the_registry(shell, name):
    value = values()[name]
    data, _ = shell.display_formatter.format(value)
    # the rendering, after the one table style a notebook needs (its own stylesheet right-aligns text)
    assert data.get("text/html") == NOTEBOOK_CSS + render.html(value), name
    assert "<script>" not in data["text/html"], name


def test_what_each_shows(shell):
    shown = {name: shell.display_formatter.format(value)[0] for name, value in values().items()}
    for name in ("Diagnosis", "HypothesisList"):
        assert "wb-diagnosis" in shown[name]["text/html"] and "Next experiment" in shown[name]["text/html"]
    page = shown["ProfileHealth"]["text/html"]
    assert "CAUTION (machine load)" in page and "what to do:" in page and "ok: omp wait policy" in page
    assert shown["ProfileHealth"]["text/plain"] == render.text(health())  # not the nested dataclass repr
    assert "ProfileHealth(" not in shown["ProfileHealth"]["text/plain"]
    assert "Decision record: <code>keep</code>" in shown["DecisionRecord"]["text/html"]
    page = shown["FixList"]["text/html"]
    assert "<td>sdpa_attention</td>" in page and "(cannot run here)" in page and "no CUDA device" in page
    page = shown["AnalysisResult"]["text/html"]
    assert "<b>Tally</b>" in page and "&lt;script&gt;" in page


def test_a_subclass_with_its_own_renderer_keeps_it(shell, attributed_run):
    modules = attributed_run.attribution.modules  # a ModuleBreakdown: an AnalysisResult with its renderer
    page = shell.display_formatter.format(modules)[0]["text/html"]
    assert "Time by nn.Module" in page and "<b>ModuleBreakdown</b>" not in page
    assert page == render.notebook_html(modules) == NOTEBOOK_CSS + render.html(modules)


def test_the_one_decision_rendering_states_the_gradient_tolerances():
    record = training_record()
    for out in (render.html(record), render.text(record), render.markdown(record)):
        assert "gradient tolerances: float32 rtol 0.0001 atol 1e-05" in out
    md = render.markdown(record)
    assert "#### Gradient checks" in md and "#### Settings" in md and "- checks: 2" in md
    assert "gradient\\_tolerances" not in md  # stated once, under the gradient checks


def test_a_fix_record_names_the_fix_and_its_tolerance_in_every_format():
    record = dataclasses.replace(
        decision_record(),
        fix={
            "name": "sdpa_attention",
            "changes": "F.scaled_dot_product_attention",
            "where": "blocks.0.attn",
            "tolerance": "outputs judged with float32 rtol 0.0001, atol 1e-05",
            "reduced_precision": True,
        },
    )
    assert "**Fix:** `sdpa_attention` (F.scaled\\_dot\\_product\\_attention), applied at blocks.0.attn" in (
        render.markdown(record)
    )
    assert "<code>sdpa_attention</code> (F.scaled_dot_product_attention), applied at blocks.0.attn" in (
        render.html(record)
    )
    for out in (render.html(record), render.text(record), render.markdown(record)):
        assert "computes in reduced precision" in out and "float32 rtol 0.0001, atol 1e-05" in out


def test_health_fixes_and_analysis_results_in_three_formats():
    h, fixes, tally = health(), fix_list(), values()["AnalysisResult"]
    assert render.text(h) == h.to_text()
    assert render.markdown(h).startswith("**profile health: CAUTION") and "\\<script\\>" in render.markdown(h)
    assert render.text(fixes) == fixes.to_text()
    md = render.markdown(fixes)
    assert md.startswith("| fix | applies at | why |") and "\\<script\\>" in md and "<script>" not in md
    assert "No fix applies" in render.markdown(FixList([], FixContext()))
    assert render.text(tally).startswith("Tally (2 rows)") and HOSTILE_OP in render.text(tally)
    assert render.markdown(tally).startswith("**Tally**") and "| name | n |" in render.markdown(tally)


def test_every_registered_name_is_a_type_at_that_address():
    """RENDERERS and the display tables name each type by (module, class name): each is importable
    there (a moved class, like HypothesisList to workbench.hypotheses.ranked, moves its entry)."""
    for module, name in set(RENDERERS) | set(DISPLAYED_BY_NAME) | set(PLAIN_TEXT_BY_NAME):
        cls = getattr(importlib.import_module(module), name)
        assert (cls.__module__, cls.__qualname__) == (module, name)
        assert (module, name) in RENDERERS, (module, name)


def test_the_run_card_shows_the_health_rendering(hostile_trace_path):
    run = make_run(hostile_trace_path)
    assert render.html(run.health) in render.html(run, charts=False)
