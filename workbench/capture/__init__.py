"""Running a callable or a cell: cold call, warm-up, timed repeats, profiler trace, diagnostics."""
from workbench.capture.compile_diag import CompileDiagnostics, GraphBreak, Recompile
from workbench.capture.measurement import Measurement, ratio_ci
from workbench.capture.profile import profile
from workbench.capture.run import ProfileRun, load_run

__all__ = ["CompileDiagnostics", "GraphBreak", "Measurement", "ProfileRun", "Recompile",
           "load_run", "profile", "ratio_ci"]
