"""The report's experiments section: which variants run, and every way it can have none."""

import json
from types import SimpleNamespace

from workbench.report import sections
from workbench.report.experiments import load_experiments, suggested_variants, write_experiments
from workbench.report.workload import workload_inputs

HOSTILE = "<script>alert(1)</script>"


def _h(*names, title="t"):
    return SimpleNamespace(suggested_variants=names, title=title)


def test_suggested_variants_in_rank_order_without_the_baseline_or_triton():
    hyps = [_h(), _h("compiled", "triton", title="first"), _h("cuda_graph", "compiled", "no_such"), _h("eager")]
    names, first = suggested_variants(hyps)
    assert names == ["compiled", "cuda_graph"] and first.title == "first"
    assert suggested_variants([_h("triton")]) == ([], None)


def test_demo_inputs_are_fresh_each_call():
    func, inputs = workload_inputs("workbench.workloads.demo:workload")
    (x1, _w1), (x2, _w2) = inputs(), inputs()
    assert x1.shape == x2.shape and not bool((x1 == x2).all())
    assert callable(func)


def test_a_failure_is_written_down_and_shown_escaped(tmp_path):
    run = SimpleNamespace(hypotheses=[_h("compiled")])
    path, summary = write_experiments(tmp_path, f"no_such_module_{HOSTILE}:f", run)
    doc = load_experiments(path)
    assert "error" in doc and summary == doc and "no_such_module" in doc["error"]
    html = sections.experiments_html(doc)
    assert "could not run" in html and "<script>" not in html and "&lt;script&gt;" in html


def test_no_suggestion_turned_off_and_bundle_reports_say_why(tmp_path):
    path, _ = write_experiments(tmp_path, "workbench.workloads.demo:workload", SimpleNamespace(hypotheses=[_h()]))
    assert "No experiments: no hypothesis suggests" in sections.experiments_html(load_experiments(path))
    path, _ = write_experiments(
        tmp_path, "workbench.workloads.demo:workload", SimpleNamespace(hypotheses=[]), enabled=False
    )
    assert "turned off" in sections.experiments_html(load_experiments(path))
    assert "saved run bundle" in sections.experiments_html(load_experiments(""))


def test_decision_record_html_escapes_every_field():
    record = {
        "decision": "keep",
        "variant": HOSTILE,
        "reason": "r",
        "problem": HOSTILE,
        "evidence": [HOSTILE, "speedup x2"],
        "failure_cases": [],
    }
    html = sections.decision_record_html(record)
    assert "<script>" not in html and html.count("&lt;script&gt;") == 3
    assert "<li>speedup x2</li>" in html and "<h4>Failure cases</h4><ul><li>none</li></ul>" in html
    json.dumps(record)


def _comparison(eager_samples):
    return {
        "baseline": "eager",
        "results": [
            {"name": "eager", "timing": {"samples_ms": eager_samples}},
            {"name": "compiled", "timing": {"samples_ms": [1.0]}},
        ],
    }


def test_the_experiments_baseline_is_held_against_the_headline():
    from workbench.report.experiments import headline_agreement

    agree = headline_agreement(4.0, _comparison([4.4, 4.5, 4.6]), 0.5, 0.7)
    assert agree["agree"] and agree["ratio"] == 4.5 / 4.0 and agree["note"] == ""
    assert "agrees with the headline" in sections.agreement_html(agree)

    apart = headline_agreement(4.0, _comparison([8.2, 8.4, 8.6]), 0.5, 3.7)
    assert apart["agree"] is False and apart["ratio"] == 2.1
    assert "2.10x the headline" in apart["note"] and "load average 0.50 while timing, 3.70 during" in apart["note"]
    html = sections.agreement_html(apart)
    assert "Caution" in html and "8.4" in html

    assert headline_agreement(4.0, _comparison([]), None, None)["agree"] is None
    assert sections.agreement_html(headline_agreement(4.0, {"results": []}, None, None)) == ""
