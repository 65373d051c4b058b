"""The structs events are decoded into.

Two decoders: a fast one, where the event's ``cat`` picks a struct whose ``args`` hold only the
keys that kind of event needs (msgspec tagged union; no args struct at all for Python calls and
flows), and the generic ``Event``, whose ``args`` hold every key any table reads. A piece of the
file with a ``cat`` the fast decoder does not know (or metadata events, which have none) is
decoded with the generic one. Both give the same attributes: ``cat`` is a class attribute of
the fast structs, and a table reads only the ``args`` fields of its own kind.
"""

from __future__ import annotations

from typing import Any, Union

import msgspec

from workbench.trace.args import NO_ARGS, Args, _key

_RAW = msgspec.Raw()


class _EventFields(msgspec.Struct, gc=False):
    """The fields every trace event decoder reads, apart from ``cat`` and ``args``."""

    ph: str = ""
    name: str = ""
    pid: int | str = 0
    tid: int | str = 0
    ts: int | float | None = None
    dur: int | float | None = None
    id: int | str | None = None


class Event(_EventFields, gc=False):
    """The general decoder's event: any category, every ``args`` key a table reads."""

    cat: str = ""
    args: Args = NO_ARGS


class CpuArgs(msgspec.Struct, frozen=True, gc=False):
    external_id: Any = _key("External id")
    sequence_number: Any = _key("Sequence number")
    input_types: msgspec.Raw = _key("Input type", _RAW)
    input_dims: msgspec.Raw = _key("Input Dims", _RAW)
    external_id_old: Any = _key("external id")


class RuntimeArgs(msgspec.Struct, frozen=True, gc=False):
    external_id: Any = _key("External id")
    correlation: Any = None
    external_id_old: Any = _key("external id")


class GpuArgs(msgspec.Struct, frozen=True, gc=False):
    external_id: Any = _key("External id")
    device: Any = None
    stream: Any = None
    correlation: Any = None
    registers: Any = _key("registers per thread")
    shared_memory: Any = _key("shared memory")
    blocks_per_sm: Any = _key("blocks per SM")
    warps_per_sm: Any = _key("warps per SM")
    grid: Any = None
    block: Any = None
    occupancy: Any = _key("est. achieved occupancy %")
    bytes: Any = None
    gbps: Any = _key("memory bandwidth (GB/s)")
    external_id_old: Any = _key("external id")


class MemoryArgs(msgspec.Struct, frozen=True, gc=False):
    total_reserved: Any = _key("Total Reserved")
    total_allocated: Any = _key("Total Allocated")
    mem_bytes: Any = _key("Bytes")
    addr: Any = _key("Addr")
    device_id: Any = _key("Device Id")
    device_type: Any = _key("Device Type")


class AnnotationArgs(msgspec.Struct, frozen=True, gc=False):
    external_id: Any = _key("External id")


_ARGS_BY_CAT: dict[str, Any] = {
    **dict.fromkeys(("cpu_op", "Operator", "operator"), CpuArgs),
    **dict.fromkeys(("cuda_runtime", "cuda_driver", "Runtime", "hip_runtime"), RuntimeArgs),
    **dict.fromkeys(("kernel", "Kernel", "gpu_memcpy", "Memcpy", "gpu_memset", "Memset", "cuda_sync"), GpuArgs),
    "cpu_instant_event": MemoryArgs,
    **dict.fromkeys(("user_annotation", "gpu_user_annotation"), AnnotationArgs),
    **dict.fromkeys(
        ("python_function", "ac2g", "async", "async_cpu_to_gpu", "fwdbwd", "Trace", "overhead"), msgspec.Raw
    ),
}


class _Tagged(_EventFields, tag_field="cat", gc=False):
    """Base of the per-category decoders: ``cat`` is the tag, ``args`` the category's own struct."""


def _tagged_struct(cat: str, args_type: Any) -> type:
    default = _RAW if args_type is msgspec.Raw else args_type()
    return msgspec.defstruct(
        f"Event_{cat}",
        [("args", args_type, default)],
        bases=(_Tagged,),
        tag=cat,
        namespace={"cat": cat, "__annotations__": {}},
    )


TAGGED = tuple(_tagged_struct(cat, args) for cat, args in _ARGS_BY_CAT.items())
FAST_DECODER = msgspec.json.Decoder(list[Union[TAGGED]])  # type: ignore[valid-type]
GENERIC_DECODER = msgspec.json.Decoder(list[Event])
ONE_EVENT_DECODER = msgspec.json.Decoder(Event)  # an event at a time, where a piece holds a bad one
SKIPPED_PH = "\x00skipped"  # the phase of the placeholder left where an event could not be read
