"""The catalog of fixes where the notebook meets it: ``run.fixes`` on a ``%%gpuprofile`` cell,
``%gpuvariant --fix``, the variant panel's fix list, the decision record of a fix and a study round
whose candidates are ``run.fixes``.

Two fixes of the tests' own are registered for the module (never compiled: their transform hands
back the code as it is): ``nb_same`` (exact, applies to any code) and ``nb_half`` (declared reduced
precision), and one that never applies here (``nb_absent``, with its reason).  The built-in
``compiled`` is only recognised (on a training step whose AdamW steps 30 tensors one at a time),
never run.  Timing that decides nothing here runs on tiny budgets; where a decision is read, on
the seeded FakeTimer.
"""

from __future__ import annotations

import json
import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("ipywidgets")

from IPython.core.error import UsageError  # noqa: E402

import workbench as wb  # noqa: E402
import workbench.fixes as fixes  # noqa: E402
from tests.study.conftest import FAKE, _timer, hypothesis, lab, workload_module  # noqa: E402,F401
from workbench.variants.clock import FakeTimer  # noqa: E402
from workbench.variants.decision import DecisionRecord  # noqa: E402
from workbench.variants.spec import Variant  # noqa: E402

NAMES = ("nb_same", "nb_half", "nb_absent")
ABSENT_WHY = "needs a widget this machine lacks"
SETUP = """
import torch
torch.manual_seed(0)
model = torch.nn.Sequential(*[torch.nn.Linear(8, 8) for _ in range(15)])  # 30 parameter tensors
opt = torch.optim.AdamW(model.parameters(), lr=1e-3, foreach=False)  # one tensor at a time
x = torch.randn(4, 8)
def step():
    opt.zero_grad(set_to_none=True)
    loss = model(x).square().mean()
    loss.backward()
    opt.step()
    return loss.detach()
"""


def _as_is(fn, context, name):
    return Variant(name=name, fn=fn, kind="user")


@pytest.fixture(scope="module", autouse=True)
def test_fixes():
    registered = [
        fixes.Fix(
            name="nb_same",
            changes="the code as it is (a test fix)",
            kind="user",
            numerical_class="exact",
            transform=_as_is,
            mechanisms=("cpu_memory_bound_ops",),
            recognise=lambda ctx: fixes.applies("nb_same", "found everywhere", [fixes.Site("the cell", "callable")]),
        ),
        fixes.Fix(
            name="nb_half",
            changes="the code as it is, declared reduced precision (a test fix)",
            kind="user",
            numerical_class="reduced precision",
            transform=_as_is,
            recognise=lambda ctx: fixes.applies("nb_half", "found everywhere", [fixes.Site("model.0", "module")]),
        ),
        fixes.Fix(
            name="nb_absent",
            changes="nothing that can run here",
            kind="user",
            numerical_class="exact",
            transform=_as_is,
            recognise=lambda ctx: fixes.not_applicable("nb_absent", ABSENT_WHY),
        ),
    ]
    for fix in registered:
        fixes.register(fix, replace=True)
    yield
    for name in NAMES:
        fixes.unregister(name)


@pytest.fixture(scope="module")
def shell(test_fixes):
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.testing.globalipapp import start_ipython

    saved = torch.get_num_threads()
    torch.set_num_threads(1)
    # the suite's one shell (as tests/magics/conftest.py starts it): a plain InteractiveShell made first
    # would make start_ipython's TerminalInteractiveShell an incompatible sibling in later modules
    sh = start_ipython() or InteractiveShell.instance()
    sh.run_cell("%load_ext workbench", store_history=True).raise_error()
    sh.run_cell(SETUP, store_history=True).raise_error()
    yield sh
    torch.set_num_threads(saved)


@pytest.fixture(scope="module")
def profiled(shell):
    """The training-step cell profiled with a trace (its hypotheses name ``compiled``)."""
    from workbench.magics import last_run

    shell.run_cell("%%gpuprofile -w 1 -r 5 --trace-repeat 2 -q\nloss = step()", store_history=True).raise_error()
    return last_run()


# -- %%gpuprofile: run.code and run.fixes ---------------------------------------------------------
def test_a_profiled_cell_keeps_its_code_and_lists_its_fixes(shell, profiled):
    from workbench.magics.cell import CellCallable

    run = profiled
    assert isinstance(run.code, CellCallable) and run.code_args == ((), {})
    before = shell.user_ns["loss"]
    run.code()  # the cell itself, run again in the namespace (outside the magic: nothing silenced)
    assert shell.user_ns["loss"] is not before
    found = {r.fix: r for r in run.fixes}
    assert "compiled" in run.fixes.names  # the per-tensor AdamW and the dispatch-bound step name it
    assert "optimizer step" in found["compiled"].where and found["compiled"].stake_ms > 0
    assert found["nb_same"].applies and found["nb_same"].where == "the cell"
    assert not found["nb_absent"].applies and ABSENT_WHY in found["nb_absent"].reason
    if not torch.cuda.is_available():
        assert "cuda" in found["cuda_graph"].reason


