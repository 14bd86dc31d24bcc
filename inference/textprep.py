"""The input policy: how a ticket's subject and body become model input, and when they are skipped.

Policy, per case (tested in tests/unit/test_textprep.py):
- NULL, empty or whitespace-only subject and body: skipped with reason `empty_input`, no model call. So is
  text made only of invisible characters (zero-width spaces and joiners, BOMs, soft hyphens, word joiners,
  bidi controls, variation selectors, Hangul fillers, tag characters): a subject or body with nothing visible
  is left out of the model input, and a ticket with nothing visible in either is empty.
- NUL bytes: removed from the model input (PostgreSQL text cannot hold them; SQLite can).
- Invalid UTF-8 (possible only in SQLite) is read with `surrogateescape`; lone surrogates, from there or
  from the source, become U+FFFD in the model input.
- Other control characters (C0 except tab/newline/CR, DEL, C1) become spaces.
- Emoji, RTL and bidi text pass through unchanged (invisible characters next to visible text are kept).
- HTML (a subject or body with two tags or more of the HTML vocabulary, as help desks that ingest e-mail keep
  it) becomes the text a reader sees (`inference.htmltext`: lines, quoted replies as "> " lines, no markup,
  entities decoded); only its first `HTML_EXPANSION` x `max_chars` characters are read (flagged `truncated`
  when there is more). Such a ticket whose markup shows nothing is skipped as `empty_input` by the model
  step (plan counts it as text: `has_text` looks at characters, not markup).
- A raw e-mail message (a header block with MIME-Version or Content-Type, then MIME parts in quoted-printable
  or base64, attachments) becomes what a mail client shows (`inference.mimetext`): its text/plain part, else
  its text/html part read as HTML; headers, encodings and attachments are dropped. Only its first
  `HTML_EXPANSION` x `max_chars` characters are read, as for HTML.
- Line breaks written as the two characters backslash-n (text that was JSON-escaped on its way into a CSV
  column or a table, as some help-desk exports do: "Dear Support,\\n\\nMy sync fails ...\\n\\nBest regards,")
  are read as line breaks, so that greetings, sign-offs and quoted replies are seen line by line
  (`escaped_breaks`): only in a subject or body with no real line break that holds an escaped blank line, or
  two escaped breaks after punctuation or an HTML tag; a Windows path ("C:\\new\\notes") has neither.
- Longer than `max_chars`: cut before tokenization and the result is flagged `truncated`; the tokenizer
  also truncates to the model's max length and flags it the same way.
The content hash covers the raw subject and body, byte-exact, so any edit is seen.
"""

from __future__ import annotations

import hashlib
import re
from json.encoder import encode_basestring as _encode_basestring

from inference.htmltext import html_to_text, looks_like_html
from inference.mimetext import looks_like_mime, mime_to_text

_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")
_SURROGATE = re.compile("[\ud800-\udfff]")
# Characters that show nothing on their own: whitespace, the invisible format characters (Unicode Cf, less
# the prepended concatenation marks, which render), invisible combining marks (grapheme joiner, variation
# selectors, Mongolian free variation selectors, Khmer inherent vowels), Hangul fillers, the braille blank.
INVISIBLE = (
    "\\s\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f\u202a-\u202e\u2060-\u2064"
    "\u2066-\u206f\u2800\u3164\ufe00-\ufe0f\ufeff\uffa0\ufff9-\ufffb\U00013430-\U00013438"
    "\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0001\U000e0020-\U000e007f\U000e0100-\U000e01ef"
)
_VISIBLE = re.compile(f"[^{INVISIBLE}]")
_VISIBLE_RAW = re.compile(f"[^{INVISIBLE}\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")  # before _clean


HTML_EXPANSION = 32  # HTML read per character of model input: e-mail markup (inline styles, a <style> head) is bulky
HASH_PIECE = 65_536  # characters: longer texts are hashed a piece at a time, never copied whole


def content_hash(subject: str | None, body: str | None) -> str:
    """SHA-256 of json.dumps([subject, body], ensure_ascii=False) in UTF-8 (surrogates passed through), built
    from the json module's own string encoder without the general encoder's per-call setup (the same bytes:
    tests/unit/test_textprep.py). A long text is escaped and encoded a piece at a time (escaping is per
    character), so a 1 MB ticket costs no 1 MB copies."""
    if len(subject or "") + len(body or "") <= HASH_PIECE:
        raw = f"[{_json_string(subject)}, {_json_string(body)}]".encode("utf-8", "surrogatepass")
        return hashlib.sha256(raw).hexdigest()
    digest = hashlib.sha256(b"[")
    _hash_json_string(digest, subject)
    digest.update(b", ")
    _hash_json_string(digest, body)
    digest.update(b"]")
    return digest.hexdigest()


