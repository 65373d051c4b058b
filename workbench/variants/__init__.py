"""Variants of a computation, checked for correctness and timed fairly; a decision per variant.

    import workbench as wb
    cmp = wb.compare({"eager": f, "compiled": wb.variants.compiled(f)}, inputs=make_inputs)
    cmp.table       # one row per variant: correctness, median, CI, speedup, decision
    cmp.decision    # DecisionRecord (.to_json(); wb.render.markdown(cmp.decision))

Steps: (1) each variant's requirements (``requires=("cuda",)``) are checked, unmet ones reported
as not applicable with the reason; (2) correctness: fresh inputs per check, a float64 reference
from the baseline, outputs poisoned before reuse, each call under a time limit and a guard on
global state, errors/hangs/wrong shapes/NaN kept in the variant's row, checks against cheating
(patched timers, work left running after return, silently lowered precision, faster than the
roofline); (3) timing: interleaved rounds in random order, raw samples kept, paired speedup
intervals, rounds added while an interval is too wide to decide (up to a stated budget), the
family-wise error of several candidates held by Holm's procedure; (4) what changed (a profiled call each); (5) optional shape sweep and hypothesis
verdict; (6) decisions and the DecisionRecord.

Training steps written the ordinary way (a loss closing over a model, ``opt.step()`` inside the call)
are checked too: what each callable reaches (``reach.py``: modules, parameters, buffers, optimizers,
through closures, globals, bound methods, partials, compiled wrappers, ``__workbench_reach__``; or
``model=``/``optimizer=``/``params=``) is snapshotted and restored before every checked call and timed
sample (``state.py``), and what a call changes (gradients, parameters, optimizer state) is compared;
a variant computing in bfloat16/float16 is found by what its ops compute (``precision.py``) and
judged as "reduced precision" with that precision's tolerances.
"""

from __future__ import annotations

from workbench.variants.builders import compiled, eager, user
from workbench.variants.clock import FakeTimer, RecordedTimer
from workbench.variants.compare import ComparisonInterrupted, compare
from workbench.variants.cuda_graph import cuda_graph
from workbench.variants.decision import DECISIONS, DecisionRecord
from workbench.variants.registry import build, describe, get, names, register, unregister
from workbench.variants.results import Comparison, VariantResult
from workbench.variants.settings import CompareSettings
from workbench.variants.spec import Variant
from workbench.variants.sweep import ShapeSweep, sweep_shapes
from workbench.variants.triton_variant import check_in_interpreter, triton

__all__ = [
    "compare",
    "CompareSettings",
    "ComparisonInterrupted",
    "FakeTimer",
    "RecordedTimer",
    "Comparison",
    "VariantResult",
    "DecisionRecord",
    "DECISIONS",
    "Variant",
    "eager",
    "compiled",
    "cuda_graph",
    "user",
    "triton",
    "check_in_interpreter",
    "ShapeSweep",
    "sweep_shapes",
    "build",
    "get",
    "names",
    "describe",
    "register",
    "unregister",
]
