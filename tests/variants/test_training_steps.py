""" "Verified" on a training step written the ordinary way: a small GPT-style model (embedding, a
hand-written causal attention with softmax, LayerNorm, a GELU MLP, an LM head, cross-entropy,
dropout), AdamW, a loss function closing over the model, ``loss = step()``.

The parameters a variant depends on are found whatever form it takes (a module, a bound method, a
lambda, a closure); a stateful step (forward, backward, ``opt.step()`` inside the call) is checked
from one restored snapshot per call and timed from it, its effects (gradients, new parameters,
optimizer state) compared; reduced precision is found by what the call computes and judged with its
own tolerances; the user's objects are left as they were."""

from __future__ import annotations

import copy
import hashlib
import math

import pytest

torch = pytest.importorskip("torch")

import torch.nn.functional as F  # noqa: E402

import workbench as wb  # noqa: E402
from workbench.errors import NothingToCompareError  # noqa: E402
from workbench.variants.clock import FakeTimer  # noqa: E402
from workbench.variants.reach import find_reach  # noqa: E402
from workbench.variants.tolerances import DEFAULT_TOLERANCES, GRADIENT_TOLERANCES  # noqa: E402

V, T, B, D, H = 32, 8, 4, 16, 2
FAST = dict(checks=2, profile=False, budget_s=0.3, min_rounds=4, max_rounds=8)


def fake(**ms):
    """Candidates 2x faster than the baseline "base"; each variant is still called once per sample."""
    return FakeTimer({"base": 2.0, **ms}, default_ms=1.0, noise=0.02, seed=0, call=True)


