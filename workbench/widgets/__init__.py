"""ipywidgets panels (thin: they call the library and display its results)."""
from workbench.widgets.variant_panel import VariantPanel

__all__ = ["VariantPanel"]
