"""Raw e-mail messages in ticket bodies (inference.mimetext, through the input policy): what a mail client shows
is what the model reads; text that is not a raw message is left alone."""

from __future__ import annotations

from email.message import EmailMessage

import pytest

from inference.mimetext import looks_like_mime, mime_to_text
from inference.textprep import model_input

OWN = "I was charged twice for order 4471, please refund one of the payments. Grüße, Jörg"


def message(*, plain: str | None = OWN, html: str | None = None, charset="utf-8", cte="quoted-printable", pdf=False):
    m = EmailMessage()
    m["From"], m["To"], m["Subject"] = "Jörg <j@example.org>", "support@example.com", "Doppelt belastet"
    if plain is not None:
        m.set_content(plain, charset=charset, cte=cte)
        if html is not None:
            m.add_alternative(html, subtype="html", cte="base64")
    elif html is not None:
        m.set_content(html, subtype="html", cte="base64")
    if pdf:
        m.add_attachment(b"%PDF-1.4 " + bytes(range(256)), maintype="application", subtype="pdf", filename="x.pdf")
    return m.as_string()


@pytest.mark.parametrize(
    "raw",
    [
        message(),
        message(cte="base64"),
        message(charset="iso-8859-1"),
        message(html="<div><p>I was charged twice for order 4471, please refund one of the payments.</p></div>"),
        message(pdf=True),
        message().replace("\n", "\r\n"),  # as it came off the wire
        "\n\n  " + message(),
    ],
    ids=["qp", "base64", "latin-1", "alternative", "attachment", "crlf", "leading blank lines"],
)
def test_the_text_part_is_what_the_model_reads(raw):
    assert looks_like_mime(raw)
    assert mime_to_text(raw).strip() == OWN
    text, cut = model_input("Doppelt belastet", raw, 3072)
    assert text == f"Doppelt belastet\n{OWN}" and not cut


def test_html_only_messages_read_as_html_and_attachments_only_show_nothing():
    html = "<html><body><p>I was charged twice for order 4471 &ndash; please refund.</p><p>Thanks</p></body></html>"
    assert (
        mime_to_text(message(plain=None, html=html)).split()
        == "I was charged twice for order 4471 – please refund. Thanks".split()
    )
    only_pdf = message(plain=None, pdf=True)
    assert looks_like_mime(only_pdf) and mime_to_text(only_pdf) == ""
    assert model_input(None, only_pdf, 3072) == (None, False)  # nothing a client would show: empty_input


@pytest.mark.parametrize(
    "text",
    [
        OWN,
        "From: Jane <jane@example.org>\nSent: Monday\nSubject: invoice\n\nPlease resend the invoice.",  # pasted, no MIME field
        "Hi,\n\nContent-Type: text/plain was shown in the error.\nMIME-Version: 1.0\n",  # not at the start
        "Content-Type: text/plain\nThe app says this when I open it.",  # one line, no header block
        "Subject: refund\n\nContent-Type: text/plain",  # the MIME field after the block
        "",
    ],
)
def test_text_that_is_no_raw_message_is_left_alone(text):
    assert not looks_like_mime(text)


def test_a_broken_message_never_raises():
    broken = message().replace("quoted-printable", "x-unknown").replace('charset="utf-8"', 'charset="x-nonsense"')
    assert looks_like_mime(broken) and isinstance(mime_to_text(broken), str)
    cut_off = message(html="<p>" + "word " * 5000 + "</p>", pdf=True)[:3000]  # the input policy reads a head only
    assert looks_like_mime(cut_off) and OWN in mime_to_text(cut_off)