class Block(torch.nn.Module):
    def __init__(self, detach_softmax: bool = False, dropout: float = 0.1):
        super().__init__()
        self.ln1, self.ln2 = torch.nn.LayerNorm(D), torch.nn.LayerNorm(D)
        self.qkv, self.proj = torch.nn.Linear(D, 3 * D), torch.nn.Linear(D, D)
        self.fc, self.out = torch.nn.Linear(D, 4 * D), torch.nn.Linear(4 * D, D)
        self.drop = torch.nn.Dropout(dropout)
        self.detach_softmax = detach_softmax
        self.register_buffer("mask", torch.tril(torch.ones(T, T)).view(1, 1, T, T))

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(c, dim=2)
        q, k, v = (z.view(b, t, H, c // H).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(c // H)
        att = att.masked_fill(self.mask[:, :, :t, :t] == 0, float("-inf"))
        att = torch.softmax(att, dim=-1)
        if self.detach_softmax:
            att = att.detach()  # the wrong-gradient bug: no gradient through softmax
        att = self.drop(att)
        y = (att @ v).transpose(1, 2).contiguous().view(b, t, c)
        x = x + self.proj(y)
        return x + self.out(F.gelu(self.fc(self.ln2(x))))


class GPT(torch.nn.Module):
    def __init__(self, detach_softmax: bool = False, dropout: float = 0.1):
        super().__init__()
        self.tok, self.pos = torch.nn.Embedding(V, D), torch.nn.Embedding(T, D)
        self.block = Block(detach_softmax, dropout)
        self.ln_f, self.head = torch.nn.LayerNorm(D), torch.nn.Linear(D, V, bias=False)

    def forward(self, idx):
        x = self.tok(idx) + self.pos(torch.arange(idx.shape[1]))
        return self.head(self.ln_f(self.block(x)))


def gpt(seed: int = 0, **kw) -> GPT:
    torch.manual_seed(seed)
    return GPT(**kw)


def wrong_twin(model: GPT) -> GPT:
    twin = GPT(detach_softmax=True, dropout=model.block.drop.p)
    twin.load_state_dict(model.state_dict())
    return twin


def batch():
    return torch.randint(0, V, (B, T)), torch.randint(0, V, (B, T))


def failing(row, path: str) -> bool:
    return any(o.path == path and not o.passed for o in row.correctness.outputs)


def make_loss(m, idx, tgt):
    def loss_fn():
        return F.cross_entropy(m(idx).view(-1, V), tgt.view(-1))

    return loss_fn


def make_step(opt, loss_fn, scale: float = 1.0):
    def step():
        opt.zero_grad()
        loss = loss_fn() * scale
        loss.backward()
        opt.step()
        return loss.detach()

    return step


def fingerprint(*objs) -> str:
    """A hash of every parameter, gradient, buffer and optimizer state tensor of ``objs``."""
    h = hashlib.sha256()

    def add(t):
        if t is None:
            h.update(b"none")
        elif isinstance(t, torch.Tensor):
            h.update(str((t.dtype, tuple(t.shape), t.requires_grad)).encode())
            h.update(t.detach().contiguous().view(-1).double().numpy().tobytes())
        else:
            h.update(repr(t).encode())

    for obj in objs:
        if isinstance(obj, torch.nn.Module):
            for name, p in obj.named_parameters():
                h.update(name.encode())
                add(p)
                add(p.grad)
            for name, b in obj.named_buffers():
                h.update(name.encode())
                add(b)
        elif isinstance(obj, torch.optim.Optimizer):
            for group in obj.param_groups:
                add({k: v for k, v in group.items() if k != "params"})
                for p in group["params"]:
                    for k, v in sorted(obj.state.get(p, {}).items()):
                        h.update(k.encode())
                        add(v)
    return h.hexdigest()


# -- finding what a variant depends on -------------------------------------------------------
def test_reach_finds_the_model_through_every_form_a_callable_takes():
    model = gpt()
    opt = torch.optim.AdamW(model.parameters(), foreach=False)
    idx, tgt = batch()
    loss_fn = make_loss(model, idx, tgt)
    names = [n for n, _ in model.named_parameters()]

    class Cell:
        def __call__(self):
            return None

        def __workbench_reach__(self):
            return [loss_fn]

    class Trainer:
        def __init__(self):
            self.model, self.opt = model, opt

        def step(self):
            return self.model(idx)

    import functools

    forms = {
        "module": model,
        "bound method": model.forward,
        "lambda": lambda i: model(i),
        "closure": loss_fn,
        "partial": functools.partial(F.cross_entropy, model(idx).view(-1, V)),
        "step": make_step(opt, loss_fn),
        "protocol": Cell(),
        "object's method": Trainer().step,
    }
    for form, fn in forms.items():
        reach = find_reach(fn)
        if form == "partial":
            assert not reach.params, form  # a computed tensor is not a parameter (it is no leaf)
            continue
        assert list(reach.params) == names, form
        assert "block.mask" in reach.buffers, form
    assert find_reach(make_step(opt, loss_fn)).optimizers == [opt]
    only_opt = find_reach(lambda: opt.step())
    assert list(only_opt.params) == [f"optimizer[0].param[{j}]" for j in range(len(names))]
    cyclic = []
    cyclic.append(cyclic)
    assert find_reach(lambda: cyclic).empty  # a cycle ends


# -- wrong gradients are rejected whatever form the variant takes ------------------------------
def test_a_wrong_gradient_model_is_rejected_as_a_module_a_bound_method_a_lambda_and_a_closure():
    model = gpt(dropout=0.0)
    wrong = wrong_twin(model)
    right = copy.deepcopy(model)
    cmp = wb.compare(
        {"base": model, "module": wrong, "method": wrong.forward, "lambda": lambda i: wrong(i), "right copy": right},
        inputs=lambda: (torch.randint(0, V, (B, T)),),
        baseline="base",
        timer=fake(),
        **FAST,
    )
    assert cmp.settings["mode"] == "training"
    for name in ("module", "method", "lambda"):
        row = cmp[name]
        assert row.decision == "reject" and row.status == "incorrect", (name, row.decision_reason)
        assert "grad " in row.reason and failing(row, "grad block.qkv.weight"), (name, row.reason)
    assert cmp["right copy"].decision == "keep", cmp["right copy"].decision_reason
    assert cmp["right copy"].compared["parameter_gradients"] == len(list(model.parameters()))
    assert model.block.qkv.weight.grad is None and wrong.block.qkv.weight.grad is None

    idx, tgt = batch()
    closures = wb.compare(
        {"base": make_loss(model, idx, tgt), "wrong": make_loss(wrong, idx, tgt), "same": make_loss(model, idx, tgt)},
        baseline="base",
        timer=fake(),
        **FAST,
    )
    assert closures.settings["mode"] == "training"
    assert closures["wrong"].decision == "reject" and failing(closures["wrong"], "grad block.qkv.weight")
    assert closures["same"].decision == "keep", closures["same"].decision_reason
    n = len(list(model.parameters()))
    assert f"{n} parameter gradients match the baseline's too" in closures.decision.why_safe
    assert "every input and parameter" not in closures.decision.why_safe


# -- stateful steps ------------------------------------------------------------------------------
def test_a_foreach_and_a_fused_adamw_rewrite_of_a_stateful_step_is_never_rejected_and_leaves_state_as_it_was():
    model = gpt()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, foreach=False)
    idx, tgt = batch()
    loss_fn = make_loss(model, idx, tgt)
    step = make_step(opt, loss_fn)
    step()  # the notebook ran the cell once already: state and grads exist
    shared_foreach = torch.optim.AdamW(model.parameters(), lr=1e-3, foreach=True)
    shared_foreach.load_state_dict(opt.state_dict())
    twin = copy.deepcopy(model)
    fused = torch.optim.AdamW(twin.parameters(), lr=1e-3, fused=True)
    fused.load_state_dict(opt.state_dict())
    before = fingerprint(model, opt, twin, fused, shared_foreach)
    cmp = wb.compare(
        {
            "base": step,
            "foreach": make_step(shared_foreach, loss_fn),
            "fused copy": make_step(fused, make_loss(twin, idx, tgt)),
        },
        baseline="base",
        timer=fake(),
        **FAST,
    )  # seeded clock (each step still runs per sample): load cannot decide it
    assert fingerprint(model, opt, twin, fused, shared_foreach) == before  # the user's objects as they were
    assert cmp.settings["mode"] == "training"
    assert cmp.settings["state"].startswith(
        "stateful step: model parameters, gradients, optimizer state and RNG "
        "restored before every check call and outside the timed region"
    )
    assert cmp.decision.settings["state"] == cmp.settings["state"]
    n = len(list(model.parameters()))
    for name in ("foreach", "fused copy"):
        row = cmp[name]
        assert row.decision in ("keep", "need_more_evidence"), (name, row.decision, row.decision_reason)
        assert row.status == "ok" and row.stateful
        assert row.compared["parameter_gradients"] == n and row.compared["parameter_values"] == n
        assert row.compared["optimizer_states"] == 3 * n  # step, exp_avg, exp_avg_sq
        assert row.max_grad_rel_err is not None and row.max_grad_rel_err < 1e-5  # the same backward (dropout alike)
    assert cmp.settings["reach"]["optimizers"] == 3
    assert cmp.settings["reference_precision"] == "native"  # dropout: a float64 run would draw other masks
    assert any("draws random numbers" in n for n in cmp.settings["notes"])


def test_a_step_that_doubles_the_loss_is_rejected_and_its_changed_values_are_named():
    model = gpt()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, foreach=False)
    idx, tgt = batch()
    loss_fn = make_loss(model, idx, tgt)
    before = fingerprint(model, opt)
    cmp = wb.compare(
        {
            "base": make_step(opt, loss_fn),
            "doubled": make_step(opt, loss_fn, scale=2.0),
            "fresh twin": make_step(opt, make_loss(model, idx, tgt)),
        },
        baseline="base",
        timer=fake(),
        **FAST,
    )
    assert fingerprint(model, opt) == before
    row = cmp["doubled"]
    assert row.decision == "reject" and row.status == "incorrect"
    assert "out:" in row.reason or "grad " in row.reason
    bad = {o.path for o in row.correctness.outputs if not o.passed}
    assert "out" in bad and any(p.startswith("grad block.") for p in bad)
    assert cmp["fresh twin"].decision == "keep", cmp["fresh twin"].decision_reason
    assert "parameter gradients" in cmp.decision.why_safe and "optimizer states" in cmp.decision.why_safe


