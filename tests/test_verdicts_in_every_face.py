"""Issue 22's wrong-variant cases get the same verdict, with its reason, in every face: ``wb.compare``,
``%%gpuvariant`` (after ``%%gpuprofile`` of the baseline cell, in an in-process IPython shell) and the
``VariantPanel`` (driven headless: ``panel.run()``, ``panel.rows``).

One table of cases (``CASES``): each names the baseline and the variant as callables of one shared
prelude (a tiny GPT-style model, d=16, vocab 32, seq 8, with a hand-written softmax attention, an
AdamW, ``step()``), the two cells the magic compares, the decisions allowed and a substring of the
reason (the row's ``decision_reason or reason`` and its flags, which is what the panel's row shows).
Where a face says a case its own way (the magic refuses "nothing to compare" with a one-line
UsageError before any comparison; the panel says so in its status line) the case states that form.

``wb.compare`` and the panel run on the seeded fake timer (candidates as fast as the baseline, each
still called once per sample); the magic has no timer option, so it runs on the real clock with
``--budget 0.3 --checks 2`` and only decisions that do not depend on timing are asserted there (the
foreach step: not rejected, unless as "slower: …" with every check passed: a verdict of the clock, not of
correctness).

Runs in about 30 s on a loaded 2-core machine (so not marked slow)."""

from __future__ import annotations

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from dataclasses import dataclass, field  # noqa: E402

import pytest  # noqa: E402

torch = pytest.importorskip("torch")
pytest.importorskip("ipywidgets")
from IPython.core.error import UsageError  # noqa: E402
from IPython.core.interactiveshell import InteractiveShell  # noqa: E402

import workbench as wb  # noqa: E402
from workbench.errors import NothingToCompareError  # noqa: E402
from workbench.variants.clock import FakeTimer  # noqa: E402
from workbench.variants.tolerances import DEFAULT_TOLERANCES, GRADIENT_TOLERANCES  # noqa: E402
from workbench.widgets import VariantPanel  # noqa: E402

BASE, VARIANT = "eager", "variant"  # the panel's baseline row is "eager": the same names everywhere
FAST = dict(checks=2, profile=False, budget_s=0.3, min_rounds=4, max_rounds=8)
MAGIC_FAST = "--budget 0.3 --checks 2"

# every face runs this afresh: new models, optimizers and data (seeded), nothing carried between cases
PRELUDE = '''
import copy
import torch, torch.nn as nn, torch.nn.functional as F
torch.manual_seed(0)
V, D, T, B = 32, 16, 8, 4

class Attention(nn.Module):
    def __init__(self, d, detach_softmax=False):
        super().__init__()
        self.qkv, self.proj, self.detach_softmax = nn.Linear(d, 3 * d), nn.Linear(d, d), detach_softmax

    def forward(self, h):
        b, t, c = h.shape
        q, k, v = self.qkv(h).split(c, dim=2)
        att = (q @ k.transpose(-2, -1)) / c ** 0.5
        att = att.masked_fill(~torch.tril(torch.ones(t, t, dtype=torch.bool)), float("-inf"))
        att = F.softmax(att, dim=-1)
        if self.detach_softmax:
            att = att.detach()                       # the wrong-gradient bug: no gradient through softmax
        return self.proj(att @ v)

class TinyGPT(nn.Module):
    def __init__(self, detach_softmax=False):
        super().__init__()
        self.tok, self.pos = nn.Embedding(V, D), nn.Embedding(T, D)
        self.ln, self.attn, self.head = nn.LayerNorm(D), Attention(D, detach_softmax), nn.Linear(D, V)

    def forward(self, idx):
        h = self.tok(idx) + self.pos(torch.arange(idx.shape[1]))
        h = h + self.attn(self.ln(h))
        return self.head(h)

model = TinyGPT()
x, y = torch.randint(0, V, (B, T)), torch.randint(0, V, (B, T))

def loss_of(m):
    def loss_fn():
        return F.cross_entropy(m(x).view(-1, V), y.view(-1))
    return loss_fn

base_loss = loss_of(model)

def loss_bf16():
    with torch.autocast("cpu", dtype=torch.bfloat16):
        return F.cross_entropy(model(x).view(-1, V).float(), y.view(-1))

opt = torch.optim.AdamW(model.parameters(), lr=1e-3, foreach=False)

def step():
    opt.zero_grad()
    loss = base_loss()
    loss.backward()
    opt.step()
    return loss.detach()

def doubled():
    return step() * 2

step()                                        # the notebook ran the step once: state and gradients exist
wrong = TinyGPT(detach_softmax=True)
wrong_loss = loss_of(wrong)
wrong_forward = wrong.forward
wrong_lambda = lambda i: wrong(i)
opt_f = torch.optim.AdamW(model.parameters(), lr=1e-3, foreach=True)

def sync():
    """The variants start from the state the model and its optimizer reached (again after %%gpuprofile)."""
    wrong.load_state_dict(model.state_dict())
    opt_f.load_state_dict(copy.deepcopy(opt.state_dict()))
    for group in opt_f.param_groups:
        group["foreach"] = True

sync()

def step_foreach():
    opt_f.zero_grad()
    loss = base_loss()
    loss.backward()
    opt_f.step()
    return loss.detach()

def step_on(a, b):
    opt.zero_grad()
    loss = F.cross_entropy(model(a).view(-1, V), b.view(-1))
    loss.backward()
    opt.step()
    return loss.detach()

def mutates(a, b):
    out = step_on(a, b)
    b.zero_()                                 # scribbles over the caller's targets
    return out

def leaks(a, b):
    torch.backends.cudnn.benchmark = True     # set and never put back
    return step_on(a, b)

def nothing():
    torch.randn(3).sum()

one_batch = lambda: (torch.randint(0, V, (B, T)),)
batches = lambda: (torch.randint(0, V, (B, T)), torch.randint(0, V, (B, T)))
'''

