"""The public Trace (``wb.Trace``, what ``wb.load_trace`` returns): a TraceData with one documented,
typed method per analysis, each delegating to the library and returning what the library returns."""

from __future__ import annotations

import inspect
import json
import re
import warnings
from pathlib import Path

import pytest

import workbench as wb
from workbench import analysis
from workbench.api.trace import Trace
from workbench.trace import TraceData, read_trace

TRACE = Path(__file__).resolve().parent / "data" / "gpu" / "a100_alexnet.json.gz"
ANALYSES = (
    "op_breakdown",
    "kernel_breakdown",
    "temporal_breakdown",
    "idle_breakdown",
    "launch_stats",
    "comm_overlap",
    "copy_stats",
    "sync_audit",
    "stragglers",
    "step_breakdown",
)
# every public method the facade defines (not only the ones listed above: a method added later is
# held to the same standard), and the ones DESIGN.md names
METHODS = tuple(
    sorted(name for name, value in vars(Trace).items() if not name.startswith("_") and inspect.isfunction(value))
)
NAMED_IN_DESIGN = ANALYSES + ("hypotheses", "diagnosis", "save_charts")


def test_the_facade_has_every_named_method() -> None:
    assert set(NAMED_IN_DESIGN) <= set(METHODS)


def test_load_trace_has_named_typed_parameters_and_args_returns() -> None:
    signature = inspect.signature(wb.load_trace)
    assert signature.return_annotation is not inspect.Signature.empty
    assert all(p.annotation is not inspect.Parameter.empty for p in signature.parameters.values())
    doc = inspect.getdoc(wb.load_trace) or ""
    assert "Args:" in doc and "Returns:" in doc
    documented = set(re.findall(r"^    (\w+): ", doc.split("Returns:")[0], re.M))
    assert documented == set(signature.parameters), documented


@pytest.fixture(scope="module")
def trace() -> Trace:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return wb.load_trace(TRACE)


def test_load_trace_returns_the_facade_over_the_trace_packages_tables(trace: Trace) -> None:
    assert wb.Trace is Trace and isinstance(trace, Trace) and isinstance(trace, TraceData)
    assert type(trace.rank(0)) is Trace
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        data = read_trace(TRACE)
    assert type(data) is TraceData and not hasattr(data, "kernel_breakdown")
    assert data.summary() == trace.summary()
    # the analyses are pure functions of the tables: a plain TraceData is enough
    assert analysis.kernel_breakdown(data).to_dict()["total_kernel_us"] == trace.kernel_breakdown().total_kernel_us


@pytest.mark.parametrize("name", METHODS)
def test_every_method_has_named_typed_parameters_a_return_type_and_args_returns(name: str) -> None:
    method = getattr(Trace, name)
    signature = inspect.signature(method)
    params = [p for p in signature.parameters.values() if p.name != "self"]
    assert signature.return_annotation is not inspect.Signature.empty, name
    assert all(p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL) for p in params), name
    assert all(p.annotation is not inspect.Parameter.empty for p in params), name
    doc = inspect.getdoc(method) or ""
    assert doc.split("\n")[0].strip(), name
    assert "Args:" in doc and "Returns:" in doc, name
    documented = set(re.findall(r"^    (\w+): ", doc.split("Returns:")[0], re.M))
    assert documented == {p.name for p in params}, (name, documented)


@pytest.mark.parametrize("name", ANALYSES)
def test_each_analysis_method_is_the_library_function(trace: Trace, name: str) -> None:
    ours, library = getattr(trace, name)(), getattr(analysis, name)(trace)
    assert type(ours) is type(library)
    assert json.dumps(ours.to_dict(), sort_keys=True) == json.dumps(library.to_dict(), sort_keys=True)
    hta = getattr(trace, name)(semantics="hta")
    assert hta.semantics == "hta"


def test_defaults_match_the_library(trace: Trace) -> None:
    for name in ANALYSES:
        ours = inspect.signature(getattr(Trace, name)).parameters
        theirs = inspect.signature(getattr(analysis, name)).parameters
        for param in ours.values():
            if param.name != "self":
                assert param.default == theirs[param.name].default, (name, param.name)


def test_hypotheses_are_the_diagnosis_ranked(trace: Trace) -> None:
    from workbench.hypotheses import diagnose

    assert [h.to_dict() for h in trace.hypotheses()] == [h.to_dict() for h in diagnose(trace).hypotheses]
    assert trace.diagnosis().hypotheses == tuple(trace.hypotheses())


def test_ipython_question_mark_shows_signature_return_type_and_description(trace: Trace) -> None:
    pytest.importorskip("IPython")
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    shell.user_ns["trace"] = trace
    for name in METHODS:
        text = re.sub(r"\x1b\[[0-9;]*m", "", shell.object_inspect_text(f"trace.{name}"))
        signature = text.split("Signature:", 1)[1].split("Docstring:", 1)[0]
        assert f"trace.{name}(" in signature and ") ->" in signature, text
        assert "Args:" in text and "Returns:" in text, text
