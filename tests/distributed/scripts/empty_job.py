"""A script that runs nothing under the profiler: each rank exports a trace of no work."""
