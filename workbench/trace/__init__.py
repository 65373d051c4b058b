"""Reading Chrome/Kineto traces into columnar tables: parsing and tables only (no torch, IPython,
altair, and no analysis: the analyses take a ``TraceData``; the public ``Trace`` is in
``workbench.api.trace``).

    data = read_trace("trace.json.gz")      # or a folder of rank files, or a list of paths
    data.kernels, data.cpu_ops, data.runtime, data.syncs, data.memory, data.annotations

The column schema of every table is in ``workbench.trace.schema``.
"""

from workbench.trace.data import TraceData, TraceMeta
from workbench.trace.load import read_trace

__all__ = ["TraceData", "TraceMeta", "read_trace"]
