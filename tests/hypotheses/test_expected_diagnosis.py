"""Real GPU traces: the expected categories rank in the top three, with the evidence numbers
that Holistic Trace Analysis computes on the same trace (tests/data/expected_diagnosis/*.json)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from workbench.hypotheses import diagnose_trace_full
from workbench.hypotheses.diagnose import RULE_FAILED

ROOT = Path(__file__).resolve().parents[2]
EXPECTED = sorted((ROOT / "tests" / "data" / "expected_diagnosis").glob("*.json"))
HEAVY = {"tracelens_h100_owlv2"}


# Sets copied into tests/data/gpu/ (byte-identical after decompression to ../shared/traces; licences
# in tests/data): used first, so these sets are judged in CI without ../shared.
COPIED = {
    "hta_a100_alexnet": "a100_alexnet.json.gz",
    "hta_v100_ddp_resnet_1rank": "v100_ns_resolution.json.gz",
    "kineto_v100_resnet50_2021": "v100_resnet50_2021.json.gz",
    "param_v100_dlrm_8rank": "dlrm_8rank",
    "tracelens_h100_bert_small": "h100_bert_small.json.gz",
    "tracelens_mi300x_sglang_prefilldecode": "mi300x_sglang.json.gz",
}


def trace_dir(name: str) -> Path | None:
    copy = ROOT / "tests" / "data" / "gpu" / COPIED.get(name, "-")
    if name in COPIED and copy.exists():
        return copy
    base = ROOT.parent / "shared" / "traces"
    if (base / name).is_dir() and any((base / name).glob("*.json*")):
        return base / name
    return None


def _params():
    for path in EXPECTED:
        marks = [pytest.mark.slow] if path.stem in HEAVY else []
        yield pytest.param(path, id=path.stem, marks=marks)


@pytest.mark.parametrize("expected_path", list(_params()))
def test_expected_categories_and_evidence(expected_path):
    import workbench as wb

    spec = json.loads(expected_path.read_text())
    folder = trace_dir(spec["set"])
    if folder is None:
        pytest.skip(f"trace set {spec['set']} is neither copied into tests/data/gpu nor in ../shared/traces")
    from workbench.hypotheses.facts import TraceFacts

    facts = TraceFacts(wb.load_trace(folder))
    diag = diagnose_trace_full(facts)
    assert not [n for n in diag.not_judged if n.reason.startswith(RULE_FAILED)], diag.statements()
    top3 = [h.category for h in diag.hypotheses[:3]]
    for category in spec["expected_in_top3"]:
        assert category in top3, f"{spec['set']}: {category} not in top three {top3}"
    for ev in spec["evidence"]:
        hyps = [h for h in diag.hypotheses if h.rule == ev["rule"] and (not ev.get("scope") or h.scope == ev["scope"])]
        assert hyps, f"{spec['set']}: rule {ev['rule']} did not fire ({ev.get('scope', '')})"
        values = [e.value for h in hyps for e in h.evidence if e.metric == ev["metric"]]
        assert values, f"{spec['set']}: no evidence {ev['metric']} on {ev['rule']}"
        assert values[0] == pytest.approx(ev["value"], abs=ev["tolerance"]), (spec["set"], ev)
    for h in diag.hypotheses:
        assert h.time_at_stake_ms <= facts.window_us / 1e3 + 1e-6
