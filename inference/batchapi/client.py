"""A thin layer over the official `openai` SDK: the Files and Batches calls this backend makes.

What it adds: errors in the library's two families (a retry may help, or it cannot) with fixed texts
(never a provider's message, which may quote input); a batch create that the SDK never repeats on its
own (a lost answer must be looked up by marker, not re-sent and paid twice); downloads streamed to a
private file and retried from scratch when the connection is cut.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from inference.batchapi.requestfile import open_private
from inference.batchapi.settings import COMPLETION_WINDOW, ENDPOINT
from inference.errors import PermanentError, TransientError

log = logging.getLogger("inference.batchapi")

MARKER_KEY = "inference_marker"  # batch metadata key holding the part's marker
DOWNLOAD_ATTEMPTS = 3
CHUNK = 1 << 16


class BatchApiUnavailable(TransientError):
    """The provider could not be reached, timed out, or was overloaded."""

    remedy = "the task is retried; if it repeats, check the provider's status and the connection's base URL"


class BatchApiRejected(PermanentError):
    """The provider refused a call (credentials, permissions, a missing object, an invalid request)."""

    remedy = (
        "check the Airflow connection named by INFERENCE_BATCH_CONN_ID (API key in the password, base URL "
        "in the host) and INFERENCE_BATCH_MODEL"
    )


@dataclass(frozen=True)
class BatchInfo:
    """The fields of a provider batch this backend uses (IDs, statuses, counts, times, token totals)."""

    id: str
    status: str
    input_file_id: str | None
    output_file_id: str | None
    error_file_id: str | None
    marker: str | None
    created_at: dt.datetime
    expires_at: dt.datetime | None
    finished_at: dt.datetime | None
    total: int
    completed: int
    failed: int
    input_tokens: int | None  # the batch's own usage, when the provider reports it
    output_tokens: int | None
    error_codes: tuple[str, ...]  # batch-level errors (a failed validation), codes only

    @classmethod
    def of(cls, batch: Any) -> BatchInfo:
        counts = batch.request_counts
        usage = getattr(batch, "usage", None)
        errors = getattr(getattr(batch, "errors", None), "data", None) or []
        ended = batch.completed_at or batch.failed_at or batch.expired_at or batch.cancelled_at
        return cls(
            id=batch.id,
            status=batch.status,
            input_file_id=batch.input_file_id,
            output_file_id=batch.output_file_id,
            error_file_id=batch.error_file_id,
            marker=(batch.metadata or {}).get(MARKER_KEY),
            created_at=_time(batch.created_at),
            expires_at=_time(batch.expires_at),
            finished_at=_time(ended),
            total=counts.total if counts else 0,
            completed=counts.completed if counts else 0,
            failed=counts.failed if counts else 0,
            input_tokens=usage.input_tokens if usage else None,
            output_tokens=usage.output_tokens if usage else None,
            error_codes=tuple(str(e.code)[:40] for e in errors if e.code),
        )

    @property
    def terminal(self) -> bool:
        return self.status in ("completed", "expired", "cancelled", "failed")


def _time(ts: int | None) -> dt.datetime | None:
    return dt.datetime.fromtimestamp(ts, dt.UTC) if ts else None


def _transport_errors() -> tuple[type[BaseException], ...]:
    """The HTTP library's own errors, raised while a streamed body is read (after the SDK returned)."""
    import openai

    found: list[type[BaseException]] = [openai.APIConnectionError]
    for name in ("httpx2", "httpx"):
        try:
            module = __import__(name)
        except ImportError:
            continue
        found.append(module.TransportError)
    return tuple(found)


def translate(exc: BaseException, what: str) -> Exception:
    """The library error for an SDK error: status code and error code, never the provider's text."""
    import openai

    if isinstance(exc, openai.APIStatusError):
        status = exc.status_code
        code = str(getattr(exc, "code", None) or "none")[:40]
        if status in (408, 409, 429) or status >= 500:
            return BatchApiUnavailable(f"{what}: the provider answered HTTP {status} (code {code})")
        return BatchApiRejected(f"{what}: the provider refused it with HTTP {status} (code {code})")
    if isinstance(exc, _transport_errors()):
        return BatchApiUnavailable(f"{what}: {type(exc).__name__} talking to the provider")
    return exc if isinstance(exc, Exception) else BatchApiUnavailable(what)