# -- %gpuvariant --fix --------------------------------------------------------------------------------
def test_gpuvariant_fix_runs_the_named_fixes_on_the_profiled_cell(shell, profiled):
    shell.run_cell("%gpuvariant --fix nb_same,nb_absent -b 0.2 -c 1 -o fixed", store_history=True).raise_error()
    cmp = shell.user_ns["_gpuvariant"]
    assert shell.user_ns["fixed"] is cmp and cmp.baseline == "profiled"
    assert [r.name for r in cmp.results] == ["profiled", "nb_same", "nb_absent"]
    same, absent = cmp["nb_same"], cmp["nb_absent"]
    assert same.status == "ok" and same.correctness.passed  # the profiled cell's code, checked as a training step
    assert cmp.settings["mode"] == "training"
    assert absent.status == "not_applicable" and ABSENT_WHY in absent.reason  # its reason in its row ...
    row = cmp.table.set_index("variant").loc["nb_absent"]
    assert ABSENT_WHY in row["reason"]  # ... the rest intact
    assert cmp.settings["fixes"]["nb_same"]["where"] == "the cell"
    assert any("catalog fixes applied to the profiled cell's code" in n for n in cmp.settings["notes"])
    assert cmp.decision.fix["name"] in ("nb_same", "nb_absent")
    assert "**Fix:**" in wb.render.markdown(cmp.decision)


def test_gpuvariant_fix_beside_a_rewrite_and_on_the_cell_given(shell, profiled):
    shell.run_cell(
        "%%gpuvariant mine --fix nb_same -b 0.2 -c 1\nloss = step()", store_history=True
    ).raise_error()  # a rewrite of yours and a fix in one comparison
    cmp = shell.user_ns["_gpuvariant"]
    assert [r.name for r in cmp.results] == ["profiled", "mine", "nb_same"]
    assert "fixes" in cmp.settings and "mine" not in cmp.settings["fixes"]
    # a cell of comments only: the fixes run on the profiled cell's code
    shell.run_cell("%%gpuvariant --fix nb_same -b 0.2 -c 1\n# the profiled cell", store_history=True).raise_error()
    assert shell.user_ns["_gpuvariant"].baseline == "profiled"
    # code in the cell and no name: the fixes run on that code, its baseline the cell as written
    had_w, old_w = "w" in shell.user_ns, shell.user_ns.get("w")  # (another module may have bound w in this shell)
    shell.run_cell("%%gpuvariant --fix nb_same -b 0.2 -c 1\nw = x.sin() * 2", store_history=True).raise_error()
    cmp = shell.user_ns["_gpuvariant"]
    assert cmp.baseline == "eager" and cmp["nb_same"].correctness.passed
    assert any("this cell's code" in n for n in cmp.settings["notes"])
    # the names the cells bind were given back as they were (unbound, or the same object)
    assert ("w" in shell.user_ns) == had_w and shell.user_ns.get("w") is old_w


def test_gpuvariant_fix_refuses_what_it_cannot_run_and_says_what_can(shell, profiled):
    from workbench.magics.variant import GpuVariantMagics

    magic = GpuVariantMagics(shell=shell)
    with pytest.raises(UsageError, match="unknown fix 'nope'") as info:
        magic.gpuvariant("--fix nb_same,nope", "")
    text = str(info.value)
    assert "apply to the profiled run are" in text and "compiled" in text and "nb_same" in text
    assert "the catalog has" in text and "cuda_graph" in text and "nb_absent" in text
    with pytest.raises(UsageError, match="the baseline"):
        magic.gpuvariant("--fix eager", "")
    with pytest.raises(UsageError, match="names a fix"):
        magic.gpuvariant("nb_same --fix nb_same", "loss = step()")
    with pytest.raises(UsageError, match="needs a name"):
        magic.gpuvariant("-b 1", "loss = step()")
    with pytest.raises(UsageError, match="needs the variant's code"):
        magic.gpuvariant("mine --fix nb_same", "   ")
    with pytest.raises(UsageError, match="commas"):
        magic.gpuvariant("--fix nb_same,,compiled", "")