NOT_REJECT = frozenset({"keep", "keep_guarded", "need_more_evidence", "micro_only"})


@dataclass(frozen=True)
class Face:
    """How one face expresses a case: its decisions and the reason's substrings (all must appear),
    or ``refused``: the face refuses the case before any comparison, with this text."""

    decisions: frozenset[str] = frozenset()
    reason: tuple[str, ...] = ()
    refused: str | None = None
    slower_is_not_wrong: bool = False  # real clock: a "reject" is accepted only as "slower: …" with every check passed


@dataclass(frozen=True)
class Case:
    name: str
    base: str  # the baseline callable: an expression of PRELUDE's namespace
    variant: str  # the variant callable
    inputs: str | None  # a zero-argument callable giving the arguments, or None
    base_cell: str  # the magic: the cell %%gpuprofile profiles
    variant_cell: str  # the magic: the %%gpuvariant cell
    expected: Face  # every face, unless it has its own below
    faces: dict[str, Face] = field(default_factory=dict)
    reduced_precision: bool = False  # numerical class "reduced precision", tolerance and gradient error shown
    xfail: dict[str, str] = field(default_factory=dict)  # face -> the bug that face has with this case

    def face(self, name: str) -> Face:
        return self.faces.get(name, self.expected)


REJECT_GRAD = Face(frozenset({"reject"}), ("incorrect", "grad "))  # rejected on a gradient
NOTHING = "nothing to compare"

