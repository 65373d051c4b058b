"""Every hypothesis names catalog fixes (issue 24): the names a rule may suggest (``suggested_variants=``),
read statically from the rules' source, and the names the rules suggest on the recorded planted and corpus
runs, are all names of ``wb.fixes``; none is the baseline ("eager") or "triton" (your own kernel, which no
rule can build).

The module-swap and fused-kernel fixes land in the catalog from another change: ``FINAL_NAMES`` is the
catalog as it will be, and the names not registered yet are reported as pending, not failed."""

from __future__ import annotations

import ast
from pathlib import Path

import workbench.fixes as fixes
from workbench.hypotheses.rules import _common

RULES = Path(__file__).resolve().parents[2] / "workbench" / "hypotheses" / "rules"
NOT_SUGGESTED = {"eager", "triton"}  # the baseline itself; a kernel only the user can write
SETTINGS_AND_DATA_MOVEMENT = {
    "tf32",
    "autocast_bf16",
    "autocast_fp16",
    "channels_last",
    "cudnn_benchmark",
    "inference_mode",
    "intra_op_threads",
    "pin_memory",
    "set_to_none",
}
MODULE_SWAPS_AND_KERNELS = {  # the other half of issue 24's catalog (may land after this test)
    "sdpa_attention",
    "fused_optimizer",
    "pad_to_multiple_of_8",
    "fused_layer_norm",
    "fused_rms_norm",
    "fused_bias_gelu",
    "fused_softmax",
    "fused_cross_entropy",
    "fused_linear_cross_entropy",
}
FINAL_NAMES = (
    {"compiled", "compiled_dynamic", "compiled_reduce_overhead", "compiled_max_autotune", "cuda_graph"}
    | SETTINGS_AND_DATA_MOVEMENT
    | MODULE_SWAPS_AND_KERNELS
)


def _fusion_fixes_names() -> set[str]:
    """Every name ``_common.fusion_fixes`` can return (its default ``then`` included)."""
    import inspect

    then = inspect.signature(_common.fusion_fixes).parameters["then"].default
    return {fix for _, fix in _common.FUSED_FIXES} | {"sdpa_attention", *then}


def _names_of(node: ast.AST, where: str, module: object = None) -> set[str]:
    """Every name a ``suggested_variants=`` expression can produce (a module-level name: its value there, a
    rule's declared fixes being data beside its words)."""
    if isinstance(node, ast.Name) and module is not None and hasattr(module, node.id):
        value = getattr(module, node.id)
        if isinstance(value, (tuple, list)) and all(isinstance(v, str) for v in value):
            return set(value)
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return {node.value}
    if isinstance(node, (ast.Tuple, ast.List)):
        return set().union(set(), *(_names_of(e, where, module) for e in node.elts))
    if isinstance(node, ast.IfExp):
        return _names_of(node.body, where, module) | _names_of(node.orelse, where, module)
    if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "fusion_fixes":
        return _fusion_fixes_names()
    raise AssertionError(f"{where}: suggested_variants={ast.unparse(node)}: teach this test what it can return")


def suggested_in_source() -> dict[str, set[str]]:
    """file -> every name its ``suggested_variants=`` expressions can produce: their string constants, both
    branches of a conditional, and what ``fusion_fixes`` can return."""
    out: dict[str, set[str]] = {}
    import importlib

    for path in sorted(RULES.glob("*.py")):
        tree = ast.parse(path.read_text())
        module = importlib.import_module(f"workbench.hypotheses.rules.{path.stem}")
        for node in ast.walk(tree):
            if isinstance(node, ast.keyword) and node.arg == "suggested_variants":
                where = f"rules/{path.name}:{node.value.lineno}"
                out.setdefault(path.name, set()).update(_names_of(node.value, where, module))
    return out


def _check(names: set[str], where: str) -> None:
    assert not names & NOT_SUGGESTED, f"{where} suggests {sorted(names & NOT_SUGGESTED)}: name catalog fixes"
    unknown = names - FINAL_NAMES
    assert not unknown, f"{where} suggests {sorted(unknown)}, which no catalog fix is called"
    registered = set(fixes.names())
    missing = names - registered - MODULE_SWAPS_AND_KERNELS
    assert not missing, f"{where} suggests {sorted(missing)}, which are not in wb.fixes.names()"


