"""Stateful calls: a snapshot of everything the variants reach, restored before every call, and the
effects of a call (what it changed) recorded for comparison.

A training step written the ordinary way (``opt.zero_grad(); loss = loss_fn(); loss.backward();
opt.step()``) changes the model's parameters, their ``.grad``s and the optimizer's state each time it
runs.  Variants run different numbers of times during checks and timing, so without a restore each
would start from another state.  ``StateTracker`` takes one snapshot at the start of a comparison
(parameter and buffer values, gradients, ``requires_grad`` flags, optimizer state and param groups)
and restores it before every checked call of every variant, with the random number generators
(torch CPU and CUDA, Python's ``random``, numpy's global) as they were at the start of that check,
so dropout masks are alike.  After a call, ``effects`` lists what the call changed: every reached
parameter's gradient, new value, optimizer state and buffer, by name; then the snapshot is put back.
At the end (``final_restore``) the user's objects are as they were before the comparison.

Plain tensors the code reads by name (``reach.data``: a closure's or a notebook cell's ``x``, ``y``) are
inputs that are no arguments: each is snapshotted (up to ``MAX_DATA_BYTES`` in all, the rest named in a
note), a call that changes one in place is recorded as the effect ``input NAME`` (a candidate changing
an input the baseline leaves alone is incorrect), and it is put back only when its version counter
says it was written (so an untouched dataset costs no copy per sample).
"""

from __future__ import annotations

import copy
import math
import random
from typing import Any

from workbench.variants.reach import Reach

STATE_TEXT = (
    "stateful step: model parameters, gradients, optimizer state and RNG restored before every check "
    "call and outside the timed region of every sample (a sample is a block of calls; the state "
    "advances within it as in a training loop)"
)
STATELESS_TEXT = (
    "stateless: the calls changed none of the parameters, gradients, buffers or optimizer state "
    "they reach; that state and the RNG were restored before every check call all the same"
)
NOTHING_REACHED_TEXT = "no model, optimizer or parameter reached: only the RNG was restored before every check call"

_MISSING = object()
MAX_DATA_BYTES = 512 * 2**20  # plain input tensors snapshotted per comparison, in all


def rng_state() -> dict[str, Any]:
    import numpy as np
    import torch

    s: dict[str, Any] = {"torch": torch.get_rng_state(), "random": random.getstate(), "numpy": np.random.get_state()}
    try:
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            s["cuda"] = torch.cuda.get_rng_state_all()
    except Exception:  # noqa: BLE001 - no CUDA RNG to keep
        pass
    return s


def set_rng_state(s: dict[str, Any]) -> None:
    import numpy as np
    import torch

    torch.set_rng_state(s["torch"])
    random.setstate(s["random"])
    np.random.set_state(s["numpy"])
    if "cuda" in s:
        try:
            torch.cuda.set_rng_state_all(s["cuda"])
        except Exception:  # noqa: BLE001
            pass


def _copy_value(v: Any, notes: list[str], where: str) -> Any:
    import torch

    if isinstance(v, torch.Tensor):
        return v.detach().clone()
    try:
        return copy.deepcopy(v)
    except Exception as exc:  # noqa: BLE001 - kept by reference, said in a note
        notes.append(
            f"{where} could not be copied ({type(exc).__name__}: {str(exc)[:80]}); it is restored by reference only"
        )
        return v


