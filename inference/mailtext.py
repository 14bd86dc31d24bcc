"""What part of a ticket is the customer's own request: mail structure and filler, no model needed.

- `split_tail` / `own_message`: where the customer's own message ends: the first quoted-reply header
  ("On ... wrote:", "-----Original Message-----", an Outlook From:/Sent: block), a forwarded message, the
  signature separator "-- ", "Sent from my ...", a disclaimer, or a sign-off line ("Best regards,") that is
  not the first line. The predictor cuts the model input there before encoding (`ticket_text`), so the
  category and the summary come from what the customer wrote, not from the thread they replied to.
- `is_filler` / `is_loglike` / `candidate_sentences`: sentences that say nothing about the request
  (greetings, thanks, sign-offs, politeness, pasted log lines); the summary head skips them.

Measured in benchmarks/summary_quality.py (synthetic threads on the held-out set: category accuracy 0.625
with the thread, 0.910 with the tail cut, measured with the 66 examples of the time; BENCHMARKS.md).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from inference.textprep import model_input

# `ticket_text`'s version, part of the model version (2: HTML read as text; 3: raw MIME messages read as mail;
# 4: line breaks escaped as backslash-n read as line breaks)
INPUT_POLICY = "mime-html-mail-tail-cut-4"

_QUOTE_HEADERS = [
    re.compile(r"^\s*-{2,}\s*(original message|forwarded message)\s*-{2,}", re.I),
    re.compile(r"^\s*on\b.{0,200}\bwrote:\s*$", re.I),  # On Mon, 3 Nov 2026, Support <..> wrote:
    # Le ... a écrit :, Am ... schrieb Name <addr>:, El ... escribió:, Op ... schreef ...:, Il ... ha scritto:
    re.compile(r"^\s*(le|am|el|op|il)\b.{0,200}\b(a écrit|schrieb|escribió|schreef|ha scritto)\b.{0,200}:\s*$", re.I),
]
_TAIL_MARKERS = [
    *_QUOTE_HEADERS,
    re.compile(r"^\s*_{5,}\s*$"),  # Outlook's separator line
    re.compile(r"^\s*--\s*$"),  # the standard signature separator "-- "
    re.compile(r"^\s*(sent from my|get outlook for)\b", re.I),
    re.compile(
        r"^\s*(confidentiality notice|disclaimer|this (e-?mail|message)( and any attachments)?"
        r" (is|are|may (be|contain)|contains?) (confidential|privileged|intended))",
        re.I,
    ),
]
_FROM_HEADER = re.compile(r"^\s*(from|von|de|van|da)\s*:\s*\S", re.I)
_SENT_HEADER = re.compile(r"^\s*(sent|date|gesendet|envoyé|enviado|datum|to|subject)\s*:", re.I)
SIGN_OFF_LINE = re.compile(
    r"^\s*((best|kind|warm|many)\s+)?(regards|wishes|thanks|thank you)\b[^.!?]{0,20}[,!.]?\s*$"
    r"|^\s*(cheers|sincerely|yours( truly| sincerely)?|best|thx|ta|regards|mit freundlichen grüßen|cordialement"
    r"|saludos|atentamente|groeten|met vriendelijke groet)\s*[,!.]?\s*$",
    re.I,
)
_QUOTED = re.compile(r"^\s*>")
_QUOTE_MARKS = re.compile(r"^(\s*>)+")
_LETTER = re.compile(r"[^\W\d_]")


def split_tail(text: str) -> int:
    """The character offset where the customer's own message ends (len(text) when nothing follows it).
    A quote header counts inside a quote too ("> On ... wrote:": Apple Mail puts it in its blockquote)."""
    offset, lines = 0, text.splitlines(keepends=True)
    for k, line in enumerate(lines):
        stripped = line.strip()
        if any(m.match(line) for m in _TAIL_MARKERS):
            return offset
        if _QUOTED.match(line) and any(m.match(_QUOTE_MARKS.sub("", line)) for m in _QUOTE_HEADERS):
            return offset
        if _FROM_HEADER.match(line) and any(_SENT_HEADER.match(x) for x in lines[k + 1 : k + 4]):
            return offset
        if k > 0 and stripped and SIGN_OFF_LINE.match(stripped):
            return offset
        offset += len(line)
    return len(text)


def own_message(text: str) -> str:
    """`text` without its quoted/forwarded tail, signature and disclaimer; the whole text when nothing
    with a letter would be left (a ticket that is only a forwarded message keeps it)."""
    end = split_tail(text)
    if end >= len(text):
        return text
    own = text[:end].rstrip()
    return own if _LETTER.search(own) else text


def ticket_text(subject: str | None, body: str | None, max_chars: int) -> tuple[str | None, bool]:
    """The model input as the pipeline builds it: the input policy (`inference.textprep.model_input`),
    then the mail tail cut off (`own_message`). Returns (text or None, cut-by-chars flag)."""
    text, cut = model_input(subject, body, max_chars)
    return (None, cut) if text is None else (own_message(text), cut)


def quoted_lines(text: str) -> list[tuple[int, int]]:
    """Character ranges of lines quoted with ">" (anywhere in the text)."""
    out, offset = [], 0
    for line in text.splitlines(keepends=True):
        if _QUOTED.match(line):
            out.append((offset, offset + len(line)))
        offset += len(line)
    return out


# --- filler -------------------------------------------------------------------------------------------
WORD = re.compile(r"[^\W\d_]+(?:'[^\W\d_]+)?")
EN_FUNCTION_WORDS = frozenset(
    """a about after again all also am an and any are as at be been before being but by can cannot
    could did do does doing don't down during each even ever every for from get got had has have
    having he her here him his how i i'm i've if in into is isn't it it's its just let me more most my
    need no not now of off on once only or other our out over please same she should since so some
    still such than that the their them then there these they this those through to too under until
    up us very was wasn't we were what when where which while who why will with won't would you your
    yet able want cant dont doesnt didnt im ive hi hello thanks thank""".split()
)
GREETING = re.compile(
    r"^\s*(hi|hello|hey|dear|hiya|greetings|good (morning|afternoon|evening|day)|hallo|hola|bonjour|ciao|olá|hej)"
    r"\b[^,.!?:\n]{0,40}[,.!:]\s*",
    re.I,
)
THANKS = re.compile(r"^\s*(many |thanks? |thank you )*(thanks|thank you|thx|cheers|much appreciated)\b", re.I)
_FILLER_WORDS = EN_FUNCTION_WORDS | set(
    """please pls plz thanks thank thx help helping assist assistance support team guys folks advance appreciate
    appreciated urgent urgently asap possible soon quickly quick fast look looking into check advise regards
    kind best warm sincerely cheers hear forward reply response respond update updates know let get back
    anything everything issue problem matter question questions quite really very much ok okay again hope
    hoping well day morning afternoon evening dear hi hello hey greetings sir madam fix sort resolve asap""".split()
)
_LOGLIKE = re.compile(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}|\b(INFO|WARN|ERROR|DEBUG)\b|\w+=\S+|0x[0-9a-f]{4,}")


def strip_greeting(text: str, start: int, end: int) -> int:
    """New start of a sentence without a leading greeting ("Hi, ", "Hello team, "), when something is left."""
    m = GREETING.match(text[start:end])
    if m and text[start + m.end() : end].strip():
        return start + m.end()
    return start


def is_filler(sentence: str) -> bool:
    """Greetings, thanks, sign-offs and politeness that say nothing about the request."""
    s = sentence.strip()
    m = GREETING.match(s)
    if m:
        s = s[m.end() :]
    if not s or THANKS.match(s) or SIGN_OFF_LINE.match(s):
        return True
    words = [w.lower() for w in WORD.findall(s)]
    return not words or all(w in _FILLER_WORDS for w in words)


def is_loglike(sentence: str) -> bool:
    """A pasted log or key=value line (two or more timestamps, log levels, assignments, addresses)."""
    return len(_LOGLIKE.findall(sentence)) >= 2


def candidate_sentences(text: str, sentences: Sequence[tuple[int, int]]) -> list[int]:
    """Indexes of the sentences that are the customer's own words: before the quoted/signature tail, not in
    a ">" quoted line, not a greeting/thanks/sign-off, not a pasted log line."""
    end = split_tail(text)
    quoted = quoted_lines(text)
    out = []
    for i, (a, b) in enumerate(sentences):
        if a >= end or any(qa <= a < qb for qa, qb in quoted):
            continue
        piece = text[a:b]
        if is_filler(piece) or is_loglike(piece):
            continue
        out.append(i)
    return out