class BatchClient:
    """Files and Batches over one `openai.OpenAI` client (built from an Airflow connection, or by tests)."""

    def __init__(self, client: Any, *, retry_pause: float = 0.5):
        self._client = client
        self.retry_pause = retry_pause  # seconds before the first download retry (doubling)

    @classmethod
    def connect(
        cls, api_key: str, base_url: str | None = None, *, timeout: float = 300.0, retry_pause: float = 0.5
    ) -> BatchClient:
        import openai

        client = openai.OpenAI(api_key=api_key, base_url=base_url, timeout=timeout, max_retries=2)
        return cls(client, retry_pause=retry_pause)

    def close(self) -> None:
        self._client.close()

    def upload(self, path: Path) -> str:
        """Uploads a request file (purpose `batch`); returns its file ID."""
        import openai

        try:
            with path.open("rb") as fh:
                return self._client.files.create(file=(path.name, fh), purpose="batch").id
        except openai.OpenAIError as exc:
            raise translate(exc, "upload of a request file") from None

    def create(self, input_file_id: str, marker: str, run_id: str, part: int) -> BatchInfo:
        """Creates the batch once: the SDK's own retries are off here, because a create whose answer was
        lost may have happened. The caller looks the marker up (`find`) before ever trying again."""
        import openai

        metadata = {MARKER_KEY: marker, "inference_run": run_id[:512], "inference_part": str(part)}
        try:
            batch = self._client.with_options(max_retries=0).batches.create(
                input_file_id=input_file_id,
                endpoint=ENDPOINT,
                completion_window=COMPLETION_WINDOW,
                metadata=metadata,
                extra_headers={"Idempotency-Key": marker},
            )
        except openai.OpenAIError as exc:
            raise translate(exc, "batch create") from None
        return BatchInfo.of(batch)

    def find(self, marker: str, not_before: dt.datetime) -> BatchInfo | None:
        """The batch carrying this marker, looking back (newest first) to `not_before`."""
        import openai

        floor = not_before.timestamp()
        try:
            for batch in self._client.batches.list(limit=100):
                if (batch.metadata or {}).get(MARKER_KEY) == marker:
                    return BatchInfo.of(batch)
                if batch.created_at < floor:
                    return None
        except openai.APIStatusError as exc:
            if exc.status_code in (404, 405, 501):  # a compatible provider without the list endpoint
                log.warning("the provider cannot list batches: a create whose answer was lost cannot be found again")
                return None
            raise translate(exc, "batch list") from None
        except openai.OpenAIError as exc:
            raise translate(exc, "batch list") from None
        return None

    def retrieve(self, batch_id: str) -> BatchInfo:
        import openai

        try:
            return BatchInfo.of(self._client.batches.retrieve(batch_id))
        except openai.OpenAIError as exc:
            raise translate(exc, f"batch {batch_id}") from None

    def cancel(self, batch_id: str) -> BatchInfo:
        import openai

        try:
            return BatchInfo.of(self._client.batches.cancel(batch_id))
        except openai.OpenAIError as exc:
            raise translate(exc, f"cancel of batch {batch_id}") from None

    def download(self, file_id: str, dest: Path, attempts: int = DOWNLOAD_ATTEMPTS) -> int:
        """Streams a file to `dest` (0600) and returns its size. A cut connection or a short body starts
        the download again from scratch, so a partial file is never read."""
        import openai

        for attempt in range(1, attempts + 1):
            dest.unlink(missing_ok=True)
            try:
                with self._client.files.with_streaming_response.content(file_id) as response:
                    expected = response.headers.get("content-length")
                    size = 0
                    with open_private(dest) as fh:
                        for chunk in response.iter_bytes(CHUNK):
                            fh.write(chunk)
                            size += len(chunk)
                if expected is not None and expected.isdigit() and int(expected) != size:
                    raise BatchApiUnavailable(f"download of file {file_id}: {size} of {expected} bytes arrived")
                return size
            except (BatchApiUnavailable, *_transport_errors()) as exc:
                error = exc if isinstance(exc, BatchApiUnavailable) else translate(exc, f"download of file {file_id}")
            except openai.OpenAIError as exc:
                error = translate(exc, f"download of file {file_id}")
                if not isinstance(error, BatchApiUnavailable):
                    raise error from None
            log.warning("download of file %s failed (attempt %d of %d): %s", file_id, attempt, attempts, error)
            time.sleep(min(30.0, self.retry_pause * 2 ** (attempt - 1)))
        dest.unlink(missing_ok=True)
        raise error

    def delete_file(self, file_id: str) -> bool:
        """Best effort (the provider deletes batch files after 30 days anyway); False when it failed."""
        import openai

        try:
            self._client.files.delete(file_id)
            return True
        except openai.OpenAIError as exc:
            log.warning("could not delete file %s at the provider: %s", file_id, translate(exc, "file delete"))
            return False
