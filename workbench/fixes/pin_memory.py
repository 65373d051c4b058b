"""``pin_memory``: the host tensors the code copies to the GPU held in pinned (page-locked) memory, and
those copies made ``non_blocking``: the DMA engine reads them directly (no staging through a driver
buffer) and the host does not wait for them.

Recognised on a CUDA run whose trace shows host-to-device copies from pageable memory (``Memcpy HtoD
(Pageable -> Device)``), or where the pageable-transfer rule (``pageable_memcpy``) or the host-sync rule on
blocking copies named it; absent where the copies are already from pinned memory.  On a CPU run "not
applicable: no CUDA device" where the code would copy host tensors to a device (``.cuda()``, ``.to(device)``,
``.to("cuda")`` in its source), absent otherwise.

The transform pins the plain CPU tensors the code reads by name (closure cells, globals: a copy of each,
``Tensor.pin_memory()``, rebound into a copy of the function: ``rebind``), as a tensor subclass whose
``.to(cuda)``, ``.cuda()`` and ``dst.copy_(src)`` to a CUDA tensor default to ``non_blocking=True``; every
other op on them runs as on a plain tensor and returns plain tensors.  Host tensors made inside each call or
passed as arguments are not pinned (pinning them on every call costs a copy): the variant says so.
Caveat: a non-blocking copy reads its pinned source until the GPU has run it; code that overwrites that host
tensor in place right after (the next batch into the same buffer) must synchronise first.  Numerics: exact.
"""

from __future__ import annotations

import ast

from workbench.fixes import _patterns as P
from workbench.fixes.fix import Fix, Site, absent, applies, not_applicable

NAME = "pin_memory"
RULES = ("pageable_memcpy", "transfer_share")
DEVICE_WORDS = ("cuda", "device", "gpu", "dev")

_SUBCLASS = None


def _non_blocking_host():
    """The tensor subclass of pinned host tensors whose copies to a GPU default to non_blocking."""
    global _SUBCLASS
    if _SUBCLASS is not None:
        return _SUBCLASS
    import torch

    to_device = (torch.Tensor.to, torch.Tensor.cuda)

    class NonBlockingHost(torch.Tensor):
        """A pinned host tensor: ``.to(cuda)``, ``.cuda()`` and ``cuda_dst.copy_(self)`` run non_blocking."""

        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            kwargs = dict(kwargs or {})
            explicit = "non_blocking" in kwargs or any(isinstance(a, bool) for a in args[1:])
            if not explicit:
                if func in to_device and args and isinstance(args[0], NonBlockingHost):
                    kwargs["non_blocking"] = True
                elif (
                    func is torch.Tensor.copy_
                    and len(args) >= 2
                    and isinstance(args[1], NonBlockingHost)
                    and isinstance(args[0], torch.Tensor)
                    and args[0].is_cuda
                ):
                    kwargs["non_blocking"] = True
            with torch._C.DisableTorchFunctionSubclass():
                return func(*args, **kwargs)  # plain tensors out: the subclass stays on the pinned inputs

    _SUBCLASS = NonBlockingHost
    return _SUBCLASS


def _transform(fn, context, name):
    import torch

    from workbench.fixes.context import FixContext
    from workbench.fixes.rebind import rebind
    from workbench.variants.spec import Variant

    description = "the host tensors it reads pinned, their copies to the GPU non_blocking"

    def failed(reason: str) -> Variant:
        return Variant(
            name=name, fn=fn, kind="data_movement", requires=("cuda",), numerical_class="exact",
            description=description, not_applicable_reason=reason,
        )  # fmt: skip

    if not torch.cuda.is_available():
        return failed("cuda: needs a CUDA/ROCm GPU; torch.cuda.is_available() is False on this machine")
    if context is None or context.fn is not fn:
        context = FixContext.from_callable(fn)
    host = {
        label: t
        for label, t in P.reached_tensors(context).items()
        if t.device.type == "cpu" and not t.is_pinned() and t.numel() > 0
    }
    if not host:
        return failed(
            "the code reads no host tensor by name: the tensors it copies are made inside each call or passed "
            "in; pin them where they are made (DataLoader(pin_memory=True), tensor.pin_memory())"
        )
    cls = _non_blocking_host()
    mapping = {id(t): t.pin_memory().as_subclass(cls) for t in host.values()}
    notes: list[str] = []
    new_fn = rebind(fn, mapping, notes=notes)
    return Variant(
        name=name,
        fn=new_fn,
        kind="data_movement",
        requires=("cuda",),
        numerical_class="exact",
        description=f"{description}: {', '.join(list(host)[:6])}{' ...' if len(host) > 6 else ''}",
        options={"pinned": list(host), "state_notes": notes},
    )


