"""``workbench rules``: the rule catalog listed from its declared data (thresholds, branches, words)."""

from __future__ import annotations

from workbench.cli import main
from workbench.hypotheses.catalog import list_rules


def test_the_catalog_lists_every_rule_with_its_thresholds_and_branches(capsys):
    assert main(["rules"]) == 0
    out = capsys.readouterr().out
    for r in list_rules():
        assert f"{r.name}  [{r.category}, {r.scope}]" in out
    assert "float64_compute  [precision, trace]  branches: cpu, gpu" in out
    assert "large_bytes=33,554,432" in out  # thresholds as numbers people read


def test_one_rule_shows_its_finding_and_each_branchs_templates(capsys):
    assert main(["rules", "float64_compute"]) == 0
    out = capsys.readouterr().out
    assert "thresholds: min_share_pct=10" in out
    assert "finding: Float64Finding (share_pct, n, float64_ms, whole_ms, summed_over, unknown)" in out
    assert (
        "branch 'gpu':" in out
        and "title: float64 (double) work takes {share_pct:.0f}% of computation-kernel time" in out
    )
    assert "confounder when no_shapes: input shapes were not recorded" in out


def test_an_unknown_rule_is_a_one_line_error_naming_the_known_ones(capsys):
    assert main(["rules", "no_such_rule"]) == 2
    err = capsys.readouterr().err
    assert "no rule named 'no_such_rule'" in err and "float64_compute" in err
