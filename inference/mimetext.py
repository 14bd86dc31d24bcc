"""Raw e-mail in a ticket body: some help desks (and home-grown mail ingestion) keep the whole message as it
arrived, headers, MIME parts, quoted-printable or base64 encodings and attachments included:

    MIME-Version: 1.0
    Content-Type: multipart/alternative; boundary="b1"
    ...
    --b1
    Content-Type: text/plain; charset="utf-8"
    Content-Transfer-Encoding: quoted-printable

    I was charged twice =E2=80=93 please refund ...

`mime_to_text` (applied by the input policy, `inference.textprep.model_input`, to a subject or body that
`looks_like_mime`) reads it with the standard library's e-mail parser and keeps what a mail client shows: the
text/plain part, or else the text/html part as `inference.htmltext` reads it; headers, encodings and
attachments are dropped. A message with neither part shows nothing (the model step then skips the ticket as
`empty_input`, as it does HTML that shows nothing).

Detection (`looks_like_mime`) wants the text to open with a header block (one "Name: value" line after another,
folded lines allowed, then an empty line) that holds a MIME-Version or Content-Type header: a customer who
pastes a forwarded message ("From: ... Sent: ... Subject: ...") into a reply has no such block at the start, so
that text stays as it is (inference.mailtext cuts such a forwarded tail).
"""

from __future__ import annotations

import email
import email.policy
import re
from email.message import EmailMessage

from inference.htmltext import html_to_text

_HEADER = re.compile(r"[!-9;-~]{1,76}:[^\n]*\n(?:[ \t][^\n]*\n)*")  # a field name, its value, folded lines
_BLOCK = re.compile(rf"\s*(?:{_HEADER.pattern}){{2,200}}\r?\n")
_MIME_FIELD = re.compile(r"^(?:mime-version|content-type)[ \t]*:", re.IGNORECASE | re.MULTILINE)
MAX_HEADER_CHARS = 64 * 1024  # a header block longer than this is not looked at


def looks_like_mime(text: str) -> bool:
    """Whether a subject or body is a raw e-mail message: a header block with MIME-Version or Content-Type."""
    head = text[:MAX_HEADER_CHARS].replace("\r\n", "\n")
    block = _BLOCK.match(head)
    return block is not None and _MIME_FIELD.search(block.group()) is not None


def mime_to_text(raw: str) -> str:
    """What a mail client shows of the message: its text/plain part, else its text/html part as text, else
    nothing. Never raises on a broken message (defects are tolerated, undecodable bytes replaced)."""
    message: EmailMessage = email.message_from_string(raw.lstrip(), policy=email.policy.default)  # type: ignore[assignment]
    body = message.get_body(preferencelist=("plain", "html"))
    if body is None:
        return ""
    try:
        content = body.get_content()
    except (LookupError, ValueError):  # an unknown charset or a broken encoding: the payload's own bytes
        payload = body.get_payload(decode=True) or b""
        content = payload.decode("utf-8", errors="replace")
    if not isinstance(content, str):
        return ""
    return html_to_text(content) if body.get_content_type() == "text/html" else content