def _device_copies_in_source(context) -> list[str]:
    """file:line of the calls in the code that copy a tensor to a device: ``.cuda()``, ``.to(<device>)``,
    ``.to(device=...)``, ``.copy_(..., non_blocking=...)``."""
    if not context.live:
        return []
    sources, _ = P.code_sources(context.fn)

    def names_device(node) -> bool:
        for n in ast.walk(node):
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value.startswith("cuda"):
                return True
            word = n.id if isinstance(n, ast.Name) else n.attr if isinstance(n, ast.Attribute) else ""
            if any(w in word.lower() for w in DEVICE_WORDS):
                return True
        return False

    def pred(name, call):
        if name.endswith(".cuda"):
            return True
        if name.endswith(".to"):
            return any(names_device(a) for a in call.args) or any(k.arg == "device" for k in call.keywords)
        return False

    return [src.where(c) for src, c in P.any_call(sources, pred)]


def recognise(context):
    from workbench.fixes.registry import get

    hyps = context.hypotheses_for(get(NAME))
    kw = {"hypotheses": P.titles(hyps), "stake_ms": P.stake(hyps)}
    if not context.cuda:
        where = _device_copies_in_source(context)
        if where or hyps:
            said = f"the code copies host tensors to a device ({', '.join(where[:3])})" if where else "a rule named it"
            return not_applicable(NAME, f"no CUDA device: pinned memory speeds host-to-GPU copies; {said}", **kw)
        return absent(NAME, "no host-to-device copy: a CPU run, and the code copies nothing to a device")
    copies = P.host_to_device_copies(context)
    if copies is None:  # no GPU activity to read: the rules that name it say where
        if hyps:
            return applies(NAME, "tests " + "; ".join(P.titles(hyps)[:2]), **kw)
        return absent(NAME, "no GPU activity in the trace to find host-to-device copies in")
    if not len(copies):
        return absent(NAME, "no host-to-device copy in the trace")
    names = copies["name"].astype(str)
    pageable = copies[names.str.contains("Pageable")]
    if not len(pageable):
        return absent(NAME, f"the {len(copies)} host-to-device copies already read pinned memory")
    ms = float(pageable["dur_us"].sum()) / 1e3 / P._calls(context)
    nbytes = float(pageable["bytes"].sum()) if "bytes" in pageable else 0.0
    sites = (Site("Memcpy HtoD (Pageable -> Device)", "op", f"{len(pageable)} copies"),)
    if context.live:
        host = [lbl for lbl, t in P.reached_tensors(context).items() if t.device.type == "cpu" and not t.is_pinned()]
        if not host:
            return not_applicable(
                NAME,
                f"{len(pageable)} copies from pageable memory ({ms:.3g} ms a call), but the code reads no host tensor "
                "by name: they are made inside each call or passed in; pin them where they are made "
                "(DataLoader(pin_memory=True))",
                sites,
                **kw,
            )
        sites += tuple(Site(lbl, "callable", "host tensor, pinned") for lbl in host[:6])
    return applies(
        NAME,
        f"{len(pageable)} host-to-device copies from pageable memory ({ms:.3g} ms a call"
        + (f", {nbytes / 2**20:.1f} MiB" if nbytes else "")
        + "): staged through a driver buffer and blocking the host; pinned sources copy directly and asynchronously",
        sites,
        **kw,
    )


FIXES = (
    Fix(
        NAME,
        "the host tensors the code reads pinned (tensor.pin_memory(), on a copy of the function) and their copies "
        "to the GPU non_blocking",
        "data_movement",
        "exact",
        _transform,
        recognise=recognise,
        categories=("transfer", "host_sync"),
        mechanisms=RULES,
        requires=("cuda",),
        needs_live_code=False,
    ),
)
