"""The panel's and the magics' HTML pieces escape what comes from the user's code."""

from workbench.render import panel


def test_status_lines_escape_names_and_show_code_parts_as_code():
    line = panel.status_html("running <script>x</script>: ", panel.Code("f(a<b)"), " done")
    assert line == "running &lt;script&gt;x&lt;/script&gt;: <code>f(a&lt;b)</code> done"


def test_a_fix_note_says_where_it_applies_or_greys_why_it_cannot():
    applies = panel.fix_note_html(applies=True, where="blocks.0.attn", reason="softmax(q·kᵀ)·v", stake_ms=1.25)
    assert applies == "at <code>blocks.0.attn</code>: softmax(q·kᵀ)·v (1.25 ms at stake)"
    assert panel.fix_note_html(applies=True, reason="r").startswith("at <code>the whole call</code>")
    greyed = panel.fix_note_html(applies=False, reason="no CUDA device")
    assert "not applicable: no CUDA device" in greyed and "color:#888" in greyed
    assert panel.fix_note_html(applies=False, reason="not applicable: x").count("not applicable") == 1


def test_a_folded_record_opens_only_when_asked_and_escapes_its_summary():
    shut = panel.folded_record_html("<v>", "keep", "<p>body</p>", open_=False)
    assert shut.startswith("<details class=") and "&lt;v&gt;" in shut and shut.endswith("<p>body</p></details>")
    assert panel.folded_record_html("v", "keep", "", open_=True).startswith("<details open ")
    assert "&lt;b&gt;" in panel.live_status_html("<b>")


def test_a_report_page_title_escapes_its_title_and_line():
    from workbench.render.page import Code, title_html

    assert title_html("<x>") == "<h1>&lt;x&gt;</h1>"
    assert (
        title_html("t", "workload ", Code("a<b"), ", on cpu") == "<h1>t</h1><p>workload <code>a&lt;b</code>, on cpu</p>"
    )