CASES = [
    # (1)-(4): the softmax detached: same forward, wrong gradients, whatever form the variant takes
    Case("wrong gradient, a module", "model", "wrong", "one_batch", "out = model(x)", "out = wrong(x)", REJECT_GRAD),
    Case(
        "wrong gradient, a bound method",
        "model",
        "wrong_forward",
        "one_batch",
        "out = model(x)",
        "out = wrong_forward(x)",
        REJECT_GRAD,
    ),
    Case(
        "wrong gradient, a lambda",
        "model",
        "wrong_lambda",
        "one_batch",
        "out = model(x)",
        "out = wrong_lambda(x)",
        REJECT_GRAD,
    ),
    Case(
        "wrong gradient, a closure",
        "base_loss",
        "wrong_loss",
        None,
        "loss = base_loss()",
        "loss = wrong_loss()",
        REJECT_GRAD,
    ),
    # (5): the step's loss doubled: the compared value is named (the magic's is the cell's `loss`)
    Case(
        "doubled loss",
        "step",
        "doubled",
        None,
        "loss = step()",
        "loss = step() * 2",
        Face(frozenset({"reject"}), ("incorrect: out: ",)),
        faces={"magic": Face(frozenset({"reject"}), ("incorrect: out['loss']: ",))},
    ),
    # (6): a correct foreach=True stateful AdamW step: kept or undecided, never rejected (the magic, on the real
    # clock: not rejected, or only as "slower: …" with every check passed)
    Case(
        "foreach AdamW step",
        "step",
        "step_foreach",
        None,
        "loss = step()",
        "loss = step_foreach()",
        Face(frozenset({"keep", "need_more_evidence"})),
        faces={"magic": Face(NOT_REJECT, slower_is_not_wrong=True)},
    ),
    # (7): bf16 autocast: reduced precision, its tolerances stated, its largest gradient error shown
    Case(
        "bf16 autocast",
        "base_loss",
        "loss_bf16",
        None,
        "loss = base_loss()",
        "loss = loss_bf16()",
        Face(
            frozenset({"keep", "keep_guarded", "need_more_evidence", "micro_only", "reject"}),
            ("reduced precision", "judged with bfloat16 tolerances", "gradients differ by up to"),
        ),
        reduced_precision=True,
    ),
    # (8): nothing to compare: refused in one line
    Case("nothing to compare", "nothing", "nothing", None, "nothing()", "nothing()", Face(refused=NOTHING)),
    # (9): a step that mutates its inputs: rejected, the input named
    Case(
        "mutates its inputs",
        "step_on",
        "mutates",
        "batches",
        "loss = step_on(x, y)",
        "loss = mutates(x, y)",
        Face(frozenset({"reject"}), ("incorrect: arg[1]: input changed in place",)),  # the targets, named
        faces={"magic": Face(frozenset({"reject"}), ("input changed in place", "y"))},  # the namespace's `y`
    ),
    # (10): a step that leaks a global setting: rejected, the setting named
    Case(
        "leaks a global setting",
        "step_on",
        "leaks",
        "batches",
        "loss = step_on(x, y)",
        "loss = leaks(x, y)",
        Face(frozenset({"reject"}), ("changed global state", "cudnn.benchmark")),
    ),
]


def cases(face: str) -> list:
    return [
        pytest.param(
            c, id=c.name, marks=[pytest.mark.xfail(strict=True, reason=c.xfail[face])] if face in c.xfail else []
        )
        for c in CASES
    ]


def fake() -> FakeTimer:
    return FakeTimer({BASE: 1.0}, default_ms=1.0, noise=0.02, seed=0, call=True)


def prelude() -> dict:
    ns: dict = {}
    exec(compile(PRELUDE, "<prelude>", "exec"), ns)
    return ns


@pytest.fixture(autouse=True)
def _global_settings_as_they_were():
    threads, bench = torch.get_num_threads(), torch.backends.cudnn.benchmark
    precision = torch.get_float32_matmul_precision()
    torch.set_num_threads(1)
    yield
    leaked = (torch.backends.cudnn.benchmark, torch.get_float32_matmul_precision())
    torch.backends.cudnn.benchmark = bench
    torch.set_float32_matmul_precision(precision)
    torch.set_num_threads(threads)
    assert leaked == (bench, precision), "a face left a variant's global setting behind"


def text_of(row) -> str:
    """A result's reason as the panel's row shows it: ``decision_reason or reason``, then the flags."""
    return f"{row.decision_reason or row.reason} | {'; '.join(row.flags)}"


def check(case: Case, face_name: str, decision: str, text: str, passed: bool | None = None) -> None:
    face = case.face(face_name)
    if face.slower_is_not_wrong and decision == "reject":  # a timing verdict on the real clock, not a wrong one
        assert passed and text.startswith("slower: "), (case.name, face_name, decision, text)
        return
    assert decision in face.decisions, (case.name, face_name, decision, text)
    assert not text.startswith("cannot judge"), (case.name, face_name, text)  # checked, not waved through
    for part in face.reason:
        assert part in text, (case.name, face_name, part, text)
    if case.reduced_precision and decision == "keep":  # never a silent keep
        assert "reduced precision" in text.split(" | ")[0], (case.name, face_name, text)


