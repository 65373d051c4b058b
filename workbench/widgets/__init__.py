"""ipywidgets panels (thin: they call the library and display its results)."""

from workbench.errors import require_package

require_package("ipywidgets", extra="notebook", feature="the notebook panels (workbench.widgets)")

from workbench.widgets.variant_panel import VariantPanel

__all__ = ["VariantPanel"]