# -- the variant panel ----------------------------------------------------------------------------
def test_the_panel_lists_the_runs_fixes_and_runs_a_chosen_subset(shell, profiled):
    from workbench.widgets import VariantPanel

    step = shell.user_ns["step"]
    timer = FakeTimer({"eager": 2.0, "nb_same": 1.0, "nb_half": 1.0}, seed=0, call=False)
    panel = VariantPanel(
        step, None, run=profiled, shell=shell, compare_options=dict(checks=1, budget_s=0.2, min_rounds=5, timer=timer)
    )
    for name in ("compiled", "nb_same", "nb_half", "nb_absent"):
        assert name in panel.checkboxes and name in panel.fix_notes, name
    # those that apply: checked, where and why beside the box
    assert panel.checkboxes["compiled"].value and not panel.checkboxes["compiled"].disabled
    assert "optimizer step" in panel.fix_notes["compiled"].value and "ms at stake" in panel.fix_notes["compiled"].value
    assert "the cell" in panel.fix_notes["nb_same"].value and "found everywhere" in panel.fix_notes["nb_same"].value
    # those that do not: greyed, disabled, with the reason
    absent = panel.checkboxes["nb_absent"]
    assert absent.disabled and not absent.value and ABSENT_WHY in absent.description
    assert "color:#888" in panel.fix_notes["nb_absent"].value and ABSENT_WHY in panel.fix_notes["nb_absent"].value
    if not torch.cuda.is_available():
        assert panel.checkboxes["cuda_graph"].disabled
    assert set(panel.fix_names()) >= {"compiled", "nb_same", "nb_half"} and "nb_absent" not in panel.fix_names()
    assert panel.candidates["nb_same"].options["fix_where"] == "the cell"  # built as run.fixes builds it
    with pytest.raises(Exception, match="cannot select"):
        panel.select(["nb_absent"])
    panel.select(["nb_same", "nb_half"])  # a subset, in one click
    assert panel.selected() == ["nb_same", "nb_half"]
    panel.run_button.click()
    assert set(panel.rows) == {"eager", "nb_same", "nb_half"}
    assert panel.rows["nb_same"]["decision"] == "keep", panel.rows["nb_same"]
    record = panel.decisions["nb_same"]
    assert record.fix["name"] == "nb_same" and record.fix["where"] == "the cell"
    assert "nb_same" in panel.records.value and "the fix `nb_same`" in panel.records.value
    half = panel.decisions["nb_half"]
    assert half.fix["reduced_precision"] and half.numerical_class == "reduced precision"
    assert panel.winner() in ("nb_same", "nb_half")
    assert f"wb.variants.build({panel.winner()!r}, step)" in panel.winner_code()
    ns = {"wb": wb, "step": panel.fn}  # the inserted winner cell runs
    exec(panel.winner_code(), ns)
    assert ns["step_fast"]() is not None


def test_a_panel_without_a_run_keeps_its_candidates():
    from types import SimpleNamespace

    from workbench.widgets import VariantPanel

    run = SimpleNamespace(timing=SimpleNamespace(median_ms=None), hypotheses=[])  # no run.fixes
    panel = VariantPanel(lambda t: t * 2, lambda: (torch.randn(8),), run=run, user_variants={"mine": lambda t: t + t})
    assert list(panel.checkboxes) == ["mine"] and panel.fix_notes == {} and panel.fixes is None
    listed = fixes.for_callable(lambda t: t * 2)  # or fixes= given by hand
    panel = VariantPanel(lambda t: t * 2, lambda: (torch.randn(8),), fixes=listed, user_variants={"mine": lambda t: t})
    assert list(panel.checkboxes)[-1] == "mine" and {"nb_same", "nb_absent"} <= set(panel.fix_notes)


# -- the decision record of a fix ----------------------------------------------------------------
def _chain(x):
    return (x.sin() * 2 + 1).relu()


