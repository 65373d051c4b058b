"""Per-step work stays linear: the diagnosis of a trace with 10x the profiler steps does about the same
number of table operations (counted, not timed): no rule or analysis filters the whole op table once
per step (20,000 steps took 48 s in hypotheses() when two rules did)."""

from __future__ import annotations

import json
import warnings

import pandas as pd

from workbench.api.trace import load_trace


def _trace(tmp_path, steps: int):
    events, t = [], 0
    for s in range(steps):
        events += [
            {"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{s}", "pid": 1, "tid": 1, "ts": t, "dur": 100},
            {
                "ph": "X",
                "cat": "cpu_op",
                "name": "aten::mm",
                "pid": 1,
                "tid": 1,
                "ts": t + 10,
                "dur": 20,
                "args": {"Input Dims": [[64, 64], [64, 64]], "Input type": ["float", "float"]},
            },
            {
                "ph": "X",
                "cat": "cpu_op",
                "name": "aten::add",
                "pid": 1,
                "tid": 1,
                "ts": t + 40,
                "dur": 20,
                "args": {"Input Dims": [[64, 64], [64, 64]], "Input type": ["float", "float"]},
            },
            {
                "ph": "X",
                "cat": "cpu_op",
                "name": "Optimizer.step#SGD.step",
                "pid": 1,
                "tid": 1,
                "ts": t + 70,
                "dur": 20,
            },
        ]
        t += 120
    path = tmp_path / f"steps{steps}.json"
    path.write_text(json.dumps({"traceEvents": events}))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return load_trace(path, cache=False)


def _table_operations(monkeypatch, trace) -> int:
    """DataFrame column/row selections made while the trace is diagnosed."""
    count = [0]
    real = pd.DataFrame.__getitem__

    def counting(self, key):
        count[0] += 1
        return real(self, key)

    with monkeypatch.context() as m:
        m.setattr(pd.DataFrame, "__getitem__", counting)
        diagnosis = trace.diagnosis()
    failed = [n for n in diagnosis.not_judged if "the rule raised" in n.reason]
    assert not failed, failed
    return count[0]


def test_diagnosis_work_does_not_grow_with_the_number_of_steps(monkeypatch, tmp_path):
    few, many = _trace(tmp_path, 200), _trace(tmp_path, 2_000)
    assert len(many.annotations) == 2_000
    small, large = _table_operations(monkeypatch, few), _table_operations(monkeypatch, many)
    assert large < 1.5 * small + 50, (small, large)  # per-step filtering would add thousands


def test_the_two_rules_that_were_quadratic_give_the_same_answers(tmp_path):
    """gaps_in_windows (cpu_host_gaps, cpu_dispatch_overhead) against the per-window reference."""
    import numpy as np

    from workbench.analysis.intervals import union
    from workbench.hypotheses.rules.host_ops import gaps_in_windows

    rng = np.random.default_rng(7)
    ts = np.sort(rng.uniform(0, 1e5, 400))
    ops = pd.DataFrame({"ts_us": ts, "end_us": ts + rng.exponential(150, 400)})
    wins = [(float(a), float(a + d)) for a, d in zip(rng.uniform(-100, 1e5, 300), rng.uniform(0, 3000, 300))]
    wins += [(5.0, 5.0), (2e5, 2e5 + 10)]
    expected = []
    for a, b in wins:
        w = ops[(ops["end_us"] > a) & (ops["ts_us"] < b)]
        s = np.concatenate([[a - 1e-9], np.clip(w["ts_us"], a, b), [b]])
        e = np.concatenate([[a], np.clip(w["end_us"], a, b), [b + 1e-9]])
        us, ue = union(s, e)
        expected.append(pd.DataFrame({"gap_start_us": ue[:-1], "gap_us": us[1:] - ue[:-1]}))
    expected = pd.concat(expected, ignore_index=True)
    got = gaps_in_windows(ops, wins)
    assert len(got) == len(expected)
    assert np.allclose(got["gap_start_us"], expected["gap_start_us"]) and np.allclose(got["gap_us"], expected["gap_us"])