def test_a_step_that_already_ran_backward_is_not_backwarded_again():
    model = gpt()
    opt = torch.optim.AdamW(model.parameters(), foreach=False)
    idx, tgt = batch()
    loss_fn = make_loss(model, idx, tgt)

    def step_returning_the_live_loss():  # returns a loss that still requires grad, after backward
        opt.zero_grad()
        loss = loss_fn()
        loss.backward()
        opt.step()
        return loss

    cmp = wb.compare(
        {"base": step_returning_the_live_loss, "same": make_step(opt, loss_fn)}, baseline="base", timer=fake(), **FAST
    )
    assert cmp.settings["mode"] == "training"
    assert cmp["same"].decision == "keep", cmp["same"].decision_reason
    assert any("no call was backwarded again" in n for n in cmp.settings["notes"])


# -- reduced precision ------------------------------------------------------------------------
def test_bf16_autocast_is_reduced_precision_judged_with_its_tolerances_and_its_gradient_error_shown():
    model = gpt(dropout=0.0)
    idx, tgt = batch()
    loss_fn = make_loss(model, idx, tgt)

    def loss_bf16():
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return F.cross_entropy(model(idx).view(-1, V).float(), tgt.view(-1))

    cmp = wb.compare({"base": loss_fn, "bf16": loss_bf16}, baseline="base", timer=fake(), **FAST)
    assert cmp.settings["reference_precision"] == "float64"  # the closed-over model, cast for the reference
    row = cmp["bf16"]
    assert row.numerical_class == "reduced precision"
    assert "matmul" in row.precision and "bfloat16" in row.precision
    assert row.max_grad_rel_err is not None and 1e-4 < row.max_grad_rel_err < 0.1
    rows = cmp.settings["reduced_precision"]["bf16"]
    assert rows["outputs"] == {"rtol": DEFAULT_TOLERANCES["bfloat16"][0], "atol": DEFAULT_TOLERANCES["bfloat16"][1]}
    assert rows["gradients"] == {"rtol": GRADIENT_TOLERANCES["bfloat16"][0], "atol": GRADIENT_TOLERANCES["bfloat16"][1]}
    assert cmp.decision.settings["reduced_precision"] == cmp.settings["reduced_precision"]
    flag = next(f for f in row.flags if f.startswith("reduced precision"))
    assert "judged with bfloat16 tolerances" in flag and "gradients differ by up to" in flag
    if row.decision == "keep":  # never a silent keep
        assert "reduced precision" in row.decision_reason and "bfloat16" in row.decision_reason
    assert row.decision != "reject" or "slower" in row.decision_reason or "incorrect" not in row.status
    again = type(row).from_dict(row.to_dict())
    assert again.max_grad_rel_err == row.max_grad_rel_err and again.precision == row.precision
    assert again.compared == row.compared
    old = dict(row.to_dict(), numerical_class="lower precision")
    assert type(row).from_dict(old).numerical_class == "reduced precision"


