"""HTML ticket bodies as the text a reader sees: help desks that ingest e-mail (and their exports) often keep
the HTML part, so a body can be `<div dir="ltr"><p>Hi,</p><p>I was charged twice&hellip;</p>...`.

`html_to_text` (applied by the input policy, `inference.textprep.model_input`, to a subject or body that
`looks_like_html`):
- block elements (p, div, br, li, tr, headings, ...) end a line, so sentences and mail structure survive
  (no blank lines); table cells are separated by a space, list items start with "- ";
- scripts, styles, the head and HTML comments are dropped; entities are decoded (&nbsp; is a space);
- a quoted reply (`<blockquote>`: Gmail, Apple Mail, Thunderbird) keeps its words with each line prefixed
  "> ", and Gmail's "On ... wrote:" attribution or Outlook's From:/Sent: block stays a line of its own,
  so `inference.mailtext` cuts the tail of an HTML reply exactly as it does a plain-text one.

Detection (`looks_like_html`) wants two tags of the HTML vocabulary, so a plain-text ticket that mentions
`<div>` once, or writes "<3" or "a < b", is left alone. Pure standard library (html.parser), linear time.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser

_TAG = re.compile(
    r"</?(?:p|br|div|span|html|body|head|table|tbody|thead|tr|td|th|li|ul|ol|blockquote|b|i|u|strong|em|a|img"
    r"|font|h[1-6]|hr|pre|meta|style|title|center|section|article|header|footer|o:p)\b[^<>]{0,2000}>",
    re.I,
)
_BLOCK = frozenset(
    "p div br li ul ol tr table tbody thead tfoot h1 h2 h3 h4 h5 h6 hr pre blockquote section article header "
    "footer address center dl dt dd form fieldset figure figcaption main nav aside title".split()
)
_CELL = frozenset({"td", "th"})
_SKIP = frozenset({"script", "style", "head", "noscript", "template", "xml"})
_SPACES = re.compile(r"[ \t\f\v\u00a0\u2007\u202f]+")


def looks_like_html(text: str) -> bool:
    """Whether a subject or body is HTML markup: at least two tags of the HTML vocabulary."""
    if "<" not in text:
        return False
    tags = _TAG.finditer(text)
    return next(tags, None) is not None and next(tags, None) is not None


class _Text(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.lines: list[str] = []
        self.line: list[str] = []
        self.skip = 0  # depth inside script/style/head
        self.quote = 0  # depth inside blockquote

    def _end_line(self) -> None:
        text = _SPACES.sub(" ", "".join(self.line)).strip()
        self.line = []
        if text:  # blank lines carry nothing here: sentences and mail structure go by lines
            self.lines.append("> " * self.quote + text)

    def handle_starttag(self, tag: str, attrs) -> None:
        if tag in _SKIP:
            self.skip += 1
            return
        if tag in _BLOCK:
            self._end_line()
        if tag == "blockquote":
            self.quote += 1
        elif tag == "li":
            self.line.append("- ")
        elif tag in _CELL:
            self.line.append(" ")

    def handle_startendtag(self, tag: str, attrs) -> None:
        if tag in _BLOCK:
            self._end_line()

    def handle_endtag(self, tag: str) -> None:
        if tag in _SKIP:
            self.skip = max(0, self.skip - 1)
            return
        if tag in _BLOCK:
            self._end_line()
        if tag == "blockquote":
            self.quote = max(0, self.quote - 1)

    def handle_data(self, data: str) -> None:
        if self.skip:
            return
        for k, piece in enumerate(data.split("\n")):  # a newline in HTML source is a space
            if k:
                self.line.append(" ")
            self.line.append(piece)

    def text(self) -> str:
        self._end_line()
        return "\n".join(self.lines)


def html_to_text(markup: str) -> str:
    """The text of an HTML fragment or document as a reader sees it (the module's docstring)."""
    parser = _Text()
    parser.feed(markup)
    parser.close()
    return parser.text()
