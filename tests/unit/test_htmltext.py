"""HTML ticket bodies (inference.htmltext, applied by the input policy): the text a reader sees, mail structure
kept so the quoted tail is cut as in plain text, and plain text left alone."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from inference.bench.html_mail import STYLES, as_html_mail
from inference.htmltext import html_to_text, looks_like_html
from inference.mailtext import ticket_text
from inference.textprep import HTML_EXPANSION, has_text, model_input

OWN = "Hi,\n\nI was charged twice for my plan this month & need a refund <today>.\nOrder #123"
QUOTED = "Hello, your parcel was shipped.\n\nTracking: 1Z999AA10123456784"


@pytest.mark.parametrize("style", STYLES)
def test_an_html_reply_reads_as_the_customers_own_words_without_markup_or_the_quote(style):
    text, cut = ticket_text("Re: charge", as_html_mail(OWN, QUOTED, style), 3072)
    assert text == "Re: charge\nHi,\nI was charged twice for my plan this month & need a refund <today>.\nOrder #123"
    assert not cut


@pytest.mark.parametrize("style", STYLES)
def test_the_quote_keeps_its_words_as_quoted_lines(style):
    text = html_to_text(as_html_mail(OWN, QUOTED, style))
    mark = "" if style == "outlook" else "> "  # Outlook quotes below a From:/Sent: block, not in a blockquote
    assert f"\n{mark}Hello, your parcel was shipped.\n{mark}Tracking: 1Z999AA10123456784" in text
    assert "<" not in text.replace("<today>", "").replace("<support@example.com>", "")
    assert "MsoNormal" not in text and "&nbsp;" not in text and "\u00a0" not in text


def test_blocks_lists_cells_entities_scripts_and_styles():
    markup = (
        "<html><head><title>t</title><style>p {color: red}</style></head><body><h1>Export fails</h1>"
        "<p>Steps:</p><ul><li>open &amp; click</li><li>wait</li></ul><table><tr><td>os</td><td>Windows&nbsp;11"
        "</td></tr></table><script>var x = '<p>no</p>';</script><!-- a comment --><p>Line one<br/>line two</p>"
        "</body></html>"
    )
    assert html_to_text(markup) == "Export fails\nSteps:\n- open & click\n- wait\nos Windows 11\nLine one\nline two"


@pytest.mark.parametrize(
    "text", ["I <3 this app", "the <div> tag does not render", "a < b and c > d", "if x<y: return", "<>"]
)
def test_plain_text_with_angle_brackets_is_not_html(text):
    assert not looks_like_html(text)
    assert model_input(None, text, 1000) == (text, False)


@given(st.text(alphabet=st.characters(blacklist_categories=("Cc", "Cs"), blacklist_characters="<")), st.integers(1, 50))
def test_text_without_a_tag_is_never_read_as_html(body, max_chars):
    assert not looks_like_html(body)
    text, cut = model_input(None, body, max_chars)  # as before HTML reading: stripped, cut at max_chars
    assert text is None or text == (body.strip()[:max_chars].rstrip() if cut else body.strip())


def test_only_the_first_part_of_a_huge_html_body_is_read_and_the_cut_is_flagged():
    row = "<p>The export fails again.</p>"
    markup = row * (10 * HTML_EXPANSION * 100 // len(row))
    text, cut = model_input(None, markup, 100)
    assert cut and text is not None and len(text) <= 100 and "<p>" not in text
    small, small_cut = model_input(None, row * 2, 100)
    assert small == "The export fails again.\nThe export fails again." and not small_cut


def test_html_that_shows_nothing_is_no_model_input_though_plan_counts_it_as_text():
    # plan counts characters (in Python or in the database), the model step the text a reader sees
    assert has_text(None, "<div><br></div><p>&nbsp;</p>")
    assert model_input(None, "<div><br></div><p>&nbsp;</p>", 100) == (None, False)
    assert model_input("Subject", "<div><br></div><p>&nbsp;</p>", 100) == ("Subject", False)
