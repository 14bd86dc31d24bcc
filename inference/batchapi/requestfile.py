"""The request file: one JSON Lines request per ticket, split under the provider's limits.

A request's `custom_id` is `t1:<ticket id>:<content hash>:<version tag>`: the ticket, the exact text
(sha256 of the raw subject and body, as stored with every result) and the model version (a tag of the
run's version string). A result can therefore only ever be matched to the very text and version it
was computed from; a late or duplicated line for an older text or version matches nothing.

The files hold ticket text: they are written only with mode 0600 (in a private 0700 directory for
uploads) and never logged.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import json
import os
import re
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from inference.batchapi.settings import ENDPOINT, BatchSettings
from inference.errors import ConfigError
from inference.records import SkipReason, SourceTicket
from inference.textprep import content_hash, estimate_tokens, model_input

PREFIX = "t1"
_HASH = re.compile(r"[0-9a-f]{64}")
_TAG = re.compile(r"[0-9a-f]{16}")
MAX_TICKET_ID = 512  # the width of ticket_id in our tables (revision 0005)


def version_tag(model_version: str) -> str:
    return hashlib.sha256(model_version.encode("utf-8")).hexdigest()[:16]


@dataclass(frozen=True, slots=True)
class RequestKey:
    ticket_id: str
    content_hash: str
    version_tag: str

    @property
    def custom_id(self) -> str:
        return f"{PREFIX}:{self.ticket_id}:{self.content_hash}:{self.version_tag}"


def make_custom_id(ticket_id: str, digest: str, model_version: str) -> str:
    return RequestKey(ticket_id, digest, version_tag(model_version)).custom_id


def parse_custom_id(custom_id: object) -> RequestKey | None:
    """The key a custom_id carries, or None when it is not one of ours (or is damaged)."""
    if not isinstance(custom_id, str) or not custom_id.startswith(PREFIX + ":"):
        return None
    parts = custom_id[len(PREFIX) + 1 :].rsplit(":", 2)  # the ticket ID may itself contain ':'
    if len(parts) != 3:
        return None
    ticket_id, digest, tag = parts
    if not ticket_id or len(ticket_id) > MAX_TICKET_ID or not _HASH.fullmatch(digest) or not _TAG.fullmatch(tag):
        return None
    return RequestKey(ticket_id, digest, tag)


@dataclass(frozen=True, slots=True)
class Request:
    """One ticket's request, as recorded in inference_batch_requests (no text)."""

    ticket_id: str
    content_hash: str
    source_updated_at: dt.datetime
    truncated: bool
    est_tokens: int
    size: int  # bytes of its line in the request file


def build_request(
    ticket: SourceTicket, settings: BatchSettings, model_version: str
) -> tuple[Request, bytes] | SkipReason:
    """The request line for one ticket's current text, or why it needs none (empty text)."""
    text, cut = model_input(ticket.subject, ticket.body, settings.max_chars)
    if text is None:
        return SkipReason.EMPTY_INPUT
    digest = content_hash(ticket.subject, ticket.body)
    line = {
        "custom_id": make_custom_id(ticket.ticket_id, digest, model_version),
        "method": "POST",
        "url": ENDPOINT,
        "body": settings.body(text),
    }
    data = (json.dumps(line, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")
    est = estimate_tokens(ticket.subject, ticket.body, max(1, settings.max_chars // 4)) + len(settings.prompt) // 4
    return Request(ticket.ticket_id, digest, ticket.version_at, cut, est, len(data)), data


def split_parts(requests: Iterable[Request], max_requests: int, max_bytes: int) -> list[list[Request]]:
    """Consecutive groups, each within both limits (requests per file, bytes per file)."""
    parts: list[list[Request]] = []
    current: list[Request] = []
    size = 0
    for request in requests:
        if request.size > max_bytes:
            raise ConfigError(
                f"INFERENCE_BATCH_MAX_BYTES={max_bytes} is smaller than one request ({request.size} bytes): "
                "raise it, or lower INFERENCE_BATCH_MAX_CHARS"
            )
        if current and (len(current) >= max_requests or size + request.size > max_bytes):
            parts.append(current)
            current, size = [], 0
        current.append(request)
        size += request.size
    if current:
        parts.append(current)
    return parts


@contextlib.contextmanager
def private_dir(prefix: str = "inference-batch-") -> Iterator[Path]:
    """A 0700 temporary directory, removed with everything in it on exit (also on errors)."""
    path = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def open_private(path: Path):
    """A new file only its owner can read (0600), for writing bytes; refuses to overwrite."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    return os.fdopen(fd, "wb")
