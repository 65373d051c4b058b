"""Running a callable or a cell: cold call, warm-up, timed repeats, profiler trace, diagnostics.

``workbench.capture.profile.profile`` returns a ``RunRecord`` (the capture layer's value); the
public ``wb.profile`` builds the face's ``ProfileRun`` on it (``workbench.api.profiling``). The
package does not re-export the ``profile`` function: it would hide its own module of that name.
"""

from workbench.capture.compile_diag import CompileDiagnostics, GraphBreak, Recompile
from workbench.capture.run import RunRecord

__all__ = ["CompileDiagnostics", "GraphBreak", "Recompile", "RunRecord"]
