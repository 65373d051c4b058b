"""Where the study measures: the baseline's profile, its ranked hypotheses, a round's comparison,
and the reset procedure that puts the process back as the baseline found it. Each is one
function here (``wb.profile``, ``run.hypotheses``, ``wb.compare``), so the study's bookkeeping
can be exercised on recorded runs and seeded clocks."""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any, Callable, Iterator, Mapping

if TYPE_CHECKING:
    from workbench.capture.run import RunRecord
    from workbench.hypotheses.hypothesis import Hypothesis
    from workbench.variants.results import Comparison
    from workbench.variants.spec import VariantLike

RESTORED_SETTINGS = ("num_threads", "grad_enabled")


def profile_callable(fn: Callable[..., Any], args: tuple[Any, ...], options: Mapping[str, Any]) -> RunRecord:
    """``wb.profile(fn, *args, **options)``: the baseline's clean timing, traced pass, environment."""
    from workbench.capture.profile import profile
    from workbench.devices.fingerprint import environment_fingerprint

    return profile(fn, *args, environment=environment_fingerprint(), **dict(options))


def timed_callable(fn: Callable[..., Any], args: tuple[Any, ...], mode: str) -> Callable[..., Any]:
    """What a round times for this baseline, so that the baseline is profiled as its rounds time
    it: ``fn`` itself on an inference path; on a training path the training step ``wb.compare``
    times (forward, then backward of every output that requires grad: ``training_step``), so the
    recorded median, the trace and the hypotheses see the backward pass too."""
    if mode != "training":
        return fn
    from workbench.variants.output_check import training_paths, training_step

    step = training_step(fn, training_paths(fn, args))
    step.__wrapped__ = fn  # type: ignore[attr-defined]  # the user's function under it
    step.__qualname__ = getattr(fn, "__qualname__", step.__name__)
    return step


def ranked_hypotheses(run: RunRecord) -> list[Hypothesis]:
    """The run's hypotheses, ranked best first (``workbench.hypotheses.diagnose``)."""
    from workbench.hypotheses import diagnose

    return list(diagnose(run).hypotheses)


def compare_variants(
    variants: Mapping[str, VariantLike],
    make_inputs: Callable[[], Any] | None,
    baseline: str,
    options: Mapping[str, Any],
) -> Comparison:
    """``wb.compare`` with the baseline first: every variant timed interleaved with it."""
    from workbench.variants.compare import compare

    return compare(variants, inputs=make_inputs, baseline=baseline, **dict(options))


def seed_everything(seed: int) -> None:
    import random

    import torch

    random.seed(seed)
    torch.manual_seed(seed)
    try:
        import numpy as np

        np.random.seed(seed % (2**32))
    except ImportError:  # pragma: no cover - numpy is a dependency
        pass


def seeded_inputs(make_inputs: Callable[[], Any] | None, seed: int) -> tuple[Any, ...]:
    """The inputs as the reset procedure builds them: seeds set, then ``make_inputs()``."""
    seed_everything(seed)
    if make_inputs is None:
        return ()
    value = make_inputs()
    return value if isinstance(value, tuple) else (value,)


@contextlib.contextmanager
def restored(settings: Mapping[str, Any]) -> Iterator[list[str]]:
    """Apply the torch settings recorded with the baseline (threads, grad mode) for the block and
    restore what was there before; yields what was changed, in words."""
    import torch

    before = {"num_threads": torch.get_num_threads(), "grad_enabled": torch.is_grad_enabled()}
    changed = []
    threads = settings.get("num_threads")
    if isinstance(threads, int) and threads > 0 and threads != before["num_threads"]:
        torch.set_num_threads(threads)
        changed.append(f"threads {before['num_threads']} -> {threads}")
    grad = settings.get("grad_enabled")
    if isinstance(grad, bool) and grad != before["grad_enabled"]:
        torch.set_grad_enabled(grad)
        changed.append(f"grad mode {before['grad_enabled']} -> {grad}")
    try:
        yield changed
    finally:
        if torch.get_num_threads() != before["num_threads"]:
            torch.set_num_threads(before["num_threads"])
        if torch.is_grad_enabled() != before["grad_enabled"]:
            torch.set_grad_enabled(bool(before["grad_enabled"]))


def reset_procedure(seed: int, make_inputs: Callable[[], Any] | None, settings: Mapping[str, Any]) -> tuple[str, ...]:
    """The reset/restore procedure, in words, as each round applies it."""
    name = getattr(make_inputs, "__qualname__", None) or getattr(make_inputs, "__name__", None) or "make_inputs"
    steps = [
        f"seed python, numpy and torch with {seed}, then rebuild the inputs from {name}() "
        f"(fresh values for every correctness check, drawn after the seed)"
        if make_inputs
        else f"seed python, numpy and torch with {seed}; the callable takes no inputs"
    ]
    shown = {k: settings[k] for k in RESTORED_SETTINGS if k in settings}
    if shown:
        steps.append(
            "restore the torch settings recorded with the baseline for the round ("
            + ", ".join(f"{k}={v}" for k, v in shown.items())
            + "), and what was there before after it"
        )
    steps.append(
        "every variant call runs under wb.compare's state guard: process-wide torch settings it "
        "changes are restored after each call and flagged"
    )
    steps.append(
        "compiled caches are kept between rounds: compile time is reported apart as setup, never in the timed samples"
    )
    return tuple(steps)