def check_precision(case: Case, cmp) -> None:
    """Reduced precision: its class, its tolerances stated (the bf16 ones, outputs and gradients), its
    largest gradient error shown (so the gradients were checked: no plain keep on a training path)."""
    if not case.reduced_precision:
        return
    row = cmp[VARIANT]
    assert row.numerical_class == "reduced precision", row.numerical_class
    assert "bfloat16" in row.precision, row.precision
    assert row.max_grad_rel_err is not None and row.max_grad_rel_err > 0, row.max_grad_rel_err
    stated = cmp.settings["reduced_precision"][VARIANT]
    assert stated["outputs"] == dict(zip(("rtol", "atol"), DEFAULT_TOLERANCES["bfloat16"])), stated
    assert stated["gradients"] == dict(zip(("rtol", "atol"), GRADIENT_TOLERANCES["bfloat16"])), stated


# -- wb.compare ----------------------------------------------------------------------------------
@pytest.mark.parametrize("case", cases("compare"))
def test_wb_compare(case):
    ns = prelude()
    inputs = ns[case.inputs] if case.inputs else None
    run = lambda: wb.compare(
        {BASE: ns[case.base], VARIANT: ns[case.variant]},
        inputs,
        baseline=BASE,  # noqa: E731
        timer=fake(),
        **FAST,
    )
    face = case.face("compare")
    if face.refused:
        with pytest.raises(NothingToCompareError) as err:
            run()
        text = str(err.value)
        assert face.refused in text and "\n" not in text, text
        return
    cmp = run()
    row = cmp[VARIANT]
    check(case, "compare", row.decision, text_of(row))
    check_precision(case, cmp)


# -- %%gpuvariant ----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def shell():
    sh = InteractiveShell.instance()
    sh.run_cell("%load_ext workbench", store_history=True).raise_error()
    return sh


@pytest.mark.parametrize("case", cases("magic"))
def test_gpuvariant_magic(case, shell):
    shell.run_cell(PRELUDE, store_history=True).raise_error()
    shell.run_cell(f"%%gpuprofile -T -w 1 -r 3 -q\n{case.base_cell}", store_history=True).raise_error()
    shell.run_cell("sync()", store_history=True).raise_error()  # the profiled runs stepped the model
    shell.user_ns.pop("_gpuvariant", None)
    tensors = {k: v.detach().clone() for k, v in shell.user_ns.items() if isinstance(v, torch.Tensor)}
    res = shell.run_cell(f"%%gpuvariant {VARIANT} {MAGIC_FAST}\n{case.variant_cell}", store_history=True)
    # the user's namespace tensors are as they were (a cell that zeroes `y` in place is undone)
    changed = [k for k, v in tensors.items() if not torch.equal(shell.user_ns[k], v)]
    assert not changed, changed
    face = case.face("magic")
    if face.refused:
        assert isinstance(res.error_in_exec, UsageError), res.error_in_exec
        text = str(res.error_in_exec)
        assert face.refused in text and "\n" not in text, text
        assert "_gpuvariant" not in shell.user_ns
        return
    res.raise_error()
    cmp = shell.user_ns["_gpuvariant"]
    assert cmp.baseline == "profiled"
    row = cmp[VARIANT]
    check(case, "magic", row.decision, text_of(row), row.correctness is not None and row.correctness.passed)
    check_precision(case, cmp)


# -- the variant panel ---------------------------------------------------------------------------
@pytest.mark.parametrize("case", cases("panel"))
def test_variant_panel(case, shell):
    ns = prelude()
    inputs = ns[case.inputs] if case.inputs else None
    panel = VariantPanel(
        ns[case.base],
        inputs,
        user_variants={VARIANT: ns[case.variant]},
        shell=shell,
        compare_options=dict(FAST, timer=fake()),
    )
    assert panel.selected() == [VARIANT]
    panel.run()
    face = case.face("panel")
    if face.refused:
        assert panel.rows == {} and face.refused in panel.status.value, panel.status.value
        assert "NothingToCompareError" in panel.status.value and "\n" not in panel.status.value
        return
    row = panel.rows[VARIANT]
    check(case, "panel", row["decision"], f"{row['reason']} | {row['flags']}")
    check_precision(case, panel.comparison)
    if case.reduced_precision:
        assert "reduced precision" in row["flags"]
