"""An ipywidgets panel to run variants of a function: pick, run (with progress), read the table
and the chart as results come in, and write the winner into a new cell.

Thin: every number comes from ``wb.compare`` (one comparison per chosen variant, each against
the baseline, interleaved and checked); the panel only arranges and displays.
"""
from __future__ import annotations

import html
import inspect
from typing import Any, Callable, Iterable, Mapping

from workbench.variants import registry
from workbench.variants.spec import Variant

COLUMNS = ("variant", "status", "correct", "median_ms", "speedup", "speedup_ci_low", "speedup_ci_high",
           "setup_ms", "decision", "reason")


def _fmt(value: Any) -> str:
    if value is None or (isinstance(value, float) and value != value):
        return "—"
    return f"{value:.4g}" if isinstance(value, float) else html.escape(str(value))


class VariantPanel:
    """``VariantPanel(fn, inputs, run=_gpuprofile, user_variants={...})``; show ``.widget``.

    ``fn`` is the part of the profiled cell to replace.  ``run`` (a ProfileRun of the whole cell)
    gives the hypotheses and the end-to-end median: a variant whose saving is under 2% of that
    whole is ``micro_only``.  Or pass ``hypotheses=`` / ``end_to_end_ms=`` directly.
    Candidates: the registry variants the hypotheses (or ``suggested``) name, then the user's.
    """

    def __init__(self, fn: Callable[..., Any], inputs: Any, *, run: Any = None, suggested: Iterable[str] = (),
                 hypotheses: Iterable[Any] = (), user_variants: Mapping[str, Any] | None = None, shell: Any = None,
                 fn_name: str | None = None, compare_options: Mapping[str, Any] | None = None,
                 end_to_end_ms: float | None = None):
        import ipywidgets as w

        self.fn, self.inputs, self.shell = fn, inputs, shell
        self.fn_name = fn_name or getattr(fn, "__name__", "fn")
        self.compare_options = dict(compare_options or {})
        if end_to_end_ms is None and run is not None:
            end_to_end_ms = getattr(getattr(run, "timing", None), "median_ms", None)
        if end_to_end_ms is not None:
            self.compare_options.setdefault("end_to_end_ms", float(end_to_end_ms))
        hypotheses = list(hypotheses) + list(getattr(run, "hypotheses", None) or ())
        named = list(suggested) + [v for h in hypotheses for v in (getattr(h, "suggested_variants", ()) or ())]
        self.candidates = self._candidates(named, user_variants or {})
        self.rows: dict[str, dict[str, Any]] = {}
        self.comparisons: dict[str, Any] = {}
        self.checkboxes = {n: self._checkbox(n, v) for n, v in self.candidates.items()}
        self.run_button = w.Button(description="Run selected", button_style="primary", icon="play")
        self.insert_button = w.Button(description="Insert winner in a new cell", disabled=True)
        self.progress = w.IntProgress(value=0, min=0, max=1, description="progress")
        self.status = w.HTML("")
        self.table = w.HTML(self._table_html())
        self.chart = w.HTML("")
        self.run_button.on_click(lambda _: self.run())
        self.insert_button.on_click(lambda _: self.insert_winner())
        self.widget = w.VBox([w.HTML("<b>Variants</b>"), w.VBox(list(self.checkboxes.values())),
                              w.HBox([self.run_button, self.insert_button]), self.progress, self.status,
                              self.table, self.chart])

    # -- building ----------------------------------------------------------------------
    def _candidates(self, suggested: Iterable[str], user: Mapping[str, Any]) -> dict[str, Variant]:
        out: dict[str, Variant] = {}
        for name in suggested:
            if name in ("eager", "triton") or name in out:
                continue                         # eager is the baseline; triton needs a launcher
            out[name] = registry.build(name, self.fn)
        for name, obj in user.items():
            out[name] = obj if isinstance(obj, Variant) else Variant(name=name, fn=obj)
        return out

    def _checkbox(self, name: str, variant: Variant) -> Any:
        import ipywidgets as w

        reason = variant.applicability()
        label = name if reason is None else f"{name} — not applicable: {reason}"
        return w.Checkbox(value=False, description=label, disabled=reason is not None, indent=False,
                          layout=w.Layout(width="auto"))

    def _table_html(self) -> str:
        head = "".join(f"<th>{c}</th>" for c in COLUMNS)
        body = "".join("<tr>" + "".join(f"<td>{_fmt(r.get(c))}</td>" for c in COLUMNS) + "</tr>"
                       for r in self.rows.values())
        return f"<table class='workbench-variants'><tr>{head}</tr>{body}</table>"

    # -- actions -----------------------------------------------------------------------
    def selected(self) -> list[str]:
        return [n for n, box in self.checkboxes.items() if box.value and not box.disabled]

    def run(self) -> None:
        """Compare each selected variant with the baseline, filling the table as each finishes."""
        from workbench.variants.compare import compare

        chosen = self.selected()
        self.progress.max, self.progress.value = max(1, len(chosen)), 0
        if not chosen:
            self.status.value = "select at least one variant"
            return
        for name in chosen:
            self.status.value = f"running {html.escape(name)} ({self.progress.value + 1}/{len(chosen)})…"
            cmp = compare({"eager": self.fn, name: self.candidates[name]}, self.inputs, **self.compare_options)
            self.comparisons[name] = cmp
            for row in cmp.table.to_dict("records"):
                self.rows[row["variant"]] = row
            self.table.value = self._table_html()
            self._draw_chart()
            self.progress.value += 1
        win = self.winner()
        self.insert_button.disabled = win is None
        self.status.value = f"done: winner {html.escape(win)}" if win else "done: no variant to keep"

    def _draw_chart(self) -> None:
        """The comparison chart as inline SVG (static, so it shows offline and in saved pages)."""
        samples: dict[str, Any] = {}
        for cmp in self.comparisons.values():
            samples.update(cmp.samples_ms)
        try:
            import vl_convert as vlc
            from workbench.charts.comparison import comparison_chart
            from workbench.charts.offline import chart_spec

            self.chart.value = vlc.vegalite_to_svg(chart_spec(comparison_chart(samples, baseline="eager")))
        except Exception as exc:  # noqa: BLE001 - the table stands without the chart
            self.chart.value = f"<i>chart not drawn: {html.escape(type(exc).__name__)}: {html.escape(str(exc))}</i>"

    def winner(self) -> str | None:
        keep = [r for r in self.rows.values() if r.get("decision") in ("keep", "keep_guarded")]
        return max(keep, key=lambda r: r["speedup"])["variant"] if keep else None

    def winner_code(self) -> str | None:
        name = self.winner()
        if name is None:
            return None
        v = self.candidates[name]
        if name in registry.names():
            return (f"# {name}: {self.rows[name]['reason']}\n"
                    f"{self.fn_name}_fast = wb.variants.build({name!r}, {self.fn_name})\n")
        try:
            return f"# {name}: {self.rows[name]['reason']}\n" + inspect.getsource(v.fn)
        except (OSError, TypeError):
            return f"# {name}: {self.rows[name]['reason']}\n# (its source is not available to copy)\n"

    def insert_winner(self) -> None:
        code = self.winner_code()
        if code is not None and self.shell is not None:
            self.shell.set_next_input(code)
            self.status.value = f"wrote {html.escape(self.winner())} into the next cell"

    def _ipython_display_(self) -> None:
        from IPython.display import display

        display(self.widget)
