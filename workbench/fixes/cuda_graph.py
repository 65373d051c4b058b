"""CUDA-graph capture and replay: one launch for the whole call.  Recognised where a hypothesis names
it (launch-bound steps, host gaps between kernels, allocation churn); on a CPU machine its row says
"not applicable: cuda: ..." instead of vanishing."""

from __future__ import annotations

from workbench.fixes._recognise import by_hypotheses
from workbench.fixes.fix import Fix


def _transform(fn, context, name):
    from workbench.variants.cuda_graph import cuda_graph

    return cuda_graph(fn, name=name)


def _recognise(context):
    from workbench.fixes.registry import get

    return by_hypotheses(get("cuda_graph"), context)


FIXES = (
    Fix(
        "cuda_graph",
        "captures the call once as a CUDA graph and replays it: one launch instead of one per kernel",
        "capture",
        "exact",
        _transform,
        recognise=_recognise,
        requires=("cuda",),
    ),
)
