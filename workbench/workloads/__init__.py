"""Workloads that ship with workbench: ``workbench.workloads.demo``, the built-in demo of
``workbench report`` (also ``wb.demo``)."""