def _hash_json_string(digest, value: str | None) -> None:
    if value is None:
        digest.update(b"null")
        return
    digest.update(b'"')
    for at in range(0, len(value), HASH_PIECE):
        digest.update(_encode_basestring(value[at : at + HASH_PIECE])[1:-1].encode("utf-8", "surrogatepass"))
    digest.update(b'"')


def _json_string(value: str | None) -> str:
    return "null" if value is None else _encode_basestring(value)


def _clean(text: str) -> str:
    text = text.replace("\x00", "")
    text = _SURROGATE.sub("\ufffd", text)
    return _CONTROL.sub(" ", text)


def visible(text: str) -> bool:
    """Whether the text shows anything: one character that is neither whitespace nor invisible."""
    return _VISIBLE.search(text) is not None


def has_text(subject: str | None, body: str | None) -> bool:
    """Whether the input policy may leave anything to embed, without copying the text: `model_input` is not
    None, except HTML whose markup shows nothing (True here, None there: the model step skips it)."""
    return any(p and _VISIBLE_RAW.search(p) for p in (subject, body))


_ESCAPED_BREAK = re.compile(r"\\r\\n|\\n")  # the two characters backslash-n (after a backslash-r)
_ESCAPED_LINE_END = re.compile(r"[.,;:!?)\]>]\\n")  # punctuation or a tag's end, then an escaped break


def escaped_breaks(text: str) -> str:
    """`text` with its escaped line breaks read as line breaks, where it has no real one and holds an escaped
    blank line or at least two escaped breaks after punctuation (see the module docstring)."""
    if "\\n" not in text or "\n" in text or "\r" in text:
        return text
    if "\\n\\n" not in text and "\\r\\n" not in text and len(_ESCAPED_LINE_END.findall(text, 0, 1_000_000)) < 2:
        return text
    return _ESCAPED_BREAK.sub("\n", text)


def model_input(subject: str | None, body: str | None, max_chars: int) -> tuple[str | None, bool]:
    """Returns (text for the model or None when there is nothing to embed, cut-by-chars flag)."""
    parts, cut = [], False
    for part in (subject, body):
        if not part:
            continue
        part = escaped_breaks(part)
        head = part[: max_chars * HTML_EXPANSION]
        reader = mime_to_text if looks_like_mime(head) else html_to_text if looks_like_html(head) else None
        if reader is not None:  # what a mail client shows, read from the head only
            cut = cut or len(head) < len(part)
            part = reader(head)
        parts.append(_clean(part).strip())
    text = "\n".join(p for p in parts if p and visible(p))
    if not text:
        return None, False
    if len(text) > max_chars:
        return text[:max_chars].rstrip(), True
    return text, cut


def estimate_tokens(subject: str | None, body: str | None, max_seq_length: int) -> int:
    """A cheap token estimate for shard balancing: ~4 characters a token, capped by truncation."""
    return tokens_for_chars(len(subject or "") + len(body or ""), max_seq_length)


def tokens_for_chars(chars: int, max_seq_length: int) -> int:
    """`estimate_tokens` from the character count alone (plan reads counts, not text)."""
    return min(max_seq_length, 2 + (chars + 3) // 4)


def max_chars_for(max_seq_length: int) -> int:
    """Real text averages 3-5 characters a token: cutting at 12x the token limit keeps what the model
    would see while bounding tokenizer work on megabyte tickets."""
    return max_seq_length * 12


_SENTENCE_END = re.compile(r"(?<=[.!?。！？])\s+|\n+")


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """Character ranges of the text's sentences (split after . ! ? and at line breaks), trimmed."""
    spans, start = [], 0
    for match in [*_SENTENCE_END.finditer(text), None]:
        end = match.start() if match else len(text)
        piece = text[start:end]
        if piece.strip():
            left = start + (len(piece) - len(piece.lstrip()))
            spans.append((left, start + len(piece.rstrip())))
        if match:
            start = match.end()
    return spans


def token_ranges(char_spans: list[tuple[int, int]], offsets: list[tuple[int, int]]) -> list[tuple[int, int] | None]:
    """For each character range, the [first, last+1) tokens that start inside it (None if truncated away).

    Special tokens carry the offset (0, 0) and belong to no sentence.
    """
    out: list[tuple[int, int] | None] = []
    k = 0
    for start, end in char_spans:
        while k < len(offsets) and (offsets[k][1] <= offsets[k][0] or offsets[k][0] < start):
            k += 1
        first = k
        while k < len(offsets) and offsets[k][1] > offsets[k][0] and offsets[k][0] < end:
            k += 1
        out.append((first, k) if k > first else None)
    return out