def test_the_record_names_the_fix_where_and_its_class_with_the_tolerance():
    import workbench as wb
    from workbench import render

    listed = fixes.for_callable(_chain)
    variants = listed.variants(["nb_same", "nb_half"])
    assert variants["nb_same"].options["fix_where"] == "the cell" and variants["eager"] is _chain
    cmp = wb.compare(
        variants,
        inputs=lambda: (torch.randn(256),),
        timer=FakeTimer({"eager": 2.0, "nb_same": 1.0, "nb_half": 1.5}, seed=0, call=False),
        checks=1,
        budget_s=0.2,
        min_rounds=5,
        profile=False,
    )
    record = cmp.decision
    assert record.variant == "nb_same" and record.decision == "keep"
    assert record.fix["name"] == "nb_same" and record.fix["where"] == "the cell"
    assert record.fix["numerical_class"] == record.numerical_class == cmp["nb_same"].numerical_class
    assert record.fix["tolerances"]["outputs"]["float32"] == {"rtol": 1e-4, "atol": 1e-5}
    assert "the fix `nb_same`" in record.change and "applied at the cell" in record.change
    md = render.markdown(record)
    assert "**Fix:** `nb_same` (the code as it is (a test fix)), applied at the cell" in md
    assert "outputs judged with float32 rtol 0.0001, atol 1e-05" in md
    again = DecisionRecord.from_dict(json.loads(record.to_json()))
    assert again == record and again.fix["where"] == "the cell"
    # the reduced-precision fix says so, with the tolerance it was judged with
    from workbench.variants.record_builder import build_record

    half = build_record([cmp["eager"], cmp["nb_half"]], "eager", settings=dict(cmp.settings))
    assert half.fix["name"] == "nb_half" and half.fix["reduced_precision"]
    assert half.numerical_class == "reduced precision" and half.fix["where"] == "model.0"
    assert "reduced precision" in render.markdown(half) and "float32 rtol" in render.markdown(half)
    assert any("the fix `nb_half` computes in reduced precision" in r for r in half.remaining_risk)
    assert json.loads(half.to_json())["fix"]["reduced_precision"] is True
    # the comparison table and every face name the rows by their fix
    assert list(cmp.table["variant"]) == ["eager", "nb_same", "nb_half"]
    assert "| nb\\_same |" in render.markdown(cmp) and "<td>nb_half</td>" in render.html(cmp)
    assert "the fix `nb_same`" in render.html(cmp) and "applied at the cell" in render.text(record)
    # a plain variant's record carries no fix
    plain = wb.compare(
        {"eager": _chain, "mine": lambda x: _chain(x)},
        inputs=lambda: (torch.randn(64),),
        timer=FakeTimer({"eager": 2.0, "mine": 1.0}, seed=0, call=False),
        checks=1,
        budget_s=0.2,
        min_rounds=5,
        profile=False,
    )
    assert (
        plain.decision.fix == {} and "fixes" not in plain.settings and "**Fix:**" not in render.markdown(plain.decision)
    )


# -- a study round on run.fixes ----------------------------------------------------------------------
def test_a_study_round_takes_run_fixes_as_its_candidates(lab, workload_module, tmp_path):  # noqa: F811
    from workbench.study import Study

    mod = workload_module
    lab.hypotheses["base"] = [hypothesis("memory_bound", rule="cpu_memory_bound_ops", suggested=())]
    study = Study("fixes", folder=tmp_path / "study")
    study.set_baseline(mod.base, mod.make_inputs, seed=7)
    from workbench.fixes import FixList

    found = fixes.for_callable(mod.base)  # only the tests' fixes: the catalog grows, the fake clock does not
    listed = FixList([r for r in found.rows if r.fix in NAMES], found.context)
    rnd = study.run_round(candidates=listed, timer=_timer(nb_same=1.0, nb_half=2.0), **FAKE)
    assert set(rnd.decisions) == set(listed.names) >= {"nb_same", "nb_half"}  # each fix that applies
    assert "nb_absent" not in rnd.decisions
    assert rnd.decisions["nb_same"].decision == "keep" and rnd.decisions["nb_same"].fix["where"] == "the cell"
    info = {v["name"]: v for v in rnd.summary.variants}
    assert info["nb_same"]["fix"] == info["nb_same"]["registry"] == "nb_same"  # a later round rebuilds it
    assert info["nb_same"]["where"] == "the cell"
    # the fix tests the hypothesis whose rule it names
    assert [p["key"].split(":")[0] for p in rnd.summary.hypotheses] == ["memory_bound"]
    assert "nb_same" in rnd.summary.hypotheses[0]["variants"]
    # reopened in a "fresh process": the round reads back, and the kept fix is rebuilt from its name
    again = Study.open(study.folder)
    [back] = again.rounds
    assert back.decisions["nb_same"].fix == rnd.decisions["nb_same"].fix
    assert again._rebuild_variant(back, "nb_same") == "nb_same"
    new = again.accept("nb_same")
    assert new.accepted_from["variant"] == "nb_same" and new.variant["fix"] == "nb_same"
    # run.fixes given as the variants themselves; a list where nothing applies is refused
    rnd2 = again.run_round(listed, timer=_timer(nb_same=1.0, nb_half=1.0), **FAKE)
    assert set(rnd2.decisions) >= {"nb_same", "nb_half"}
    from workbench.errors import InvalidArgumentError

    nothing = FixList([r for r in listed.rows if not r.applies], listed.context)
    with pytest.raises(InvalidArgumentError, match="no fix of these candidates applies.*nb_absent"):
        again.run_round(candidates=nothing, **FAKE)
    with pytest.raises(InvalidArgumentError, match="candidates= takes"):
        again.run_round(candidates={"x": mod.fused}, **FAKE)
