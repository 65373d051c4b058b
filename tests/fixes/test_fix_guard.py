"""Bad input for the catalog (issue 24): a user's fix that changes the model in place, or raises, gets its
reason in its row; the user's model is as it was (parameter hashes, module types) and the rest of the
comparison runs."""

from __future__ import annotations

import hashlib

import pytest

torch = pytest.importorskip("torch")

import torch.nn as nn  # noqa: E402

import workbench as wb  # noqa: E402
import workbench.fixes as fixes  # noqa: E402
from workbench.errors import InvalidArgumentError  # noqa: E402
from workbench.variants.clock import FakeTimer  # noqa: E402

FAST = dict(checks=2, profile=False, budget_s=0.2, min_rounds=4, max_rounds=8)


def _hash(model: nn.Module) -> str:
    h = hashlib.sha256()
    for name, t in sorted(model.state_dict().items()):
        h.update(name.encode())
        h.update(t.detach().contiguous().numpy().tobytes())
    h.update(repr([type(m).__name__ for m in model.modules()]).encode())
    return h.hexdigest()


@pytest.fixture
def step():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.randn(8, 16), torch.randn(8, 4)

    def train_step():
        opt.zero_grad()
        loss = ((model(x) - y) ** 2).mean()
        loss.backward()
        opt.step()
        return loss.detach()

    return train_step, model


def _swaps_in_place(fn, context, name):
    (_, model), *_ = context.reach.modules
    model[1] = nn.ReLU()  # replaces the user's own submodule
    with torch.no_grad():
        model[0].weight.mul_(2.0)  # and writes a parameter
    return wb.variants.user(fn, name=name)


def _raises(fn, context, name):
    raise RuntimeError("this fix cannot handle the model")


@pytest.fixture
def user_fixes():
    made = [
        fixes.Fix("test_in_place", "swaps the GELU in the user's own model", "user", "exact", _swaps_in_place),
        fixes.Fix("test_raises", "raises", "user", "exact", _raises),
        fixes.Fix("test_fine", "the code as written", "user", "exact", lambda fn, c, n: wb.variants.user(fn, name=n)),
    ]
    for f in made:
        fixes.register(f, replace=True)
    yield
    for f in made:
        fixes.unregister(f.name)


def test_a_fix_that_changes_the_model_in_place_is_undone_and_named(step, user_fixes):
    train_step, model = step
    before = _hash(model)
    c = wb.compare(
        {"eager": train_step, "in_place": "test_in_place", "raises": "test_raises", "fine": "test_fine"},
        timer=FakeTimer({"eager": 1.0}, default_ms=1.0, seed=0, call=False),
        **FAST,
    )
    assert _hash(model) == before and isinstance(model[1], nn.GELU)
    in_place = c["in_place"]
    assert in_place.status == "not_applicable"
    assert "changed your model in place" in in_place.reason and "submodule 1 replaced" in in_place.reason
    assert "0.weight written in place" in in_place.reason and "it was put back" in in_place.reason
    assert c["raises"].status == "not_applicable" and "RuntimeError: this fix cannot handle" in c["raises"].reason
    assert c["fine"].status == "ok"  # the rest of the comparison ran


def test_the_catalog_builds_leave_the_model_alone(step):
    train_step, model = step
    before = _hash(model)
    listed = fixes.for_callable(train_step)
    for row in listed.rows:
        listed.built(row.fix, train_step)
    assert _hash(model) == before


def test_a_fix_that_changes_the_model_and_then_raises_says_both(step):
    train_step, model = step
    before = _hash(model)

    def half_done(fn, context, name):
        (_, m), *_ = context.reach.modules
        m[1] = nn.ReLU()
        raise RuntimeError("gave up half-way")

    fixes.register(fixes.Fix("test_half_done", "changes, then raises", "user", "exact", half_done), replace=True)
    try:
        with pytest.raises(InvalidArgumentError) as info:
            fixes.get("test_half_done").variant(train_step)
    finally:
        fixes.unregister("test_half_done")
    text = str(info.value)
    assert "changed your model in place" in text and "RuntimeError: gave up half-way" in text
    assert isinstance(info.value.__cause__, RuntimeError)
    assert _hash(model) == before and isinstance(model[1], nn.GELU)