class StateTracker:
    """The snapshot of one comparison's reached state; see the module docstring."""

    def __init__(self, reach: Reach) -> None:
        self.reach = reach
        self.notes: list[str] = []
        self.rng = rng_state()
        self.names = reach.names_by_id()
        self._params: list[tuple[Any, Any, Any, bool]] = []
        for p in reach.params.values():
            self._params.append(
                (p, p.detach().clone(), None if p.grad is None else p.grad.detach().clone(), bool(p.requires_grad))
            )
        self._orig_grads = [p.grad for p, _, _, _ in self._params]  # the user's own tensors, put back at the end
        self._buffers = [(b, b.detach().clone()) for b in reach.buffers.values()]
        self._data: list[list[Any]] = []  # [tensor, its snapshot, the version it was snapshotted or restored at]
        room = MAX_DATA_BYTES
        for name, t in reach.data.items():
            size = _nbytes(t)
            if size > room:
                self.notes.append(
                    f"the tensor {name!r} the code reads ({size / 2**20:.0f} MiB) was not snapshotted (over "
                    f"{MAX_DATA_BYTES // 2**20} MiB of inputs in all): a call changing it in place would not be seen"
                )
                continue
            try:
                self._data.append([t, t.detach().clone(), _version(t)])
                room -= size
            except Exception:  # noqa: BLE001 - a tensor subclass that cannot be cloned: not tracked
                continue
        self._opts: list[tuple[Any, Any, Any]] = []
        self._orig_state: dict[int, dict[Any, Any]] = {}
        for i, opt in enumerate(reach.optimizers):
            where = f"optimizer[{i}] ({type(opt).__name__})"
            try:
                state = {
                    p: {k: _copy_value(v, self.notes, f"{where} state {k!r}") for k, v in st.items()}
                    for p, st in opt.state.items()
                }
                groups = [
                    {k: _copy_value(v, self.notes, f"{where} param group {k!r}") for k, v in g.items() if k != "params"}
                    for g in opt.param_groups
                ]
                self._opts.append((opt, state, groups))
                self._orig_state[id(opt)] = {p: st for p, st in opt.state.items()}
            except Exception as exc:  # noqa: BLE001 - an optimizer whose state is no dict of dicts
                self.notes.append(
                    f"{where}: its state could not be snapshotted ({type(exc).__name__}: "
                    f"{str(exc)[:100]}); it is not restored between calls, so the variants' steps "
                    f"ran from different optimizer states and its state was not compared"
                )
        self._helpers: list[tuple[Any, Any]] = []
        for h in reach.helpers:
            try:
                self._helpers.append((h, copy.deepcopy(h.state_dict())))
            except Exception as exc:  # noqa: BLE001
                self.notes.append(
                    f"{type(h).__name__}: its state could not be snapshotted ({type(exc).__name__}: "
                    f"{str(exc)[:100]}); it is not restored between calls"
                )
        self.failed_restore: list[str] = []

    @property
    def holds_state(self) -> bool:
        return bool(self._params or self._buffers or self._opts or self._helpers)

    def begin_check(self) -> None:
        """The RNG state every call of this check starts from (taken after its inputs were drawn)."""
        self.rng = rng_state()

    def restore(self, rng: bool = True) -> None:
        import torch

        with torch.no_grad():
            for p, data, grad, flag in self._params:
                try:
                    if p.shape == data.shape and p.dtype == data.dtype and p.device == data.device:
                        p.copy_(data)
                    else:
                        p.data = data.clone()
                    p.grad = None if grad is None else grad.clone()
                    if p.is_leaf and p.requires_grad != flag:
                        p.requires_grad_(flag)
                except Exception as exc:  # noqa: BLE001
                    self._failed(f"a parameter could not be restored ({type(exc).__name__}: {str(exc)[:80]})")
            for b, data in self._buffers:
                try:
                    if b.shape == data.shape and b.dtype == data.dtype:
                        b.copy_(data)
                    else:
                        b.data = data.clone()
                except Exception as exc:  # noqa: BLE001
                    self._failed(f"a buffer could not be restored ({type(exc).__name__}: {str(exc)[:80]})")
            for entry in self._data:
                t, data, version = entry
                if version is not None and _version(t) == version:
                    continue  # not written since: nothing to put back
                try:
                    if t.shape == data.shape and t.dtype == data.dtype:
                        t.copy_(data)
                    else:
                        t.data = data.clone()
                    entry[2] = _version(t)
                except Exception as exc:  # noqa: BLE001
                    self._failed(f"an input tensor could not be restored ({type(exc).__name__}: {str(exc)[:80]})")
        for opt, state, groups in self._opts:
            try:
                opt.state.clear()
                for p, st in state.items():
                    opt.state[p] = {k: (v.clone() if isinstance(v, torch.Tensor) else _fresh(v)) for k, v in st.items()}
                for g, saved in zip(opt.param_groups, groups):
                    for k, v in saved.items():
                        g[k] = v.clone() if isinstance(v, torch.Tensor) else _fresh(v)
            except Exception as exc:  # noqa: BLE001
                self._failed(
                    f"{type(opt).__name__}'s state could not be restored ({type(exc).__name__}: {str(exc)[:80]})"
                )
        for h, saved_state in self._helpers:
            try:
                h.load_state_dict(copy.deepcopy(saved_state))
            except Exception as exc:  # noqa: BLE001
                self._failed(
                    f"{type(h).__name__}'s state could not be restored ({type(exc).__name__}: {str(exc)[:80]})"
                )
        if rng:
            set_rng_state(self.rng)

    def cast_to_float64(self) -> None:
        """Every reached floating parameter and buffer in float64, gradients cleared (for a float64
        reference run of a closure over a float32 model); ``restore()`` puts them back."""
        import torch

        with torch.no_grad():
            for p, data, _, _ in self._params:
                if data.is_floating_point():
                    p.data = data.to(torch.float64)
                    p.grad = None
            for b, data in self._buffers:
                if data.is_floating_point():
                    b.data = data.to(torch.float64)

    def _failed(self, what: str) -> None:
        if what not in self.failed_restore:
            self.failed_restore.append(what)

    def final_restore(self) -> None:
        """The user's objects as they were before the comparison (the RNG goes on as drawn): the
        same gradient and optimizer-state tensor objects as before, holding their values."""
        import torch

        self.restore(rng=False)
        with torch.no_grad():
            for (p, _, grad, _), orig in zip(self._params, self._orig_grads):
                if orig is not None and grad is not None:
                    try:
                        if orig.shape == grad.shape and orig.dtype == grad.dtype:
                            orig.copy_(grad)
                        p.grad = orig
                    except Exception:  # noqa: BLE001 - the clone stays: same values
                        pass
            for opt, state, _ in self._opts:
                orig = self._orig_state.get(id(opt), {})
                try:
                    for p, st in orig.items():
                        saved = state.get(p, {})
                        for k, v in list(st.items()):
                            if (
                                isinstance(v, torch.Tensor)
                                and isinstance(saved.get(k), torch.Tensor)
                                and v.shape == saved[k].shape
                                and v.dtype == saved[k].dtype
                            ):
                                v.copy_(saved[k])
                            elif k in saved:
                                st[k] = saved[k]
                        opt.state[p] = st
                except Exception:  # noqa: BLE001 - the restored copies stay: same values
                    pass

    # -- effects ------------------------------------------------------------------------------
    def effects(self, reach: Reach, names: dict[int, str] | None = None) -> dict[str, Any]:
        """What the last call changed in ``reach`` (a variant's own), keyed "grad NAME", "value NAME",
        "buffer NAME", "optimizer state NAME.KEY"; a gradient the call cleared is None.  ``names``
        (id -> name) renames shared tensors to the baseline's names."""
        import torch

        from workbench.variants.cheats import same_values

        names = names or {}
        saved = {id(p): (data, grad) for p, data, grad, _ in self._params}
        flags = {id(p): flag for p, _, _, flag in self._params}
        out: dict[str, Any] = {}
        for own, p in reach.params.items():
            name = names.get(id(p), own)
            data, grad = saved.get(id(p), (_MISSING, _MISSING))
            g = p.grad
            if grad is _MISSING or not _same(g, grad, same_values):
                out[f"grad {name}"] = None if g is None else g.detach().clone()
            if data is _MISSING or not _same(p.detach(), data, same_values):
                out[f"value {name}"] = p.detach().clone()
            if id(p) in flags and bool(p.requires_grad) != flags[id(p)]:
                out[f"requires_grad {name}"] = bool(p.requires_grad)
        saved_b = {id(b): data for b, data in self._buffers}
        for own, b in reach.buffers.items():
            name = names.get(id(b), own)
            data = saved_b.get(id(b), _MISSING)
            if data is _MISSING or not _same(b.detach(), data, same_values):
                out[f"buffer {name}"] = b.detach().clone()
        saved_d = {id(t): (data, version) for t, data, version in self._data}
        for own, t in reach.data.items():
            if id(t) not in saved_d:
                continue  # over the snapshot budget (said in a note)
            data, version = saved_d[id(t)]
            if (version is None or _version(t) != version) and not _same(t.detach(), data, same_values):
                out[f"input {names.get(id(t), own)}"] = t.detach().clone()
        saved_o = {id(o): state for o, state, _ in self._opts}
        all_names = {**{id(t): n for n, t in reach.params.items()}, **names}
        for i, opt in enumerate(reach.optimizers):
            if id(opt) not in saved_o:
                continue  # not snapshotted (said in a note): not compared either
            before = saved_o[id(opt)]
            try:
                items = list(opt.state.items())
            except Exception:  # noqa: BLE001
                continue
            for j, (p, st) in enumerate(items):
                pname = all_names.get(id(p), f"optimizer[{i}].param[{j}]")
                old = before.get(p, {})
                for k, v in dict(st).items():
                    prev = old.get(k, _MISSING)
                    if isinstance(v, torch.Tensor):
                        if prev is _MISSING or not _same(v.detach(), prev, same_values):
                            out[f"optimizer state {pname}.{k}"] = v.detach().clone()
                    elif isinstance(v, (int, float)) and not isinstance(v, bool) and v != prev:
                        out[f"optimizer state {pname}.{k}"] = float(v)
        return out