def test_every_name_a_rule_can_suggest_is_a_catalog_fix():
    found = suggested_in_source()
    assert len(found) >= 15  # the rules' files that suggest something (or say () explicitly)
    every = set().union(*found.values())
    for file, names in found.items():
        _check(names, f"rules/{file}")
    # the names this change made the rules use are there
    assert {"tf32", "autocast_bf16", "pin_memory", "set_to_none", "fused_optimizer", "pad_to_multiple_of_8"} <= every
    assert {"sdpa_attention", "fused_softmax", "fused_layer_norm", "fused_bias_gelu", "compiled", "cuda_graph"} <= every


def test_every_declared_fix_in_the_rules_words_is_a_catalog_fix():
    """The fixes a rule declares in its words (data, not source): every branch of every rule."""
    from workbench.hypotheses.catalog import list_rules

    for r in list_rules():
        for branch, words in r.words.items():
            _check(set(words.suggested_variants), f"{r.name} branch {branch!r}")


def test_the_settings_and_data_movement_fixes_are_registered():
    assert SETTINGS_AND_DATA_MOVEMENT <= set(fixes.names())


def test_the_pending_names_are_only_the_module_swaps_and_kernels():
    """Which of the final catalog's names are not registered yet (none, once the module swaps land)."""
    pending = FINAL_NAMES - set(fixes.names())
    assert pending <= MODULE_SWAPS_AND_KERNELS, sorted(pending)


def test_fusion_suggestions_follow_the_ops():
    assert _common.fusion_fixes(["aten::add", "aten::mul"]) == ("compiled",)
    assert _common.fusion_fixes(["aten::layer_norm", "aten::gelu"]) == (
        "fused_layer_norm",
        "fused_bias_gelu",
        "compiled",
    )
    assert _common.fusion_fixes(["aten::_softmax"], around=["aten::bmm"]) == (
        "sdpa_attention",
        "fused_softmax",
        "compiled",
    )
    assert _common.fusion_fixes(["aten::_softmax"], around=["aten::addmm"]) == ("fused_softmax", "compiled")


# recorded corpus runs whose rules suggest the fused kernels and the conv fixes (the planted runs give the rest)
CORPUS_PICKS = (
    "memory_bound-layernorm_softmax_rows",
    "memory_bound-gelu_residual_chain",
    "compute_bound-conv2d_inference",
)


def _recorded_cases():
    """One recorded planted run per category (and the clean ones), and ``CORPUS_PICKS``: loading a run
    diagnoses it again, about a second each on a busy 2-core machine, so not all 40."""
    from tests.workloads.recorded import CORPUS_RUNS, PLANTED_RUNS, corpus_cases, planted_cases

    picked, categories = [], set()
    for c in planted_cases():
        if c.category is None or c.category not in categories:
            categories.add(c.category)
            picked.append((PLANTED_RUNS, c))
    return picked + [(CORPUS_RUNS, c) for c in corpus_cases() if c.id in CORPUS_PICKS]


def test_the_rules_suggest_catalog_fixes_on_the_recorded_runs(tmp_path, monkeypatch):
    from tests.workloads.recorded import load_recorded

    # judged against the ceiling the runs were recorded with, as tests/workloads/conftest.py's
    # judged_as_recorded does: not a ceiling this machine cached
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "no-cached-ceiling"))

    seen: set[str] = set()
    cases = _recorded_cases()
    assert len(cases) >= 12
    for folder, case in cases:
        run = load_recorded(folder, case)
        for h in run.hypotheses:
            names = set(h.suggested_variants)
            _check(names, f"{case.id}: rule {h.rule}")
            seen |= names
    assert {"compiled", "cuda_graph", "compiled_dynamic", "autocast_bf16", "fused_layer_norm", "fused_softmax"} <= seen
