"""``%gpuprofile`` (line form) and ``--explain``, through a real IPython shell."""

from __future__ import annotations

import pytest
import torch
from IPython.core.error import UsageError

import workbench.magics as magics
from workbench.magics import gpuprofile
from workbench.magics.line_form import split_options

SETUP = (
    "import torch\n"
    "x = torch.randn(64, 64)\n"
    "def scaled(t, s):\n    return (t @ t) * s\n"
    "def with_break(t):\n    y = t.sin() * 2\n    torch._dynamo.graph_break()\n    return y.cos() + 1\n"
)


@pytest.fixture(autouse=True)
def setup_namespace(run_cell):
    assert run_cell(SETUP).success


def test_line_form_profiles_the_expression_with_the_shared_options(ip, run_cell):
    result = run_cell("%gpuprofile -w 1 -r 3 -o lined scaled(x, -1)")
    assert result.success, result.error_in_exec
    run = ip.user_ns["lined"]
    assert run is magics.last_run() and run.timing.n == 3 and run.warmup == 1
    assert (run.trace.cpu_ops["name"] == "aten::mm").sum() == run.traced_calls  # "-1" was code, not an option
    assert gpuprofile.last_cell_source() == "scaled(x, -1)"


@pytest.mark.parametrize(
    "line,fragment",
    [
        ("%gpuprofile -r 3", "needs code after the options"),
        ("%gpuprofile -r 0 scaled(x, 1)", "-r/--repeat must be >= 1"),
        ("%gpuprofile --explain x + 1", "one call"),
        ("%%gpuprofile --explain\nscaled(x, 1)", "line form"),
    ],
)
def test_line_form_usage_errors(run_cell, line, fragment):
    result = run_cell(line)
    assert isinstance(result.error_in_exec, UsageError), result.error_in_exec
    assert fragment in str(result.error_in_exec)


def test_split_keeps_code_verbatim():
    parser = magics.gpuprofile.GpuProfileMagics.gpuprofile.parser
    assert split_options(parser, "-r 10 -T f(x, -r)") == ("-r 10 -T", "f(x, -r)")
    assert split_options(parser, "--repeat=5 --no-grad g( a ,  b )") == ("--repeat=5 --no-grad", "g( a ,  b )")
    assert split_options(parser, "-n my-run h(x)") == ("-n my-run", "h(x)")


def test_explain_counts_graphs_and_names_the_break(ip, run_cell, capsys):
    result = run_cell("%gpuprofile -T -w 0 -r 2 -q --explain with_break(x)")
    assert result.success, result.error_in_exec
    explained = ip.user_ns["_gpuprofile_explain"]
    assert explained.graph_count == 2 and explained.graph_break_count == 1
    assert explained.break_reasons and "graph_break" in " ".join(explained.break_reasons).lower()
    assert "2 graph(s), 1 graph break(s)" in capsys.readouterr().out
    assert type(explained).from_dict(explained.to_dict()) == explained
    smooth = run_cell("%gpuprofile -T -w 0 -r 2 -q --explain scaled(x, 2.0)")
    assert smooth.success and ip.user_ns["_gpuprofile_explain"].graph_break_count == 0


def test_explain_unwraps_a_compiled_function():
    from workbench.magics.explain import _unwrap

    def f(t):
        return t + 1

    assert _unwrap(torch.compile(f)) is f  # torch.compile is lazy: nothing compiles here
    assert _unwrap(f) is f


def test_the_docstring_lists_the_options():
    doc = magics.gpuprofile.GpuProfileMagics.gpuprofile.__doc__
    for option in (
        "--warmup",
        "--repeat",
        "--no-trace",
        "--name",
        "--output",
        "--threads",
        "--no-grad",
        "--quiet",
        "--explain",
        "%gpuprofile -r 10 f(x)",
    ):
        assert option in doc, option


def test_explain_refuses_a_non_call_before_profiling(ip, run_cell):
    kept = magics.last_run()
    ip.user_ns["calls"] = 0
    result = run_cell("%gpuprofile --explain calls += 1")
    assert isinstance(result.error_in_exec, UsageError)
    assert ip.user_ns["calls"] == 0 and magics.last_run() is kept  # nothing ran, nothing kept