def _version(t: Any) -> int | None:
    """The tensor's version counter (bumped by every in-place write); None where it has none
    (an inference tensor): then it is compared and restored by value every time."""
    try:
        return int(t._version)
    except Exception:  # noqa: BLE001
        return None


def _nbytes(t: Any) -> int:
    try:
        return int(t.numel()) * int(t.element_size())
    except Exception:  # noqa: BLE001
        return 0


def _fresh(v: Any) -> Any:
    try:
        return copy.deepcopy(v)
    except Exception:  # noqa: BLE001 - kept by reference (noted when snapshotted)
        return v


def _same(a: Any, b: Any, same_values: Any) -> bool:
    if a is None or b is None:
        return a is None and b is None
    if b is _MISSING:
        return False
    try:
        return a.dtype == b.dtype and a.device == b.device and same_values(a, b)
    except Exception:  # noqa: BLE001 - unreadable: called changed
        return False


def effect_kind(path: str) -> str:
    """ "grad"/"value"/"buffer"/"optimizer state" for an effect path, "" for anything else."""
    for kind in ("grad ", "value ", "buffer ", "optimizer state ", "requires_grad ", "input "):
        if path.startswith(kind):
            return kind.strip()
    return ""


def compare_effects(
    got: dict[str, Any], expected: dict[str, Any], overrides: dict[str, tuple[float, float]] | None = None
) -> list[Any]:
    """A candidate's effects against the baseline's (the baseline's own values are the reference):
    each changed gradient, parameter value, buffer and optimizer state, by name, with the gradient
    tolerances; a change one call makes and the other does not fails."""
    from workbench.variants.output_check import OutputCheck, check_outputs, scaled_checks
    from workbench.variants.tolerances import gradient_tolerance_overrides

    tol = gradient_tolerance_overrides(overrides)
    checks = []
    for path in list(expected) + [p for p in got if p not in expected]:
        exp, mine = expected.get(path, _MISSING), got.get(path, _MISSING)
        if mine is _MISSING:
            what = "cleared" if exp is None else "changed"
            checks.append(OutputCheck(path, False, f"the baseline's call {what} it, this call leaves it as it was"))
        elif exp is _MISSING and path.startswith("input "):
            checks.append(
                OutputCheck(
                    path,
                    False,
                    "input changed in place by the call (the baseline leaves it unchanged): code reading it "
                    "afterwards gets other values",
                )
            )
        elif exp is _MISSING:
            checks.append(OutputCheck(path, False, "this call changes it, the baseline's call leaves it as it was"))
        elif exp is None or mine is None:
            if (exp is None) != (mine is None):
                checks.append(OutputCheck(path, False, "cleared by one call and set by the other"))
        else:
            if path.startswith("value "):
                mine = _noise_steps_as_expected(mine, exp, expected.get("grad " + path[len("value ") :]), tol)
            checks += [c.with_path(path) for c in scaled_checks(mine, exp, exp, tol)]
    return checks


