"""Escaping for Markdown shows the original characters: a Markdown renderer (mistune, what
nbconvert renders Markdown with) turns ``markdown_text(value)`` back into ``value`` as text, never
into markup, an entity or a second table cell; a code span shows its text verbatim."""

from __future__ import annotations

import html
import re

import pytest

from workbench.render.escape import html_text, markdown_code, markdown_text, plain
from workbench.render.tables import markdown_table

mistune = pytest.importorskip("mistune")

HOSTILE = "it's \"quoted\" <script>alert('x')</script> a|b *bold* _it_ # not a heading & &amp; nul\x00end"
SHOWN = HOSTILE.replace("\x00", "\ufffd")  # a NUL shows as U+FFFD, as in every view


def _rendered(md: str) -> str:
    return mistune.create_markdown(plugins=["table", "strikethrough"])(md)


def _text_of(rendered_html: str) -> str:
    """The text a reader sees: tags dropped, entities decoded."""
    return html.unescape(re.sub(r"<[^>]+>", "", rendered_html)).strip()


def test_markdown_text_renders_back_to_the_original_characters():
    md = markdown_text(HOSTILE)
    page = _rendered(md)
    assert _text_of(page) == SHOWN
    assert "<script" not in page and "<em>" not in page and "<strong>" not in page and "<h1>" not in page
    assert "&#x27;" not in md and "&quot;" not in md and "&lt;" not in md  # no entity in the Markdown source
    assert "\\&amp;" in md  # a literal "&amp;" in a name stays text, not the entity
    assert "'" in md and '"' in md  # quotes stay as they are


def test_the_html_escaped_quote_bug_is_gone():
    # the old escaping turned ' into &#x27; and then into &\#x27;, which showed literally
    assert markdown_text("it's") == "it's"
    assert _text_of(_rendered(markdown_text("it's"))) == "it's"


def test_a_table_cell_stays_one_cell_and_shows_its_text():
    page = _rendered(markdown_table(["name", "n"], [[HOSTILE + "\nsecond line", "1"]]))
    cells = re.findall(r"<td[^>]*>(.*?)</td>", page, re.S)
    assert len(cells) == 2 and _text_of(cells[0]) == SHOWN + " second line" and _text_of(cells[1]) == "1"
    assert "<script" not in page


@pytest.mark.parametrize("value", ["keep", "a`b", "``x", " padded ", "<script>", 'say "hi"'])
def test_a_code_span_shows_its_text_verbatim(value):
    page = _rendered(markdown_code(value))
    code = re.search(r"<code>(.*?)</code>", page, re.S)
    assert code is not None and html.unescape(code.group(1)) == value
    assert "<script" not in page


def test_control_characters_and_html_text():
    assert plain("a\x00b\x1b") == "a\ufffdb\ufffd"
    assert html_text(HOSTILE).count("&lt;script&gt;") == 1 and "\x00" not in html_text(HOSTILE)
    assert "\x00" not in markdown_text(HOSTILE) and "\x00" not in markdown_code(HOSTILE)
