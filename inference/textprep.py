"""The input policy: how a ticket's subject and body become model input, and when they are skipped.

Policy, per case (tested in tests/unit/test_textprep.py):
- NULL, empty or whitespace-only subject and body: skipped with reason `empty_input`, no model call.
- NUL bytes: removed from the model input (PostgreSQL text cannot hold them; SQLite can).
- Invalid UTF-8 (possible only in SQLite) is read with `surrogateescape`; lone surrogates, from there or
  from the source, become U+FFFD in the model input.
- Other control characters (C0 except tab/newline/CR, DEL, C1) become spaces.
- Emoji, RTL and bidi text pass through unchanged.
- Longer than `max_chars`: cut before tokenization and the result is flagged `truncated`; the tokenizer
  also truncates to the model's max length and flags it the same way.
The content hash covers the raw subject and body, byte-exact, so any edit is seen.
"""

from __future__ import annotations

import hashlib
import json
import re

_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")
_SURROGATE = re.compile("[\ud800-\udfff]")


def content_hash(subject: str | None, body: str | None) -> str:
    raw = json.dumps([subject, body], ensure_ascii=False).encode("utf-8", "surrogatepass")
    return hashlib.sha256(raw).hexdigest()


def _clean(text: str) -> str:
    text = text.replace("\x00", "")
    text = _SURROGATE.sub("\ufffd", text)
    return _CONTROL.sub(" ", text)


def model_input(subject: str | None, body: str | None, max_chars: int) -> tuple[str | None, bool]:
    """Returns (text for the model or None when there is nothing to embed, cut-by-chars flag)."""
    parts = [_clean(p).strip() for p in (subject, body) if p]
    text = "\n".join(p for p in parts if p)
    if not text:
        return None, False
    if len(text) > max_chars:
        return text[:max_chars].rstrip(), True
    return text, False


def estimate_tokens(subject: str | None, body: str | None, max_seq_length: int) -> int:
    """A cheap token estimate for shard balancing: ~4 characters a token, capped by truncation."""
    chars = len(subject or "") + len(body or "")
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
