"""Bad input gets the hypotheses its evidence supports and a statement of what was not judged."""

from __future__ import annotations

import json

import pytest

import workbench as wb
from workbench.hypotheses import diagnose
from workbench.hypotheses.diagnose import RULE_FAILED


def op(name, ts, dur, tid=1):
    return {"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": tid, "ts": ts, "dur": dur, "args": {}}


CASES = {
    "single_event": [op("aten::add", 0, 5)],
    "only_cpu_ops": [op("aten::add", 10 * i, 5) for i in range(30)],
    "no_steps_no_gpu": [op("aten::mm", 0, 100), op("aten::relu", 200, 10)],
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_input_is_judged_without_exception(case, tmp_path):
    path = tmp_path / f"{case}.json"
    path.write_text(json.dumps({"traceEvents": CASES[case]}))
    diag = diagnose(wb.load_trace(path))
    text = "\n".join(diag.statements())
    assert "no GPU activity in the trace" in text
    assert "device_idle_host_wait" in text
    assert not [n for n in diag.not_judged if n.reason.startswith(RULE_FAILED)], text
    assert all(h.has_evidence for h in diag.hypotheses)
    assert "Not judged:" in diag.to_text()
