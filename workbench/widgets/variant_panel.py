"""An ipywidgets panel to run variants of a function: pick, run (with progress), read the table,
the chart and each decision record as results come in, and write the winner into a new cell.

Thin: every number comes from ``wb.compare``: one comparison of the baseline and every chosen
variant, interleaved and checked, so the table has one baseline row and each candidate's speed-up
is against that one measurement; each candidate's decision record is built from its row against
the baseline's, with the hypothesis that suggested it.  The table and the records are drawn by
``workbench.render`` (the renderer every other view uses).  The variants the hypotheses suggest
and the user's own variants start checked.  The winner's code shows right under its button.

Inserting a cell: a kernel can only ask the front end for a new cell in its reply to a cell's
execution (``shell.set_next_input``); a button click is not one (JupyterLab would show the code
only after some later cell ran, below that cell).  So in a notebook the button shows the
winner's code, ready to copy, and ``panel.insert_winner()`` run in a cell puts it in a new cell
below; in a terminal IPython the button inserts directly.

The run's fixes: given a ``run`` (or ``fixes=`` a ``FixList``), the panel lists every fix of
``run.fixes``: the ones that apply, checked, with where each applies and why (the line beside its
box); the ones that do not, greyed and disabled, with their reason.  Each is built on ``fn`` as
``run.fixes.variants(fn=fn)`` builds it (its record names the fix and where), so any subset runs in
one click (check the boxes, press "Run selected"), beside the suggested variants and your own.
"""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping

import workbench.render.panel as panel_html
import workbench.variants.registry as registry
from workbench.variants.spec import Variant

if TYPE_CHECKING:
    import ipywidgets
    from IPython.core.interactiveshell import InteractiveShell

    from workbench.api.run import ProfileRun
    from workbench.fixes import Applicability, FixList
    from workbench.hypotheses.hypothesis import Hypothesis
    from workbench.variants.decision import DecisionRecord
    from workbench.variants.results import Comparison

BASELINE = "eager"  # the baseline's row in the panel's comparison


def pick_hypothesis(hypotheses: Iterable[Hypothesis], name: str, *, registry_variant: bool) -> Hypothesis | None:
    """The hypothesis that suggests ``name``; else, for a user's own variant, the first that is
    not about the measurement itself (``measurement`` / ``cold_start``); else None."""
    hypotheses = list(hypotheses)
    for h in hypotheses:
        if name in (h.suggested_variants or ()):
            return h
    if registry_variant:
        return None
    for h in hypotheses:
        # a hypothesis passed by hand may carry only ``suggested_variants``: no category, no pick
        if getattr(h, "category", None) not in (None, "measurement", "cold_start"):
            return h
    return None


def run_fixes(run: Any) -> FixList | None:
    """``run.fixes`` where the run has them (a ProfileRun; a stand-in without them: None); a run
    whose fixes cannot be recognised lists none (the panel still offers the rest)."""
    from workbench.fixes import FixList

    try:
        found = getattr(run, "fixes", None) if run is not None else None
    except Exception:  # noqa: BLE001 - no fixes listed; the suggested and user variants remain
        return None
    return found if isinstance(found, FixList) else None