def test_a_reduced_precision_variant_without_a_gradient_check_is_not_kept_on_a_training_path():
    hidden = gpt(dropout=0.0)
    idx, tgt = batch()

    def opaque():  # the model is looked up by a string: nothing reachable
        return F.cross_entropy(globals()["_HIDDEN"](idx).view(-1, V), tgt.view(-1))

    def opaque_bf16():
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return F.cross_entropy(globals()["_HIDDEN"](idx).view(-1, V).float(), tgt.view(-1))

    globals()["_HIDDEN"] = hidden
    try:
        cmp = wb.compare({"base": opaque, "bf16": opaque_bf16, "same": opaque}, baseline="base", timer=fake(), **FAST)
        for name in ("bf16", "same"):
            row = cmp[name]
            assert row.decision == "need_more_evidence", (name, row.decision, row.decision_reason)
            assert row.decision_reason.startswith("cannot judge: no parameters reached; pass model=… or params=…")
        assert "gradient" not in cmp.decision.why_safe or "no gradient was compared" in cmp.decision.why_safe
        # (the hidden model is not reached, so it is not restored either: its .grad is what the checks left)
        # with the model named explicitly the gradients are compared again
        named = wb.compare(
            {"base": opaque, "wrong": lambda: F.cross_entropy(wrong_twin(hidden)(idx).view(-1, V), tgt.view(-1))},
            baseline="base",
            model=hidden,
            timer=fake(),
            **FAST,
        )
        assert named["wrong"].decision in ("need_more_evidence", "reject")
        assert named.settings["reach"]["parameters"] == len(list(hidden.parameters()))
    finally:
        del globals()["_HIDDEN"]


