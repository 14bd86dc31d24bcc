"""Tickets as HTML e-mail replies, the way three common mail clients write them (Gmail, Outlook, Apple Mail),
for the quality test and benchmark of the input policy's HTML reading (`inference.htmltext`): the customer's
message, then the client's quoted earlier message (another ticket's text), all in the client's markup.
Synthetic: the markup follows what those clients send; the words are the labelled sets' own.

`mime_mail_set`: the same replies as raw e-mail messages, as a help desk that keeps the message as it arrived
stores them (`inference.mimetext`): headers, a quoted-printable text/plain part and a base64 text/html part,
some with a PDF attachment, some HTML only.

`escaped_mail_set`: the same replies as plain text with a sign-off, as an export that JSON-escaped its bodies
into a CSV column writes them: every line break as the two characters backslash-n (`inference.textprep`'s
`escaped_breaks`)."""

from __future__ import annotations

import html
import random
from collections.abc import Sequence
from email.message import EmailMessage

STYLES = ("gmail", "outlook", "apple")


def _lines(text: str, wrap: str) -> str:
    return "".join(wrap.format(html.escape(line)) if line.strip() else wrap.format("<br>") for line in text.split("\n"))


def as_html_mail(own: str, quoted: str, style: str, name: str = "Jane Doe") -> str:
    """`own` (the customer's message) replying to `quoted`, as `style` (one of STYLES) writes it."""
    if style == "gmail":
        return (
            f'<div dir="ltr">{_lines(own, "<div>{}</div>")}</div><br><div class="gmail_quote">'
            '<div dir="ltr" class="gmail_attr">On Mon, Nov 3, 2026 at 10:02\u202fAM Support &lt;<a '
            'href="mailto:support@example.com">support@example.com</a>&gt; wrote:<br></div>'
            '<blockquote class="gmail_quote" style="margin:0px 0px 0px 0.8ex;border-left:1px solid '
            f'rgb(204,204,204);padding-left:1ex"><div dir="ltr">{_lines(quoted, "<div>{}</div>")}</div></blockquote>'
            "</div>"
        )
    if style == "outlook":
        p = '<p class="MsoNormal">{}<o:p></o:p></p>'
        return (
            '<html xmlns:o="urn:schemas-microsoft-com:office:office"><head><meta http-equiv="Content-Type" '
            'content="text/html; charset=utf-8"><style><!-- p.MsoNormal, li.MsoNormal {margin:0cm; '
            'font-size:11.0pt; font-family:"Calibri",sans-serif;} --></style></head><body lang="EN-GB">'
            f'<div class="WordSection1">{_lines(own, p)}<p class="MsoNormal"><o:p>&nbsp;</o:p></p>'
            '<div style="border:none;border-top:solid #E1E1E1 1.0pt;padding:3.0pt 0cm 0cm 0cm">'
            '<p class="MsoNormal"><b>From:</b> Support Team &lt;support@example.com&gt; <br><b>Sent:</b> '
            f"Monday, November 3, 2026 10:02 AM<br><b>To:</b> {html.escape(name)}<br><b>Subject:</b> Re: your "
            f"request<o:p></o:p></p></div>{_lines(quoted, p)}</div></body></html>"
        )
    if style == "apple":
        return (
            '<html><head><meta http-equiv="content-type" content="text/html; charset=utf-8"></head><body '
            f'style="overflow-wrap: break-word;">{_lines(own, "<div>{}</div>")}<div><br><blockquote type="cite">'
            "<div>On 3 Nov 2026, at 10:02, Support &lt;support@example.com&gt; wrote:</div><br>"
            f"<div><div>{_lines(quoted, '<div>{}</div>')}</div></div></blockquote></div><br></body></html>"
        )
    raise ValueError(f"style must be one of {STYLES}, not {style!r}")


def html_mail_set(examples: Sequence, seed: int = 7) -> list[tuple[str | None, str]]:
    """(subject, HTML body) per labelled example (`.subject`, `.body`, `.label`): its body replying to another
    example's body of another label, the styles in turn."""
    rng = random.Random(seed)
    out = []
    for k, e in enumerate(examples):
        other = rng.choice([x for x in examples if x.label != e.label])
        out.append((e.subject, as_html_mail(e.body or "", other.body or "", STYLES[k % len(STYLES)])))
    return out


def as_mime_mail(own: str, quoted: str, style: str, subject: str | None, k: int) -> str:
    """`as_html_mail` as a raw message: multipart/alternative (text/plain in quoted-printable with the quote as
    "> " lines, text/html in base64), every other one with a PDF attached, every third one HTML only."""
    message = EmailMessage()
    message["From"] = "Jane Doe <jane.doe@example.org>"
    message["To"] = "Support <support@example.com>"
    message["Subject"] = f"Re: {subject or 'your request'}"
    message["Date"] = "Tue, 04 Nov 2026 09:15:00 +0100"
    message["Message-ID"] = f"<mail-{k}@example.org>"
    markup = as_html_mail(own, quoted, style)
    if k % 3 == 2:
        message.set_content(markup, subtype="html", cte="base64")
    else:
        quote = "\n".join(f"> {line}" for line in quoted.split("\n"))
        plain = f"{own}\n\nOn Mon, Nov 3, 2026 at 10:02 AM Support <support@example.com> wrote:\n{quote}\n"
        message.set_content(plain, cte="quoted-printable")
        message.add_alternative(markup, subtype="html", cte="base64")
    if k % 2:
        message.add_attachment(
            b"%PDF-1.4\n" + bytes(range(256)) * 8, maintype="application", subtype="pdf", filename="scan.pdf"
        )
    return message.as_string()


def mime_mail_set(examples: Sequence, seed: int = 7) -> list[tuple[str | None, str]]:
    """`html_mail_set` with each body a raw e-mail message (`as_mime_mail`)."""
    rng = random.Random(seed)
    out = []
    for k, e in enumerate(examples):
        other = rng.choice([x for x in examples if x.label != e.label])
        out.append((e.subject, as_mime_mail(e.body or "", other.body or "", STYLES[k % len(STYLES)], e.subject, k)))
    return out


def as_escaped_mail(own: str, quoted: str, k: int) -> str:
    """`own` replying to `quoted` in plain text (a sign-off, then the quote as "> " lines) with every line break
    escaped: backslash-n, or backslash-r backslash-n for every other one (an export made on Windows)."""
    quote = "\n".join(f"> {line}" for line in quoted.split("\n"))
    text = f"{own}\n\nBest regards,\nJane Doe\n\nOn Mon, Nov 3, 2026 at 10:02 AM Support <support@example.com> wrote:\n{quote}"
    return text.replace("\n", "\\r\\n" if k % 2 else "\\n")


def escaped_mail_set(examples: Sequence, seed: int = 7) -> list[tuple[str | None, str]]:
    """`html_mail_set` with each body a plain-text reply whose line breaks are escaped (`as_escaped_mail`)."""
    rng = random.Random(seed)
    out = []
    for k, e in enumerate(examples):
        other = rng.choice([x for x in examples if x.label != e.label])
        out.append((e.subject, as_escaped_mail(e.body or "", other.body or "", k)))
    return out