def _noise_steps_as_expected(mine: Any, exp: Any, grad: Any, tol: dict[str, tuple[float, float]]) -> Any:
    """``mine`` with the elements whose baseline gradient is zero within the gradient tolerance (at most
    atol x its largest |value|: the gradient check cannot tell them from 0) set to the baseline's new value.

    An adaptive optimizer (Adam, AdamW, RMSprop) divides each gradient by its own running magnitude: a
    gradient that is 0 in exact arithmetic and 1e-10 by rounding (the key bias of attention: softmax is
    invariant to it) moves its parameter by a full ``lr`` in the direction of the rounding's sign, which
    any reordering of the sums flips.  Those steps are noise, not a wrong update; the gradients
    themselves are still compared, element by element."""
    try:
        import torch

        if not (
            isinstance(grad, torch.Tensor)
            and isinstance(mine, torch.Tensor)
            and grad.shape == exp.shape == mine.shape
            and grad.is_floating_point()
            and grad.numel()
        ):
            return mine
        _, atol = tol.get(str(grad.dtype).replace("torch.", ""), tol.get("float32", (0.0, 0.0)))
        g = grad.detach().abs()
        largest = float(g.max())
        if not (largest > 0 and math.isfinite(largest)):
            return mine
        zero = g <= atol * largest
        if not bool(zero.any()) or bool(zero.all()):
            return mine
        return torch.where(zero.to(mine.device), exp.to(mine.dtype), mine)
    except Exception:  # noqa: BLE001 - the plain comparison stands
        return mine