class VariantPanel:
    """``VariantPanel(fn, inputs, run=_gpuprofile, user_variants={...})``; show ``.widget``.

    ``fn`` is the part of the profiled cell to replace.  ``run`` (a ProfileRun of the whole cell)
    gives the hypotheses and the end-to-end median: a variant whose saving is under 2% of that
    whole is ``micro_only``.  Or pass ``hypotheses=`` / ``end_to_end_ms=`` directly.
    Candidates: the run's fixes that apply (``run.fixes``, or ``fixes=`` a FixList; checked, with
    where and why beside each: ``fix_notes``), the registry variants the hypotheses (or
    ``suggested``) name, the fixes that do not apply here (greyed, with the reason), then the user's.
    """

    def __init__(
        self,
        fn: Callable[..., Any],
        inputs: Any,
        *,
        run: ProfileRun | None = None,
        suggested: Iterable[str] = (),
        hypotheses: Iterable[Hypothesis] = (),
        user_variants: Mapping[str, Callable[..., Any] | Variant] | None = None,
        shell: InteractiveShell | None = None,
        fn_name: str | None = None,
        compare_options: Mapping[str, Any] | None = None,
        end_to_end_ms: float | None = None,
        fixes: FixList | None = None,
    ):
        import ipywidgets as widgets

        self.fn, self.inputs, self.shell = fn, inputs, shell
        self.fn_name = fn_name or getattr(fn, "__name__", "fn")
        self.compare_options = dict(compare_options or {})
        if end_to_end_ms is None and run is not None:
            end_to_end_ms = run.timing.median_ms
        if end_to_end_ms is not None:
            self.compare_options.setdefault("end_to_end_ms", float(end_to_end_ms))
        self.hypotheses = list(hypotheses) + list((run.hypotheses if run is not None else None) or ())
        named = list(suggested) + [v for h in self.hypotheses for v in (h.suggested_variants or ())]
        self.suggested = [n for n in dict.fromkeys(named) if n not in ("eager", "triton")]
        if BASELINE in (user_variants or {}):
            from workbench.errors import InvalidArgumentError

            raise InvalidArgumentError(
                f"{BASELINE!r} names the baseline's row (fn itself); call your variant something else"
            )
        self.user_names = set(user_variants or {})
        self.fixes = fixes if fixes is not None else run_fixes(run)
        # fix name -> what run.fixes found (applies / not applicable, where, why); the user's names win
        self.fix_rows: dict[str, Applicability] = {
            r.fix: r for r in (self.fixes or ()) if r.fix not in (BASELINE, "triton") and r.fix not in self.user_names
        }
        self.candidates = self._candidates(named, user_variants or {})
        self.rows: dict[str, dict[str, Any]] = {}
        self.comparison: Comparison | None = None  # the last run's comparison (all chosen variants)
        self.comparisons: dict[str, Comparison] = {}  # variant name -> the comparison it was in
        self.decisions: dict[str, DecisionRecord] = {}  # variant name -> its decision record
        self.checkboxes = {
            n: self._checkbox(n, v, suggested=n in self.suggested, yours=n in self.user_names, fix=self.fix_rows.get(n))
            for n, v in self.candidates.items()
        }
        # beside each fix's box: where it applies and why, or (greyed) why it does not
        self.fix_notes = {n: self._fix_note(row) for n, row in self.fix_rows.items() if n in self.checkboxes}
        self.run_button = widgets.Button(
            description="Run selected", button_style="primary", icon="play", layout=widgets.Layout(width="auto")
        )
        self.in_front_end = self._in_front_end()
        label = "Show the winner's code" if self.in_front_end else "Insert winner in a new cell"
        self.insert_button = widgets.Button(
            description=label,
            disabled=True,
            layout=widgets.Layout(width="auto"),
            tooltip="in a notebook: shows the code; run panel.insert_winner() in a cell to put it in a new cell"
            if self.in_front_end
            else label,
        )
        self.progress = widgets.IntProgress(value=0, min=0, max=1, description="progress")
        self.status = widgets.HTML("")
        self.table = widgets.HTML(self._table_html())
        self.chart = widgets.HTML("")
        self.records = widgets.HTML("")
        self.code = widgets.Textarea(value="", layout=widgets.Layout(width="100%", height="8em", display="none"))
        self.run_button.on_click(lambda _: self.run())
        self.insert_button.on_click(lambda _: self.insert_winner())
        # the winner's code sits right under its button; the table, chart and records below
        self.widget = widgets.VBox(
            [
                widgets.HTML(panel_html.heading_html("Variants")),
                widgets.VBox([self._line(n, box) for n, box in self.checkboxes.items()]),
                widgets.HBox([self.run_button, self.insert_button]),
                self.code,
                self.progress,
                self.status,
                self.table,
                self.chart,
                self.records,
            ]
        )

    # -- building ----------------------------------------------------------------------
    def _candidates(
        self, suggested: Iterable[str], user: Mapping[str, Callable[..., Any] | Variant]
    ) -> dict[str, Variant]:
        """The run's applicable fixes (rank order), then the registry variants the hypotheses suggest,
        then the fixes that do not apply here, then the user's own."""
        out: dict[str, Variant] = {}
        fixes = list(self.fix_rows.values())
        for row in [r for r in fixes if r.applies]:
            out[row.fix] = self._fix_variant(row.fix)
        for name in suggested:
            if name in ("eager", "triton") or name in out or name in user or name in self.fix_rows:
                continue  # eager is the baseline; triton needs a launcher
            out[name] = registry.build(name, self.fn)
        for row in [r for r in fixes if not r.applies]:
            out[row.fix] = self._fix_variant(row.fix)
        for name, obj in user.items():
            out[name] = obj if isinstance(obj, Variant) else Variant(name=name, fn=obj)
        return out

    def _fix_variant(self, name: str) -> Variant:
        """The fix built on ``fn`` with what the run's fixes found (a row that cannot run here, or
        cannot be built from ``fn``, is a not-applicable variant saying why)."""
        assert self.fixes is not None
        return self.fixes.built(name, self.fn)

    def _checkbox(
        self,
        name: str,
        variant: Variant,
        *,
        suggested: bool = False,
        yours: bool = False,
        fix: Applicability | None = None,
    ) -> ipywidgets.Checkbox:
        """A variant's box: checked when the diagnosis suggests it (a fix that applies to the run) or
        it is yours; disabled, with the reason, where it cannot run here."""
        import ipywidgets as widgets

        reason = variant.applicability()
        label = name if reason is None else f"{name} — not applicable: {reason}"
        if reason is None and fix is not None:
            label = f"{name} (a fix for this run)"
        elif reason is None and suggested:
            label = f"{name} (suggested by the diagnosis)"
        elif reason is None and yours:
            label = f"{name} (yours)"
        return widgets.Checkbox(
            value=(suggested or yours or fix is not None) and reason is None,
            description=label,
            disabled=reason is not None,
            indent=False,
            layout=widgets.Layout(width="auto"),
        )

    def _fix_note(self, row: Applicability) -> ipywidgets.HTML:
        """Where the fix applies and why (its reason greyed where it cannot run here)."""
        import ipywidgets as widgets

        box = self.checkboxes[row.fix]
        if box.disabled:
            why = self.candidates[row.fix].applicability() or row.reason
            text = panel_html.fix_note_html(applies=False, reason=why)
        else:
            text = panel_html.fix_note_html(applies=True, where=row.where, reason=row.reason, stake_ms=row.stake_ms)
        return widgets.HTML(text, layout=widgets.Layout(margin="0 0 0 1.5em"))

    def _line(self, name: str, box: ipywidgets.Checkbox) -> Any:
        """A candidate's line: its box, and for a fix where it applies and why beside it."""
        import ipywidgets as widgets

        note = self.fix_notes.get(name)
        return box if note is None else widgets.HBox([box, note])

    def fix_names(self) -> list[str]:
        """The run's fixes that can run here (their boxes enabled), best first."""
        return [n for n, row in self.fix_rows.items() if n in self.checkboxes and not self.checkboxes[n].disabled]

    def select(self, names: Iterable[str]) -> None:
        """Check exactly ``names`` (a subset of the enabled boxes); "Run selected" then runs them."""
        names = list(names)
        unknown = [n for n in names if n not in self.checkboxes or self.checkboxes[n].disabled]
        if unknown:
            from workbench.errors import InvalidArgumentError

            raise InvalidArgumentError(
                f"cannot select {unknown}: the panel's runnable variants are "
                f"{[n for n, b in self.checkboxes.items() if not b.disabled]}"
            )
        for n, box in self.checkboxes.items():
            box.value = n in names

    def _shell(self) -> InteractiveShell | None:
        if self.shell is not None:
            return self.shell
        try:
            from IPython import get_ipython
        except ImportError:
            return None
        return get_ipython()

    def _in_front_end(self) -> bool:
        """Whether the panel lives in a Jupyter kernel (a notebook front end), not a terminal."""
        return getattr(self._shell(), "kernel", None) is not None

    def _in_cell_execution(self) -> bool:
        """Whether the code runs for a cell's execution (so set_next_input reaches the front end now)."""
        kernel = getattr(self._shell(), "kernel", None)
        if kernel is None:
            return True
        try:
            parent = kernel.get_parent("shell") or {}
        except Exception:  # noqa: BLE001 - an old kernel: assume a button callback
            return False
        return (parent.get("header") or {}).get("msg_type") == "execute_request"

    def hypothesis_for(self, name: str) -> Hypothesis | None:
        """The hypothesis variant ``name`` is judged against: the first (highest-ranked) one that
        suggests it; for a variant of yours that none names, the top-ranked finding that is not a
        caveat about the measurement (the bottleneck a rewrite most likely addresses; pass
        ``hypotheses=[h]`` first to choose another); None without hypotheses."""
        if name in self.fix_rows and self.fixes is not None and self.fixes.context.run is not None:
            from workbench.fixes import get

            tested = self.fixes.context.hypotheses_for(get(name))  # what run.fixes found it through
            if tested:
                return tested[0]
        return pick_hypothesis(self.hypotheses, name, registry_variant=name not in self.user_names)

    def _table_html(self) -> str:
        """The last comparison's table, as ``workbench.render`` draws every comparison."""
        if self.comparison is None:
            return panel_html.note_html("no variant run yet: choose some and press “Run selected”")
        from workbench.render.comparison import table_html

        return table_html(self.comparison)

    # -- actions -----------------------------------------------------------------------
    def selected(self) -> list[str]:
        return [n for n, box in self.checkboxes.items() if box.value and not box.disabled]

    STAGES = ("correctness", "timing", "profile", "done")

    def run(self) -> None:
        """Compare the baseline with every selected variant in one comparison (correctness, then
        interleaved timing against one baseline measurement), then fill the table, the chart and
        a decision record per variant; the bar moves per stage (correctness, timing, profile)."""
        from workbench.capture.quiet import captured_native_stderr
        from workbench.variants.compare import compare

        chosen = self.selected()
        steps = len(self.STAGES)
        self.progress.max, self.progress.value = steps, 0
        if not chosen:
            self.status.value = panel_html.status_html("select at least one variant")
            return
        self.run_button.disabled = True
        label = ", ".join(chosen)
        try:
            self.status.value = panel_html.status_html(f"running {label}: starting…")

            def say(stage: str, detail: str) -> None:
                if stage in self.STAGES:
                    self.progress.value = max(self.progress.value, self.STAGES.index(stage) + 1)
                more = f" {detail}" if detail else ""
                self.status.value = panel_html.status_html(f"running {label}: {stage}{more}…")

            options = dict(self.compare_options)
            user_say = options.pop("progress", None)

            def both(stage: str, detail: str) -> None:
                say(stage, detail)
                if user_say is not None:
                    user_say(stage, detail)

            if "hypothesis" not in options:  # the record's lead: the first chosen variant's hypothesis
                options["hypothesis"] = next(
                    (h for h in (self.hypothesis_for(n) for n in chosen) if h is not None), None
                )
            with captured_native_stderr():  # the profiler's native lines, shown only on a failure
                cmp = compare(
                    {BASELINE: self.fn, **{n: self.candidates[n] for n in chosen}},
                    self.inputs,
                    baseline=BASELINE,
                    progress=both,
                    **options,
                )
        except KeyboardInterrupt:
            self.status.value = panel_html.status_html(
                f"interrupted while running {label}: nothing was kept (the table shows the previous run, if any)"
            )
            return
        except Exception as exc:  # noqa: BLE001 - say it in place; the kernel stays usable
            self.status.value = panel_html.status_html(f"{label} failed: {type(exc).__name__}: {exc}")
            return
        finally:
            self.run_button.disabled = False
        self._keep(cmp, chosen, options.get("hypothesis"))
        self.progress.value = steps
        win = self.winner()
        self.insert_button.disabled = win is None
        self.status.value = panel_html.status_html(f"done: winner {win}" if win else "done: no variant to keep")

    def _keep(self, cmp: Comparison, chosen: list[str], lead: Hypothesis | None) -> None:
        self.comparison = cmp
        self.rows = {row["variant"]: row for row in cmp.table.to_dict("records")}
        self.comparisons = {n: cmp for n in chosen}
        self.decisions = {n: self._record(cmp, n, lead) for n in chosen}
        self.table.value = self._table_html()
        self._draw_chart()
        self._show_records()

    def _record(self, cmp: Comparison, name: str, lead: Hypothesis | None) -> DecisionRecord:
        """The comparison's own record for the variant it picked; for every other variant, a record
        of its row against the baseline's, on the hypothesis that suggested it."""
        hypothesis = self.hypothesis_for(name)
        if cmp.decision.variant == name and (hypothesis is None or hypothesis is lead):
            return cmp.decision
        from workbench.variants.record_builder import build_record

        settings = dict(cmp.settings or {})
        return build_record(
            [cmp[cmp.baseline], cmp[name]],
            cmp.baseline,
            hypothesis=hypothesis,
            problem=str(settings.get("problem", "") or ""),
            notes=list(settings.get("notes", ()) or ()),
            settings=settings,
        )

    def _show_records(self) -> None:
        """A decision record per variant under the table, drawn by ``workbench.render``: the
        winner's open, the others folded."""
        from workbench import render

        win = self.winner()
        parts = []
        for name, record in sorted(self.decisions.items(), key=lambda kv: kv[0] != win):
            opened = name == win or len(self.decisions) == 1
            parts.append(panel_html.folded_record_html(name, record.decision, render.html(record), open_=opened))
        self.records.value = "".join(parts)

    def _draw_chart(self) -> None:
        """The comparison chart as inline SVG (static, so it shows offline and in saved pages)."""
        samples = dict(self.comparison.samples_ms) if self.comparison is not None else {}
        try:
            import vl_convert as vlc

            from workbench.charts.comparison import comparison_chart
            from workbench.charts.offline import chart_spec

            self.chart.value = vlc.vegalite_to_svg(chart_spec(comparison_chart(samples, baseline=BASELINE)))
        except Exception as exc:  # noqa: BLE001 - the table stands without the chart
            self.chart.value = panel_html.note_html(f"chart not drawn: {type(exc).__name__}: {exc}")

    def winner(self) -> str | None:
        keep = [
            r
            for r in self.rows.values()
            if r.get("decision") in ("keep", "keep_guarded") and r["variant"] in self.candidates
        ]
        return max(keep, key=lambda r: r["speedup"])["variant"] if keep else None

    def winner_code(self) -> str | None:
        name = self.winner()
        if name is None:
            return None
        v = self.candidates[name]
        if name in registry.names():
            head = f"# {name}: {self.rows[name]['reason']}\n"
            build = f"{self.fn_name}_fast = wb.variants.build({name!r}, {self.fn_name})\n"
            if getattr(v, "in_place", None) is not None:  # the checked change, made to your own model
                return (
                    head + f"wb.fixes.apply({name!r}, {self.fn_name})  # changes your model / optimizer in place\n"
                    f"# or, leaving them as they are, a changed copy to call instead: {build}"
                )
            return head + build
        try:
            return f"# {name}: {self.rows[name]['reason']}\n" + inspect.getsource(v.fn)
        except (OSError, TypeError):
            return f"# {name}: {self.rows[name]['reason']}\n# (its source is not available to copy)\n"

    def insert_winner(self) -> None:
        """Put the winner's code in a new cell (see the module docstring for when that can happen);
        otherwise show it in the panel, ready to copy, and say how to insert it (``winner_code()``
        is the code itself)."""
        code = self.winner_code()
        if code is None:
            self.status.value = panel_html.status_html("no winner to insert: no variant was kept")
            return
        name = self.winner() or ""
        shell = self._shell()
        self.code.value = code
        self.code.layout.display = None
        if shell is not None and self._in_cell_execution():
            shell.set_next_input(code)
            self.status.value = panel_html.status_html(f"wrote {name} into a new cell below")
        elif shell is None:
            self.status.value = panel_html.status_html(
                f"the code of {name} is below (no IPython shell to insert it into): copy it"
            )
        else:
            self.status.value = panel_html.status_html(
                f"the code of {name} is below, ready to copy; a button cannot create a cell in JupyterLab, so run ",
                panel_html.Code("panel.insert_winner()"),
                " in a cell (with your panel's name) to put it in a new cell below that one",
            )

    def _ipython_display_(self) -> None:
        from IPython.display import display

        display(self.widget)