# -- nothing to compare ---------------------------------------------------------------------
def test_a_step_with_nothing_to_compare_raises_in_one_line():
    def nothing():
        torch.randn(3).sum()

    with pytest.raises(NothingToCompareError) as err:
        wb.compare({"a": nothing, "b": nothing}, timer=fake(), **FAST)
    text = str(err.value)
    assert "\n" not in text and text.startswith("nothing to compare: the baseline returns None and reaches no model")
    assert "model=/params=" in text
    model = gpt()
    with pytest.raises(NothingToCompareError, match="changes none of the"):
        wb.compare({"a": lambda: None if model.training else 1, "b": lambda: None}, timer=fake(), **FAST)


# -- hostile candidates on a training step ---------------------------------------------------
def test_a_step_that_mutates_its_inputs_and_one_that_leaks_a_global_setting_each_get_their_verdict():
    model = gpt(dropout=0.0)
    opt = torch.optim.AdamW(model.parameters(), foreach=False)

    def base(idx, tgt):
        opt.zero_grad()
        loss = F.cross_entropy(model(idx).view(-1, V), tgt.view(-1))
        loss.backward()
        opt.step()
        return loss.detach()

    def mutates(idx, tgt):
        out = base(idx, tgt)
        tgt.zero_()  # scribbles over the caller's targets
        return out

    def leaks(idx, tgt):
        torch.backends.cudnn.benchmark = not torch.backends.cudnn.benchmark
        return base(idx, tgt)

    before = fingerprint(model, opt)
    flag = torch.backends.cudnn.benchmark
    cmp = wb.compare(
        {"base": base, "mutates": mutates, "leaks": leaks}, inputs=batch, baseline="base", timer=fake(), **FAST
    )
    assert fingerprint(model, opt) == before and torch.backends.cudnn.benchmark == flag
    assert cmp["mutates"].decision == "reject" and "input changed in place" in cmp["mutates"].reason
    assert cmp["leaks"].decision == "reject" and "cudnn.benchmark" in cmp["leaks"].decision_reason


# -- bad input ------------------------------------------------------------------------------
def test_a_model_that_cannot_be_copied_or_state_dicted_is_still_compared_and_left_as_it_was():
    class Stubborn(GPT):
        def state_dict(self, *a, **k):
            raise RuntimeError("no state_dict here")

        def __deepcopy__(self, memo):
            raise TypeError("cannot be copied")

    torch.manual_seed(0)
    model = Stubborn(dropout=0.0)
    wrong = GPT(detach_softmax=True, dropout=0.0)
    with torch.no_grad():
        for p, q in zip(wrong.parameters(), model.parameters()):
            p.copy_(q)
    before = fingerprint(model)
    cmp = wb.compare(
        {"base": model, "lambda": lambda i: model(i), "wrong": wrong},
        inputs=lambda: (torch.randint(0, V, (B, T)),),
        baseline="base",
        timer=fake(),
        **FAST,
    )
    assert fingerprint(model) == before
    assert any("could not copy the module Stubborn" in n for n in cmp.settings["notes"])
    assert cmp["lambda"].decision == "keep", cmp["lambda"].decision_reason
    assert cmp["wrong"].decision == "reject" and failing(cmp["wrong"], "grad block.qkv.weight")


