"""``workbench.fixes.rebind``: a callable like the user's reaching other objects (closures, globals,
lambdas, bound methods, nested helpers, partials, defaults, user objects), and ``copy_state``: a deep
copy of the models with each optimizer rebuilt over the copy, so a training step written over globals
``model`` and ``opt`` runs on the copy and never touches the user's objects."""

from __future__ import annotations

import functools
import threading

import pytest

torch = pytest.importorskip("torch")

from workbench.errors import InvalidArgumentError  # noqa: E402
from workbench.fixes.context import FixContext  # noqa: E402
from workbench.fixes.fix import Site  # noqa: E402
from workbench.fixes.rebind import copy_problem, copy_state, rebind, rebuild_optimizer, swap_variant  # noqa: E402

A, B = object(), object()  # stand-ins: rebind replaces by identity, whatever the objects are
model = torch.nn.Linear(3, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
x = torch.randn(4, 3)


def uses_global():
    return A


def helper():
    return uses_global()


def calls_helper():
    return helper(), A


def ping(n):
    return A if n == 0 else pong(n - 1)


def pong(n):
    return ping(n)


def loss_fn():
    return model(x).pow(2).mean()


def step():
    opt.zero_grad()
    loss = loss_fn()
    loss.backward()
    opt.step()
    return loss.detach()


def test_globals_and_nested_helpers_are_rebound_without_touching_the_originals():
    new = rebind(calls_helper, {id(A): B})
    assert new() == (B, B)
    assert calls_helper() == (A, A) and helper() is A  # the originals and their globals are as they were
    assert new.__globals__ is not calls_helper.__globals__ and calls_helper.__globals__["A"] is A
    assert new.__name__ == "calls_helper" and new.__qualname__ == calls_helper.__qualname__


def test_mutually_recursive_helpers_are_rebuilt_once_and_see_each_other():
    new = rebind(ping, {id(A): B})
    assert new(5) is B and ping(5) is A
    assert new.__globals__["pong"].__globals__ is new.__globals__  # one copy of the module's globals


def test_closures_lambdas_defaults_partials_and_bound_methods():
    def make():
        held = A
        return lambda: held

    closure = make()
    assert rebind(closure, {id(A): B})() is B and closure() is A

    def with_default(v=A, *, w=A):
        return v, w

    assert rebind(with_default, {id(A): B})() == (B, B) and with_default() == (A, A)

    part = functools.partial(lambda a, b: (a, b), A, b=A)
    assert rebind(part, {id(A): B})() == (B, B) and part() == (A, A)

    class Holder:
        def __init__(self):
            self.thing = A

        def get(self):
            return self.thing

    h = Holder()
    bound = rebind(h.get, {id(A): B})
    assert bound() is B and h.get() is A and bound.__self__ is not h  # a shallow copy of the user's object

    items = [A, 1]
    assert rebind(lambda: items[0], {id(A): B})() is B and items[0] is A


def test_untouched_parts_stay_shared_and_an_empty_mapping_returns_fn():
    counter = [0]

    def bump():
        counter[0] += 1
        return A

    new = rebind(bump, {id(A): B})
    assert new() is B and counter == [1]  # the closure cell holding counter is shared, not copied
    assert rebind(bump, {}) is bump
    assert rebind(uses_global, {id(B): A}) is uses_global  # reaches nothing mapped: fn itself


def test_a_module_called_directly_is_replaced():
    other = torch.nn.Linear(3, 2)
    assert rebind(model, {id(model): other}) is other


def test_copy_state_runs_a_training_step_on_a_copy_with_a_rebuilt_optimizer():
    step()  # momentum buffers exist
    before = [p.detach().clone() for p in model.parameters()]
    state_before = {k: v.clone() for k, v in opt.state[model.weight].items() if isinstance(v, torch.Tensor)}
    mapping, notes = copy_state(FixContext.from_callable(step), lambda m: [Site("", "module", "nothing")])
    new_model, new_opt = mapping[id(model)], mapping[id(opt)]
    assert new_model is not model and type(new_opt) is torch.optim.SGD and new_opt is not opt
    assert new_opt.param_groups[0]["lr"] == 0.1 and new_opt.param_groups[0]["momentum"] == 0.9
    assert [p is q for p, q in zip(new_opt.param_groups[0]["params"], new_model.parameters())] == [True, True]
    assert torch.equal(new_opt.state[new_model.weight]["momentum_buffer"], state_before["momentum_buffer"])
    assert any("rebuilt over the copy" in n for n in notes) and any(n.startswith("changed: ") for n in notes)
    new_step = rebind(step, mapping)
    torch.manual_seed(0)
    got = new_step()
    # the user's model and optimizer state are as they were; the copy moved
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters()))
    assert torch.equal(opt.state[model.weight]["momentum_buffer"], state_before["momentum_buffer"])
    assert not torch.equal(new_model.weight, model.weight)
    assert torch.equal(got, step())  # the same loss from the same state


def test_rebuild_optimizer_with_overrides_keeps_the_hyper_parameters_per_group():
    m = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Linear(2, 1))
    o = torch.optim.AdamW(
        [{"params": m[0].parameters(), "lr": 0.01}, {"params": m[1].parameters()}], lr=0.1, foreach=False
    )
    new = rebuild_optimizer(o, overrides={"foreach": True})
    assert [g["lr"] for g in new.param_groups] == [0.01, 0.1]
    assert all(g["foreach"] is True for g in new.param_groups) and o.param_groups[0]["foreach"] is False


class Locked(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(2, 2)
        self.lin.guard = threading.Lock()

    def forward(self, v):
        return self.lin(v)


def test_a_model_that_cannot_be_copied_gives_the_attribute_and_a_clear_reason():
    bad = Locked()
    reason = copy_problem(bad)
    assert "cannot be deep-copied" in reason and "lin.guard" in reason and "lock" in reason.lower()

    def call():
        return bad(torch.ones(1, 2))

    with pytest.raises(InvalidArgumentError, match="lin.guard"):
        copy_state(FixContext.from_callable(call), lambda m: [])
    v = swap_variant(call, None, "swap", lambda m: [Site("lin", "module")], description="a swap")
    assert v.applicability() and "lin.guard" in v.applicability()


class Trainer:
    """A training step as a bound method of the user's own object holding the model and optimizer."""

    def __init__(self):
        self.model = torch.nn.Linear(3, 1)
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=0.01, foreach=False)

    def step(self):
        self.opt.zero_grad()
        loss = self.model(x).pow(2).mean()
        loss.backward()
        self.opt.step()
        return loss.detach()


def test_a_bound_method_of_a_user_object_runs_on_the_copy():
    trainer = Trainer()
    before = [p.detach().clone() for p in trainer.model.parameters()]
    mapping, _ = copy_state(FixContext.from_callable(trainer.step), lambda m: [Site("", "module")])
    new_step = rebind(trainer.step, mapping)
    assert new_step.__self__ is not trainer and new_step.__self__.model is mapping[id(trainer.model)]
    new_step()
    assert all(torch.equal(a, b) for a, b in zip(before, trainer.model.parameters()))
    assert trainer.model is not new_step.__self__.model and not trainer.opt.state  # the user's optimizer untouched
