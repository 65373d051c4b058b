"""Recorded and synthetic pieces for the study's tests: a stand-in for the profile (a ProfileRun
built from given samples, a fixed environment) and the hypotheses it ranks, so that the study's
bookkeeping is tested without timing this machine. Comparisons run through the real wb.compare on
a seeded fake clock (``FakeTimer``)."""

from __future__ import annotations

import sys
import textwrap

import pytest

torch = pytest.importorskip("torch")

from workbench.api.run import ProfileRun  # noqa: E402
from workbench.capture.compile_diag import CompileDiagnostics  # noqa: E402
from workbench.capture.run import RunRecord  # noqa: E402
from workbench.hypotheses.hypothesis import Evidence, Hypothesis  # noqa: E402
from workbench.measurement import Measurement  # noqa: E402
from workbench.study import identity, measure  # noqa: E402

ENVIRONMENT = {
    "recorded_at": "2026-01-01T00:00:00+00:00",
    "workbench_version": "0.1.0",
    "host": {"python": "3.12", "cpu_model": "Recorded CPU", "logical_cpus": 2, "env": {}},
    "torch": {
        "available": True,
        "version": "2.x",
        "num_threads": 1,
        "initial_seed": 123,
        "gpu": {"available": False, "reason": "recorded"},
    },
    "argv0": "recorded",
}


def hypothesis(
    category="memory_bound",
    *,
    rule="cpu_memory_bound_ops",
    stake=1.2,
    suggested=("fused",),
    confidence="medium",
    scope="host thread",
):
    return Hypothesis(
        category=category,
        title=f"{category} symptom",
        observed="recorded",
        mechanism="recorded",
        evidence=(Evidence("share_pct", 80.0, "%", 50.0),),
        time_at_stake_ms=stake,
        predicted_effect="fusing the chain leaves one pass",
        falsifier="fuse it: if time does not drop, rejected",
        confidence=confidence,
        suggested_variants=suggested,
        rule=rule,
        scope=scope,
    )


def recorded_run(name, median_ms=2.0, n=20, seed=0):
    import numpy as np

    rng = np.random.default_rng(seed)
    samples = tuple(float(median_ms * x) for x in np.exp(rng.normal(0, 0.02, n)))
    return ProfileRun(
        RunRecord(
            name=name,
            timing=Measurement(samples_ms=samples, label=name),
            cold_ms=median_ms * 3,
            warmup=1,
            repeat=n,
            device="cpu",
            compile=CompileDiagnostics(),
            environment=dict(ENVIRONMENT),
            settings={"num_threads": 1, "grad_enabled": True},
            memory={},
            profiler_warmup="recorded",
            trace_path=None,
            trace_note="trace off (recorded)",
            created_at="2026-01-01T00:00:00+00:00",
        )
    )


class Lab:
    """What the study's profile seam returns: ``medians[name]`` and ``hypotheses[name]``, where
    name is the profiled function's name (``compiled:`` in front for a compiled variant)."""

    def __init__(self):
        self.medians: dict[str, float] = {}
        self.hypotheses: dict[str, list] = {}
        self.profiled: list[str] = []

    @staticmethod
    def name_of(fn):
        kind = getattr(fn, "kind", None)
        base = getattr(identity.unwrap(fn), "__name__", "fn")
        return f"{kind}:{base}" if kind and kind not in ("user", "eager") else base

    def profile(self, fn, args, options):
        name = self.name_of(fn)
        self.profiled.append(name)
        fn(*args)  # it must run on the inputs the reset procedure built
        return recorded_run(name, self.medians.get(name, 2.0))

    def ranked(self, run):
        return list(self.hypotheses.get(run.name, ()))


@pytest.fixture
def lab(monkeypatch):
    lab = Lab()
    monkeypatch.setattr(measure, "profile_callable", lab.profile)
    monkeypatch.setattr(measure, "ranked_hypotheses", lab.ranked)
    return lab


@pytest.fixture
def workload_module(tmp_path, monkeypatch):
    """An importable module of workload functions (so a reopened study can import them again)."""
    folder = tmp_path / "mods"
    folder.mkdir()
    name = f"study_workload_{abs(hash(str(tmp_path))) % 10**8}"
    (folder / f"{name}.py").write_text(
        textwrap.dedent("""
        import torch

        def base(x):
            return (x * 2.0 + 1.0).relu() * 0.5

        def fused(x):
            return (x * 2.0 + 1.0).relu() * 0.5

        def other(x):
            return (x * 2.0 + 1.0).relu() * 0.5

        def slower(x):
            return (x * 2.0 + 1.0).relu() * 0.5

        def wrong(x):
            return (x * 2.0 + 1.01).relu() * 0.5

        def make_inputs():
            return (torch.randn(64),)
    """)
    )
    monkeypatch.syspath_prepend(str(folder))
    import importlib

    module = importlib.import_module(name)
    yield module
    sys.modules.pop(name, None)


# -- a started study and one after a round (fake profiles, a seeded fake clock) --------------
FAKE = dict(checks=1, profile=False, budget_s=0.5, min_rounds=10)


def _timer(**ms):
    from workbench.variants.clock import FakeTimer

    return FakeTimer({"baseline": 2.0, **ms}, noise=0.02, seed=0, call=False)


@pytest.fixture
def started(lab, workload_module, tmp_path):
    mod = workload_module
    lab.hypotheses["base"] = [
        hypothesis("memory_bound", suggested=("fused",), stake=1.2),
        hypothesis("launch_overhead", rule="cpu_dispatch_overhead", suggested=("other",), stake=0.8, confidence="high"),
    ]
    from workbench.study import Study

    study = Study("chain", folder=tmp_path / "study")
    base = study.set_baseline(mod.base, mod.make_inputs, seed=7)
    return study, base, mod


@pytest.fixture
def after_round(started):
    study, base, mod = started
    rnd = study.run_round(
        {"fused": mod.fused, "other": mod.other, "wrong": mod.wrong},
        timer=_timer(fused=1.0, other=2.0, wrong=1.0),
        **FAKE,
    )
    return study, base, mod, rnd