def test_an_optimizer_with_unusual_state_is_noted_and_the_parameters_are_left_as_they_were():
    class OddAdamW(torch.optim.AdamW):
        def step(self, closure=None):
            out = super().step(closure)
            self.state["odd"] = {"gen": (i for i in range(3)), "count": len(self.state)}
            return out

    model = gpt(dropout=0.0)
    opt = OddAdamW(model.parameters(), foreach=False)
    idx, tgt = batch()
    step = make_step(opt, make_loss(model, idx, tgt))
    step()
    before = fingerprint(model, opt)
    cmp = wb.compare(
        {"base": step, "same": make_step(opt, make_loss(model, idx, tgt))}, baseline="base", timer=fake(), **FAST
    )
    assert fingerprint(model, opt) == before
    assert any("could not be copied" in n and "OddAdamW" in n for n in cmp.settings["notes"])
    assert cmp["same"].decision in ("keep", "need_more_evidence"), cmp["same"].decision_reason


def test_every_checked_call_and_every_timed_sample_starts_from_the_same_state_and_rng():
    model = gpt()  # with dropout: the RNG matters
    opt = torch.optim.AdamW(model.parameters(), foreach=False)
    idx, tgt = batch()
    loss_fn = make_loss(model, idx, tgt)
    seen = {"base": [], "twin": []}

    def recording(name):
        inner = make_step(opt, loss_fn)

        def step():
            seen[name].append((float(model.head.weight.detach()[0, 0]), len(opt.state), float(torch.rand(()))))
            return inner()

        return step

    cmp = wb.compare({"base": recording("base"), "twin": recording("twin")}, baseline="base", timer=fake(), **FAST)
    assert cmp["twin"].decision == "keep", cmp["twin"].decision_reason
    starts = {(w, n) for w, n, _ in seen["base"] + seen["twin"]}
    assert starts == {(float(model.head.weight.detach()[0, 0]), 0)}  # one state before every call
    assert cmp["twin"].timing.n >= FAST["min_rounds"] and len(seen["twin"]) > cmp["twin"].timing.n
    assert len(opt.state) == 0 and model.head.weight.grad is None  # left as it was: never stepped
    # within one check both variants draw the same random numbers (the RNG restored per call)
    first = seen["base"][0][2]
    assert seen["twin"][0][2] == first


def test_explicit_params_and_optimizer_overrides_are_snapshotted_and_compared():
    w = torch.randn(16, 8, requires_grad=True)
    opt = torch.optim.SGD([w], lr=0.1)
    x = torch.randn(32, 16)

    def step():  # reaches w and opt through the global table only
        o = _TABLE["opt"]
        o.zero_grad()
        loss = (x @ _TABLE["w"]).tanh().sum()
        loss.backward()
        o.step()
        return loss.detach()

    def step_wrong():
        o = _TABLE["opt"]
        o.zero_grad()
        loss = (x @ _TABLE["w"]).tanh().sum()
        loss.backward()
        _TABLE["w"].grad.mul_(1.05)
        o.step()
        return loss.detach()

    _TABLE.update(w=w, opt=opt)
    before = w.detach().clone()
    cmp = wb.compare(
        {"base": step, "wrong": step_wrong, "same": step},
        baseline="base",
        params={"w": w},
        optimizer=opt,
        timer=fake(),
        **FAST,
    )
    assert torch.equal(w.detach(), before) and w.grad is None
    assert cmp.settings["reach"]["parameters"] == 1 and cmp.settings["reach"]["optimizers"] == 1
    assert cmp["wrong"].decision == "reject" and failing(cmp["wrong"], "grad w") and failing(cmp["wrong"], "value w")
    assert cmp["same"].decision == "keep", cmp["same"].decision_reason
    assert "no inputs" in cmp.decision.why_safe
    with pytest.raises(wb.errors.InvalidArgumentError, match="optimizer= takes"):
        wb.compare({"base": step, "same": step}, optimizer=w, timer=fake(), **FAST)


_TABLE: dict = {}


