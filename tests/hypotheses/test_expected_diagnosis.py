"""Real GPU traces: the expected categories rank in the top three, with the evidence numbers
that Holistic Trace Analysis computes on the same trace (tests/data/expected_diagnosis/*.json)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from workbench.hypotheses import diagnose
from workbench.hypotheses.diagnose import RULE_FAILED
from workbench.hypotheses.fold_ranks import scope_ranks

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
    diag = diagnose(facts)
    assert not [n for n in diag.not_judged if n.reason.startswith(RULE_FAILED)], diag.statements()
    top3 = [h.category for h in diag.hypotheses[:3]]
    for category in spec["expected_in_top3"]:
        assert category in top3, f"{spec['set']}: {category} not in top three {top3}"
    for ev in spec["evidence"]:
        values = _evidence_values(diag.hypotheses, ev)
        assert values, f"{spec['set']}: rule {ev['rule']} gave no {ev['metric']} ({ev.get('scope', '')})"
        assert values[0] == pytest.approx(ev["value"], abs=ev["tolerance"]), (spec["set"], ev)
    for h in diag.hypotheses:
        assert h.time_at_stake_ms <= facts.window_us / 1e3 + 1e-6
    if "expected_first" in spec:
        assert diag.hypotheses and diag.hypotheses[0].category == spec["expected_first"], (
            spec["set"],
            [h.category for h in diag.hypotheses[:3]],
        )
    for category, top in spec.get("expected_in_top", {}).items():
        assert category in [h.category for h in diag.hypotheses[:top]], (spec["set"], category, top)
    if spec.get("stragglers_named"):
        imb = [h for h in diag.hypotheses if h.category == "load_imbalance"]
        assert imb and set(scope_ranks(imb[0].scope)) == set(spec["stragglers_named"]), (
            spec["set"],
            [h.scope for h in imb],
        )
    for must_not in spec.get("must_not", ()):
        assert not _violations(diag, facts, must_not), (
            spec["set"],
            must_not["why"],
            _violations(diag, facts, must_not),
        )


def _evidence_values(hypotheses, ev) -> list[float]:
    """The evidence value of ``ev["metric"]`` on rule ``ev["rule"]``; with a ``scope`` ("rank 1"), that rank's value:
    the hypothesis scoped to it, or the rank's row of a hypothesis folded over several ranks."""
    from workbench.hypotheses.fold_ranks import scope_ranks

    out = []
    want = scope_ranks(ev.get("scope", ""))
    for h in hypotheses:
        if h.rule != ev["rule"]:
            continue
        if not want or h.scope == ev.get("scope"):
            out += [e.value for e in h.evidence if e.metric == ev["metric"]]
        elif want[0] in scope_ranks(h.scope):
            out += [
                r[ev["metric"]]
                for e in h.evidence
                if e.metric.endswith("_spread_across_ranks")
                for r in e.rows
                if r.get("rank") == want[0] and ev["metric"] in r
            ]
    return out


def _gpu_busy_ms(facts) -> float:
    return float(facts.gpu_ranks["busy_us"].max()) / 1e3 if facts.has_gpu else 0.0


def _violations(diag, facts, must_not: dict) -> list[str]:
    """What in the diagnosis breaks one "must not" line of an expected-diagnosis file (empty: none)."""
    import re

    sel = [
        h
        for h in diag.hypotheses
        if (not must_not.get("rule") or h.rule == must_not["rule"])
        and (not must_not.get("category") or h.category == must_not["category"])
    ]
    bad = []
    if must_not.get("fire"):
        bad += [f"{h.rule} fired: {h.title}" for h in sel]
    if must_not.get("cites"):
        pattern = re.compile(must_not["cites"])
        bad += [
            f"{h.rule} cites {v}"
            for h in sel
            for e in h.evidence
            for r in e.rows
            for v in r.values()
            if isinstance(v, str) and pattern.search(v)
        ]
    if must_not.get("title"):
        pattern = re.compile(must_not["title"])
        bad += [f"{h.rule}: {h.title}" for h in sel if pattern.search(h.title)]
    if must_not.get("stake_above_gpu_busy"):
        busy = _gpu_busy_ms(facts)
        bad += [
            f"{h.rule} stakes {h.time_at_stake_ms:.3f} ms > GPU busy {busy:.3f} ms"
            for h in sel
            if h.time_at_stake_ms > busy + 1e-9
        ]
    if must_not.get("repeated_in_top"):
        top = [(h.rule, h.category) for h in diag.hypotheses[: must_not["repeated_in_top"]]]
        bad += [f"{key} repeated" for key in set(top) if top.count(key) > 1]
    if must_not.get("pct_above") is not None:
        limit = float(must_not["pct_above"])
        for h in sel:
            bad += [
                f"{h.rule}: {e.metric} = {e.value}"
                for e in h.evidence
                if e.unit == "%" and e.value > limit and not re.search(r"spread|excess", e.metric)
            ]
            bad += [
                f"{h.rule}: {m}" for m in re.findall(r"([\d.]+)% of", h.title + " " + h.observed) if float(m) > limit
            ]
    return bad


def test_must_not_lines_catch_the_wrong_leads():
    """The "must not" checks find what they are for (on hand-made diagnoses: each line, one wrong lead)."""
    from types import SimpleNamespace

    from workbench.hypotheses.diagnose import Diagnosis
    from workbench.hypotheses.hypothesis import Evidence, Hypothesis

    def hyp(category, rule, title="t", stake=1.0, rows=(), unit="%", value=50.0, scope="all ranks", observed="o"):
        return Hypothesis(
            category=category,
            title=title,
            observed=observed,
            mechanism="m",
            evidence=(Evidence("x_pct", value, unit, rows=rows),),
            time_at_stake_ms=stake,
            predicted_effect="p",
            falsifier="f",
            rule=rule,
            scope=scope,
        )

    facts = SimpleNamespace(has_gpu=True, gpu_ranks=__import__("pandas").DataFrame({"busy_us": [310.0]}))
    fp32 = hyp("precision", "fp32_matmul_without_tf32", rows=({"name": "flash_fwd_kernel<cutlass::bfloat16_t>"},))
    assert _violations(Diagnosis((fp32,)), facts, {"rule": "fp32_matmul_without_tf32", "fire": True})
    assert _violations(Diagnosis((fp32,)), facts, {"category": "precision", "cites": "bfloat16_t"})
    big = hyp("precision", "half_matmul_unaligned", stake=0.99)
    assert _violations(Diagnosis((big,)), facts, {"stake_above_gpu_busy": True})
    assert not _violations(
        Diagnosis((hyp("precision", "half_matmul_unaligned", stake=0.02),)), facts, {"stake_above_gpu_busy": True}
    )
    chain = hyp("memory_bound", "memory_bound_kernels", rows=({"name": "sm90_xmma_gemm_bf16bf16_bf16f32"},))
    assert _violations(Diagnosis((chain,)), facts, {"category": "memory_bound", "cites": "(?i)gemm|flash"})
    twice = (
        hyp("host_bound", "device_idle_host_wait", scope="rank 0"),
        hyp("host_bound", "device_idle_host_wait", scope="rank 1"),
    )
    assert _violations(Diagnosis(twice), facts, {"repeated_in_top": 10})
    summed = hyp("host_sync", "host_sync_calls", value=133.6, observed="26 ms (133.6% of the trace)")
    assert len(_violations(Diagnosis((summed,)), facts, {"pct_above": 100})) == 2
