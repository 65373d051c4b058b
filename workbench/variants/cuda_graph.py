"""CUDA-graph capture and replay of a region, with the refusals that keep it honest.

Static input buffers are allocated on the first call; the region is warmed up on a side
stream, captured once, then every call copies its inputs into the static buffers and replays.
The graph refuses, with the reason, a region that uses CPU tensors, one that synchronises with
the host during capture, and a call whose input shapes, dtypes or devices differ from the
captured ones (a graph replays fixed shapes).  Outputs alias the graph's static output
buffers: the next call overwrites them (clone what you keep).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:
    import torch

from workbench.errors import NotApplicableError
from workbench.variants.spec import Variant
from workbench.variants.tree import flatten, tensor_leaves

SYNC_HINTS = ("capturing", "capture", "not permitted", "synchron")


def input_signature(args: tuple[Any, ...]) -> tuple[tuple[str, tuple[int, ...], str, str], ...]:
    """(path, shape, dtype, device) of every tensor among the arguments, in order."""
    return tuple((path, tuple(t.shape), str(t.dtype), str(t.device)) for path, t in tensor_leaves(args))


def refuse_cpu_tensors(args: tuple[Any, ...]) -> None:
    cpu = [(p, str(t.device)) for p, t in tensor_leaves(args) if t.device.type != "cuda"]
    if cpu:
        raise NotApplicableError(
            f"a CUDA graph captures device work only; inputs {cpu[:3]} are not on a CUDA device "
            f"(move them with .cuda() or keep this region eager)"
        )


def refuse_signature_change(captured: tuple, args: tuple[Any, ...]) -> None:
    now = input_signature(args)
    if now != captured:
        diff: list[tuple[Any, Any]] = [(a, b) for a, b in zip(captured, now) if a != b] or [(captured, now)]
        raise NotApplicableError(
            f"inputs changed since capture (captured {diff[0][0]}, got {diff[0][1]}); a CUDA graph "
            f"replays fixed shapes: capture one graph per shape, or guard on the captured shape"
        )


class _GraphedRegion:
    """The callable behind a ``cuda_graph`` variant."""

    def __init__(self, fn: Callable[..., Any], warmup_iters: int):
        self.fn, self.warmup_iters = fn, warmup_iters
        self.graph: torch.cuda.CUDAGraph | None = None
        self.signature: tuple = ()
        self.static_args: tuple[Any, ...] = ()
        self.static_out: Any = None
        self.capture_s: float | None = None

    def __call__(self, *args: Any) -> Any:
        if self.graph is None:
            self._capture(args)
        graph = self.graph
        assert graph is not None, "_capture sets the graph"
        refuse_signature_change(self.signature, args)
        for (_, dst), (_, src) in zip(tensor_leaves(self.static_args), tensor_leaves(args)):
            dst.copy_(src, non_blocking=True)
        graph.replay()
        return self.static_out

    def poison(self) -> None:
        for _, t in tensor_leaves(self.static_out):
            if t.is_floating_point():
                t.fill_(float("nan"))

    def _capture(self, args: tuple[Any, ...]) -> None:
        import torch

        refuse_cpu_tensors(args)
        start = time.perf_counter()
        self.static_args = _clone_tree(args)
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(self.warmup_iters):
                self.fn(*self.static_args)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        try:
            with torch.cuda.graph(graph):
                self.static_out = self.fn(*self.static_args)
        except RuntimeError as exc:
            if any(h in str(exc).lower() for h in SYNC_HINTS):
                raise NotApplicableError(
                    f"the region synchronises with the host during capture ({str(exc).splitlines()[0]}); "
                    f"remove .item()/.cpu()/torch.cuda.synchronize() from it before graphing"
                ) from exc
            raise
        torch.cuda.synchronize()
        self.graph, self.signature = graph, input_signature(args)
        self.capture_s = time.perf_counter() - start


def _clone_tree(args: tuple[Any, ...]) -> tuple[Any, ...]:
    import torch

    leaves, rebuild = flatten(args)
    return rebuild([x.clone() if isinstance(x, torch.Tensor) else x for x in leaves])


def cuda_graph(fn: Callable[..., Any], *, warmup_iters: int = 3, name: str = "cuda_graph") -> Variant:
    """Capture ``fn`` as a CUDA graph on its first call; replay it on every later call."""
    region = _GraphedRegion(fn, warmup_iters)
    return Variant(
        name=name,
        fn=region,
        requires=("cuda",),
        kind="cuda_graph",
        numerical_class="exact",
        poison=region.poison,
        options={"warmup_iters": warmup_iters},
        description="CUDA graph: static buffers, side-stream warm-up, capture, replay",
    )
