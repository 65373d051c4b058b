"""The rule catalog. Importing this package registers every rule (see ``registry.rule``)."""
from workbench.hypotheses.rules import (  # noqa: F401
    device_idle, sync, transfer, kernels, precision, allocation, distributed, training,
    host_ops, host_roofline, timing, torch_compile, sequences, fill_copy, model_structure,
    measurement, launches, gc_pauses, fresh_pages, trace_coverage, memory,
)
