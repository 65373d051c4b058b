"""``%gpustudy`` in a real IPython shell: a round run from a line (variants evaluated in the
notebook's namespace), the round displayed as HTML, accept, the study shown, and bad lines refused.
Profiles are recorded and timing runs on a seeded fake clock (tests/study/conftest.py)."""

from __future__ import annotations

import pytest
from IPython.core.error import UsageError

from tests.study.conftest import hypothesis
from workbench.study import Study
from workbench.variants.clock import FakeTimer


@pytest.fixture
def shell():
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.testing.globalipapp import start_ipython
    from traitlets.config.configurable import MultipleInstanceError

    try:
        ip = start_ipython() or InteractiveShell.instance()
    except MultipleInstanceError:  # another test module already made the plain shell
        ip = InteractiveShell.instance()
    result = ip.run_cell("%load_ext workbench")
    assert result.success, result.error_in_exec
    return ip


def test_a_round_accept_and_the_study_from_the_gpustudy_line(shell, lab, workload_module, tmp_path):
    mod = workload_module
    lab.hypotheses["base"] = [hypothesis("memory_bound", suggested=("fused",))]
    study = Study("chain", folder=tmp_path / "s")
    base = study.set_baseline(mod.base, mod.make_inputs)
    shell.user_ns.update(
        study=study, mod=mod, timer=FakeTimer({"baseline": 2.0, "fused": 1.0}, noise=0.02, seed=0, call=False)
    )
    result = shell.run_cell(
        "%gpustudy study fused=mod.fused wrong=mod.wrong -c 1 -o rnd "
        '-O "dict(timer=timer, profile=False, budget_s=0.5, min_rounds=10)"'
    )
    assert result.success, result.error_in_exec
    rnd = shell.user_ns["rnd"]
    assert rnd is shell.user_ns["_gpustudy"] is result.result
    assert {k: v.decision for k, v in rnd.decisions.items()} == {"fused": "keep", "wrong": "reject"}
    html = shell.display_formatter.formatters["text/html"].lookup(rnd)(rnd)  # (the test shell's HTML is off)
    assert "Round 1 against baseline" in html
    accepted = shell.run_cell("%gpustudy study --accept fused")
    assert accepted.success, accepted.error_in_exec
    assert accepted.result.parent_id == base.baseline_id and study.baseline is accepted.result
    # shown through the study's renderer, not a dataclass repr several screens long
    shown, _ = shell.display_formatter.format(accepted.result)
    assert "Baseline(" not in shown["text/plain"] and "accepted fused from round 1" in shown["text/plain"]
    assert len(shown["text/plain"].splitlines()) < 15
    page = shell.display_formatter.formatters["text/html"].lookup(accepted.result)(accepted.result)
    assert accepted.result.baseline_id in page and "accepted fused from round 1" in page and "Baseline(" not in page
    shown = shell.run_cell("%gpustudy study")
    assert shown.result is study
    assert accepted.result.baseline_id in shell.display_formatter.formatters["text/html"].lookup(study)(study)


def test_bad_gpustudy_lines_are_refused_with_what_to_do(shell, lab, workload_module, tmp_path):
    shell.user_ns["not_a_study"] = 3
    with pytest.raises(UsageError, match="not a wb.Study"):
        shell.run_line_magic("gpustudy", "not_a_study f=g")
    study = Study("chain", folder=tmp_path / "s")
    shell.user_ns["study"] = study
    with pytest.raises(UsageError, match="NAME=EXPR"):
        shell.run_line_magic("gpustudy", "study justaname")
    with pytest.raises(UsageError, match="could not be evaluated"):
        shell.run_line_magic("gpustudy", "study f=missing_name")
    with pytest.raises(UsageError, match="must give a dict"):
        shell.run_line_magic("gpustudy", "study f=len -O 3")
