"""Nested inputs and outputs (tensors inside tuples, lists, dicts): flatten with paths, rebuild.

Paths read like Python (``out[1]['logits']``) so that a correctness report says which output
was wrong.  Tensors are found by duck type to keep this module importable without torch.
"""

from __future__ import annotations

from typing import Any, Callable, Iterator


def _is_tensor(x: Any) -> bool:
    return type(x).__module__.startswith("torch") and hasattr(x, "dtype") and hasattr(x, "shape")


def leaves_with_paths(obj: Any, path: str = "out") -> Iterator[tuple[str, Any]]:
    """Every leaf (anything not a tuple/list/dict) with its path, depth first, dicts by key order."""
    if isinstance(obj, dict):
        for key in obj:
            yield from leaves_with_paths(obj[key], f"{path}[{key!r}]")
    elif isinstance(obj, (tuple, list)) and not _is_tensor(obj):
        for i, item in enumerate(obj):
            yield from leaves_with_paths(item, f"{path}[{i}]")
    else:
        yield path, obj


def tensor_leaves(obj: Any, path: str = "arg") -> list[tuple[str, Any]]:
    return [(p, x) for p, x in leaves_with_paths(obj, path) if _is_tensor(x)]


def structure(obj: Any) -> Any:
    """The shape of the nesting, leaves replaced by their kind: two outputs match only if equal."""
    if isinstance(obj, dict):
        return ("dict", tuple((k, structure(v)) for k, v in obj.items()))
    if isinstance(obj, (tuple, list)) and not _is_tensor(obj):
        return (type(obj).__name__, tuple(structure(v) for v in obj))
    return "tensor" if _is_tensor(obj) else type(obj).__name__


def flatten(obj: Any) -> tuple[list[Any], Callable[[list[Any]], Any]]:
    """Leaves in order, and a function that rebuilds the same nesting from new leaves."""
    leaves = [x for _, x in leaves_with_paths(obj)]

    def rebuild(new: list[Any]) -> Any:
        it = iter(new)
        return _rebuild(obj, it)

    return leaves, rebuild


def _rebuild(obj: Any, it: Iterator[Any]) -> Any:
    if isinstance(obj, dict):
        return {k: _rebuild(v, it) for k, v in obj.items()}
    if isinstance(obj, (tuple, list)) and not _is_tensor(obj):
        items = [_rebuild(v, it) for v in obj]
        return type(obj)(items) if not hasattr(obj, "_fields") else type(obj)(*items)
    return next(it)


def map_tensors(obj: Any, fn: Callable[[Any], Any]) -> Any:
    leaves, rebuild = flatten(obj)
    return rebuild([fn(x) if _is_tensor(x) else x for x in leaves])


def to_reference_precision(obj: Any, dtype_name: str = "float64") -> Any:
    """Floating tensors cast to float64 (complex to complex128); others unchanged."""
    import torch

    target = {"float64": torch.float64}[dtype_name]

    def cast(t: Any) -> Any:  # always a copy: a reference that writes its inputs harms no one
        if t.is_floating_point():
            return t.detach().to(target, copy=True)
        if t.is_complex():
            return t.detach().to(torch.complex128, copy=True)
        return t.detach().clone()

    return map_tensors(obj, cast)


def clone_tensors(obj: Any) -> Any:
    return map_tensors(obj, lambda t: t.detach().clone())


def poison_tensors(obj: Any) -> None:
    """Fill floating tensors with NaN and integer ones with a sentinel, in place.

    Called on outputs before they are freed: when the allocator hands the same memory to the
    next run, elements that run forgets to write keep the poison and fail the check.
    """
    for _, t in tensor_leaves(obj):
        try:
            if t.is_floating_point() or t.is_complex():
                t.detach().fill_(float("nan"))
            elif t.dtype.is_signed and t.dtype.itemsize >= 2:
                t.detach().fill_(-12345)
        except Exception:  # noqa: BLE001
            pass  # a view that cannot be written (expanded, read-only, sparse): nothing to poison


def poison_allocator(template: Any, copies: int = 4) -> list[Any]:
    """Hand freed, NaN-filled blocks of the template's sizes back to the allocator.

    Allocators reuse a recently freed block of a size first, so the next outputs of these sizes
    start out as NaN (or the sentinel) instead of a previous run's correct values.  Returns a
    small block allocated after them: hold it until the call returns, so the freed blocks do not
    merge into the heap top (which glibc may hand back to the OS, to come back as zeros).
    """
    import torch

    blocks = []
    for _, t in tensor_leaves(template):
        for _ in range(copies):
            blocks.append(torch.empty(t.shape, dtype=t.dtype, device=t.device))
    keeper = [torch.empty(t.shape, dtype=t.dtype, device=t.device) for _, t in tensor_leaves(template)[:1]]
    poison_tensors(tuple(blocks))
    while blocks:
        blocks.pop()
    return keeper
