"""altair chart builders (timeline, roofline, breakdowns, comparison) and offline display.

Builders take result objects or tables and return altair charts; they never measure. Display
works with no network however a chart is shown: importing this package enables the ``workbench``
altair renderer (offline HTML; a renderer you chose is kept), so a builder's chart as a cell's
last line draws offline, as do ``display(chart)``, ``to_offline_html(chart)`` and
``save(chart, "x.svg")``.
"""

from workbench.errors import require_package

require_package("altair", extra="charts", feature="drawing charts (workbench.charts)")
require_package("vl_convert", extra="charts", feature="drawing charts offline (workbench.charts)")
from workbench.charts.breakdowns import (
    idle_chart,
    kernel_types_chart,
    per_rank_chart,
    top_kernels_chart,
    top_ops_chart,
)
from workbench.charts.common import message_chart
from workbench.charts.comparison import comparison_chart, speedup_table
from workbench.charts.export import result_charts, save_charts
from workbench.charts.live import LiveTimeline, live_timeline
from workbench.charts.notebook import charts_html
from workbench.charts.offline import (
    OfflineChart,
    bundle_script_tag,
    display,
    enable_offline_renderer,
    page_html,
    save,
    to_offline_html,
)
from workbench.charts.roofline import (
    ceilings_from_spec,
    roofline_chart,
    roofline_points,
    trace_roofline_chart,
    variants_roofline_chart,
)
from workbench.charts.roofline_data import RooflineCeilings, ceilings_for, op_roofline_points
from workbench.charts.run import comparison_charts, run_charts, timing_chart, trace_charts
from workbench.charts.timeline import timeline_chart, timeline_events, timeline_table

__all__ = [
    "OfflineChart",
    "RooflineCeilings",
    "bundle_script_tag",
    "ceilings_for",
    "ceilings_from_spec",
    "charts_html",
    "comparison_chart",
    "comparison_charts",
    "display",
    "enable_offline_renderer",
    "op_roofline_points",
    "trace_roofline_chart",
    "variants_roofline_chart",
    "LiveTimeline",
    "live_timeline",
    "idle_chart",
    "kernel_types_chart",
    "message_chart",
    "page_html",
    "per_rank_chart",
    "roofline_chart",
    "roofline_points",
    "run_charts",
    "save",
    "speedup_table",
    "timeline_chart",
    "timeline_events",
    "timeline_table",
    "timing_chart",
    "to_offline_html",
    "top_kernels_chart",
    "top_ops_chart",
    "result_charts",
    "save_charts",
]

enable_offline_renderer()
