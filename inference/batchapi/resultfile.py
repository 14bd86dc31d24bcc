"""Reading a part's output and error files, line by line, into one outcome per request.

Lines arrive in any order and may be damaged, repeated, or about requests this part never sent. A line
counts only when its custom_id names one of the part's own requests (same ticket, same text hash, same
model version); everything else is counted and dropped. Each request then ends as exactly one of:
a reply (its summary, to be validated and upserted like any other output) or a typed failure
(the provider's per-request error, expiry, a missing line, or contradictory duplicate lines).

Provider texts (error messages, the model's words on failures) are never kept: only error codes that
look like codes.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from inference.batchapi.requestfile import parse_custom_id
from inference.records import Failure, FailureKind

_CODE = re.compile(r"[A-Za-z0-9_.\-]{1,40}")
# Per-request codes the providers use when a batch ended before the request ran.
_NOT_RUN = {"batch_expired": "expired", "batch_cancelled": "cancelled"}
TERMINAL = ("completed", "expired", "cancelled", "failed")


@dataclass(frozen=True, slots=True)
class Reply:
    summary: str
    input_tokens: int | None = field(default=None, compare=False)  # a repeated line is the same reply
    output_tokens: int | None = field(default=None, compare=False)


@dataclass(frozen=True, slots=True)
class _Error:
    kind: FailureKind
    message: str


@dataclass
class LineCounts:
    lines: int = 0
    replies: int = 0
    errors: int = 0
    duplicates: int = 0  # repeated lines for one request (the same outcome again)
    conflicting: int = 0  # requests with contradicting lines: failed, never written
    unknown: int = 0  # well-formed, but not a request of this part (other ticket, text or version)
    malformed: int = 0  # not JSON, not an object, no usable custom_id, or a broken response
    missing: int = 0  # requests of the part with no line at all

    @property
    def ignored(self) -> int:
        return self.duplicates + self.unknown + self.malformed


@dataclass
class PartOutcome:
    replies: dict[str, Reply] = field(default_factory=dict)
    failures: list[Failure] = field(default_factory=list)
    counts: LineCounts = field(default_factory=LineCounts)
    input_tokens: int = 0  # summed from the lines' usage (every line the provider billed)
    output_tokens: int = 0


def _code(value: object) -> str:
    return value if isinstance(value, str) and _CODE.fullmatch(value) else "unknown"


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


class ResultReader:
    """Feed it every line of the output and error files (any order), then `finish` once."""

    def __init__(self, expected: Mapping[str, str], tag: str):
        self.expected = expected  # ticket_id -> content hash of the text this part sent
        self.tag = tag
        self.counts = LineCounts()
        self._seen: dict[str, list[Reply | _Error | None]] = {}
        self.input_tokens = 0
        self.output_tokens = 0

    def feed_all(self, lines: Iterable[bytes | str]) -> None:
        for line in lines:
            self.feed(line)

    def feed(self, raw: bytes | str) -> None:
        if isinstance(raw, bytes):
            try:
                raw = raw.decode("utf-8")
            except UnicodeDecodeError:
                self.counts.lines += 1
                self.counts.malformed += 1
                return
        if not raw.strip():
            return
        self.counts.lines += 1
        try:
            obj = json.loads(raw)
        except ValueError:
            self.counts.malformed += 1
            return
        key = parse_custom_id(obj.get("custom_id")) if isinstance(obj, dict) else None
        if key is None:
            self.counts.malformed += 1
            return
        if key.version_tag != self.tag or self.expected.get(key.ticket_id) != key.content_hash:
            self.counts.unknown += 1
            return
        outcome = self._outcome(obj)
        if outcome is None:
            self.counts.malformed += 1
        self._seen.setdefault(key.ticket_id, []).append(outcome)

    def _outcome(self, obj: dict) -> Reply | _Error | None:
        response, error = obj.get("response"), obj.get("error")
        status = response.get("status_code") if isinstance(response, dict) else None
        body = response.get("body") if isinstance(response, dict) else None
        if error or status != 200:
            code = error.get("code") if isinstance(error, dict) else None
            if code is None and isinstance(body, dict) and isinstance(body.get("error"), dict):
                code = body["error"].get("code") or body["error"].get("type")
            code = _code(code)
            if code in _NOT_RUN:
                return _Error(FailureKind.BATCH_EXPIRED, f"the batch was {_NOT_RUN[code]} before this request ran")
            http = status if isinstance(status, int) else "none"
            return _Error(FailureKind.BATCH_REQUEST_ERROR, f"the provider answered HTTP {http}, code {code}")
        try:
            choice = body["choices"][0]
            content = choice["message"]["content"]
        except (KeyError, IndexError, TypeError):
            return None
        if not isinstance(content, str):
            return None
        usage = body.get("usage") if isinstance(body.get("usage"), dict) else {}
        reply = Reply(content.strip(), _int(usage.get("prompt_tokens")), _int(usage.get("completion_tokens")))
        self.input_tokens += reply.input_tokens or 0
        self.output_tokens += reply.output_tokens or 0
        if choice.get("finish_reason") == "content_filter":
            return _Error(FailureKind.BATCH_REQUEST_ERROR, "the provider filtered this request's output")
        return reply

    def finish(self, batch_status: str) -> PartOutcome:
        """One outcome per expected request; `batch_status` decides what a request without lines means."""
        out = PartOutcome(counts=self.counts, input_tokens=self.input_tokens, output_tokens=self.output_tokens)
        for ticket_id, digest in sorted(self.expected.items()):
            lines = self._seen.get(ticket_id)
            if not lines:
                self.counts.missing += 1
                out.failures.append(Failure(ticket_id, digest, _missing_kind(batch_status)))
                continue
            first = lines[0]
            if any(other != first for other in lines[1:]):
                self.counts.conflicting += 1
                out.failures.append(
                    Failure(ticket_id, digest, FailureKind.INVALID_OUTPUT, "contradicting lines for one request")
                )
                continue
            self.counts.duplicates += len(lines) - 1
            if first is None:
                out.failures.append(
                    Failure(ticket_id, digest, FailureKind.INVALID_OUTPUT, "the batch output line is malformed")
                )
            elif isinstance(first, _Error):
                self.counts.errors += 1
                out.failures.append(Failure(ticket_id, digest, first.kind, first.message))
            else:
                self.counts.replies += 1
                out.replies[ticket_id] = first
        return out


def _missing_kind(batch_status: str) -> FailureKind:
    if batch_status in ("expired", "cancelled"):
        return FailureKind.BATCH_EXPIRED
    if batch_status == "failed":
        return FailureKind.BATCH_REQUEST_ERROR
    return FailureKind.BATCH_MISSING