def test_the_users_own_gradient_and_optimizer_state_tensors_are_put_back():
    model = gpt()
    opt = torch.optim.AdamW(model.parameters(), foreach=False)
    idx, tgt = batch()
    step = make_step(opt, make_loss(model, idx, tgt))
    step()
    grad = model.head.weight.grad
    exp_avg = opt.state[model.head.weight]["exp_avg"]
    values = (grad.clone(), exp_avg.clone())
    wb.compare(
        {"base": step, "same": make_step(opt, make_loss(model, idx, tgt))}, baseline="base", timer=fake(), **FAST
    )
    assert model.head.weight.grad is grad and opt.state[model.head.weight]["exp_avg"] is exp_avg
    assert torch.equal(grad, values[0]) and torch.equal(exp_avg, values[1])
    assert list(find_reach(wb.variants.compiled(model)).params) == [n for n, _ in model.named_parameters()]
    assert list(find_reach(wb.variants.cuda_graph(model)).params) == [n for n, _ in model.named_parameters()]


def test_a_deep_copied_variant_is_matched_by_name_even_when_model_is_passed_explicitly():
    model = gpt(dropout=0.0)
    twin, wrong = copy.deepcopy(model), wrong_twin(model)
    cmp = wb.compare(
        {"base": model, "twin": lambda i: twin(i), "wrong": lambda i: wrong(i)},
        inputs=lambda: (torch.randint(0, V, (B, T)),),
        baseline="base",
        model=model,
        timer=fake(),
        **FAST,
    )
    assert cmp["twin"].decision == "keep", cmp["twin"].decision_reason
    assert cmp["wrong"].decision == "reject" and failing(cmp["wrong"], "grad block.qkv.weight")


def test_a_step_that_freezes_a_parameter_is_rejected_and_the_flag_is_restored():
    model = gpt(dropout=0.0)
    opt = torch.optim.AdamW(model.parameters(), foreach=False)
    loss_fn = make_loss(model, *batch())
    step = make_step(opt, loss_fn)

    def freezing():
        model.head.weight.requires_grad_(False)  # "faster": no head gradient any more
        return step()

    cmp = wb.compare({"base": step, "freezing": freezing}, baseline="base", timer=fake(), **FAST)
    assert model.head.weight.requires_grad
    row = cmp["freezing"]
    assert row.decision == "reject" and failing(row, "requires_grad head.weight")


def test_a_step_with_an_lr_scheduler_starts_every_call_from_the_same_schedule_and_leaves_it_as_it_was():
    model = gpt(dropout=0.0)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, foreach=False)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
    loss_fn = make_loss(model, *batch())
    lrs = []

    def step():
        lrs.append(opt.param_groups[0]["lr"])
        out = make_step(opt, loss_fn)()
        sched.step()
        return out

    before = (sched.state_dict(), fingerprint(model, opt))
    cmp = wb.compare({"base": step, "same": step}, baseline="base", timer=fake(), **FAST)
    assert set(lrs) == {1e-2}  # every call from the same schedule
    assert (sched.state_dict(), fingerprint(model, opt)) == before
    assert cmp["same"].decision == "keep", cmp["same"].decision_reason
    assert cmp.settings["reach"]["schedulers_and_scalers"] == ["StepLR"]


def test_a_grad_scaler_step_is_restored_between_calls_and_left_as_it_was():
    model = gpt(dropout=0.0)
    opt = torch.optim.AdamW(model.parameters(), foreach=False)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0**4, growth_interval=1)  # grows on every step
    loss_fn = make_loss(model, *batch())

    def step():
        opt.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = loss_fn()
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        return loss.detach().float()

    step()
    before = (scaler.state_dict(), fingerprint(model, opt))
    cmp = wb.compare({"base": step, "same": step}, baseline="base", timer=fake(), **FAST)
    assert (scaler.state_dict(), fingerprint(model, opt)) == before
    assert cmp["same"].decision == "keep", cmp["same"].decision_reason
    assert "GradScaler" in cmp.settings["reach"]["schedulers_and_scalers"]
