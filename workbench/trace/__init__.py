"""Reading Chrome/Kineto traces into columnar tables (no torch, IPython or altair here).

    trace = load_trace("trace.json.gz")      # or a folder of rank files, or a list of paths
    trace.kernels, trace.cpu_ops, trace.runtime, trace.syncs, trace.memory, trace.annotations

The column schema of every table is in ``workbench.trace.schema``.
"""
from workbench.trace.load import load_trace
from workbench.trace.model import Trace, TraceMeta

__all__ = ["Trace", "TraceMeta", "load_trace"]
