"""A local OpenAI-compatible Files + Batches server on 127.0.0.1, for the real `openai` SDK to talk to.

Shapes follow the provider's API reference: file objects, batch objects (status, request_counts, usage,
metadata, file IDs, timestamps), cursor-paged lists (newest first), and the batch output/error line
format ({"id", "custom_id", "response": {"status_code", "request_id", "body"}, "error"}). A batch is
validated when it is created, goes `validating` -> `in_progress` on its first poll, and ends after
`Behaviour.polls` polls; its "model" answers each request with a summary derived from the user
message's hash (tests recompute it), never with the text itself.

`Behaviour` (set on the server before a batch is created) makes the provider misbehave the documented
ways: per-request errors, expiry part-way, missing and duplicate lines, contradicting duplicates,
malformed and foreign lines, shuffled order, downloads cut mid-body, a create whose answer is lost,
a failed validation, slow completion. Nothing here imports the code under test.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
import random
import socket
import threading
import time
from dataclasses import dataclass, field
from email.parser import BytesParser
from email.policy import default as email_policy
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

API_KEY = "sk-test-local-only"
MAX_REQUESTS, MAX_BYTES = 50_000, 200 * 1024 * 1024


def fake_summary(user_text: str) -> str:
    """What this provider's "model" answers for a ticket text (a test computes the same to check matching)."""
    return "Summary " + hashlib.sha256(user_text.encode("utf-8")).hexdigest()[:12]


def ticket_of(custom_id: str) -> str:
    """The ticket ID inside one of the pipeline's custom IDs (`t1:<ticket>:<hash>:<tag>`)."""
    return custom_id.split(":", 1)[1].rsplit(":", 2)[0]


@dataclass
class Behaviour:
    polls: int = 1  # retrieves before the batch ends (slow completion: raise it)
    fail: set[str] = field(default_factory=set)  # ticket IDs answered with HTTP 400 (error file)
    drop: set[str] = field(default_factory=set)  # ticket IDs with no line at all
    duplicate: set[str] = field(default_factory=set)  # ticket IDs whose line appears twice
    contradict: set[str] = field(default_factory=set)  # ticket IDs with a second, different answer
    malformed_lines: int = 0  # garbage lines added to the output file
    foreign_lines: int = 0  # well-formed lines with custom IDs nobody sent
    expire_after: int | None = None  # end `expired` after this many requests ran; the rest: batch_expired
    shuffle: bool = True  # output in an order other than the input's
    fail_validation: bool = False  # the batch ends `failed` with errors, no output
    report_usage: bool = True  # the batch object carries its usage totals
    never_end: bool = False  # stays in_progress (only a cancel ends it)


@dataclass
class Faults:
    """One-shot transport faults, counted down as they fire."""

    cut_downloads: int = 0  # file downloads that stop half-way (full Content-Length announced)
    lose_create_answers: int = 0  # batch creates that happen, then the connection drops before the answer
    unavailable: int = 0  # requests answered 503 (any endpoint but uploads)
    no_list: bool = False  # GET /v1/batches is not implemented (some compatible providers)


class OpenAIServer:
    def __init__(self, api_key: str = API_KEY):
        self.api_key = api_key
        self.behaviour = Behaviour()
        self.faults = Faults()
        self.files: dict[str, dict] = {}
        self.contents: dict[str, bytes] = {}
        self.batches: dict[str, dict] = {}
        self._behaviours: dict[str, Behaviour] = {}
        self._polls: dict[str, int] = {}
        self._ids = itertools.count(1)
        self.lock = threading.RLock()
        self.calls: list[tuple[str, str]] = []  # (method, path) of every request, in order
        self.creates = 0  # batches created (what a provider would bill)
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="openai-server", daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}/v1"

    def __enter__(self) -> OpenAIServer:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    # -- state -------------------------------------------------------------------------------------
    def _new_id(self, prefix: str) -> str:
        return f"{prefix}_{next(self._ids):06d}{random.getrandbits(32):08x}"

    def add_file(self, data: bytes, filename: str, purpose: str) -> dict:
        file_id = self._new_id("file")
        obj = {
            "id": file_id,
            "object": "file",
            "bytes": len(data),
            "created_at": int(time.time()),
            "expires_at": int(time.time()) + 30 * 86400,
            "filename": filename,
            "purpose": purpose,
            "status": "processed",
        }
        self.files[file_id] = obj
        self.contents[file_id] = data
        return obj

    def batch_lines(self, batch_id: str) -> list[dict]:
        """The requests a batch was given (what the provider saw)."""
        data = self.contents[self.batches[batch_id]["input_file_id"]]
        return [json.loads(line) for line in data.splitlines() if line.strip()]

    def create_batch(self, body: dict) -> dict:
        if body.get("input_file_id") not in self.files:
            raise _Http(400, "invalid_request_error", "input_file_id not found", "file_not_found")
        if body.get("completion_window") != "24h":
            raise _Http(400, "invalid_request_error", "completion_window must be 24h", "invalid_value")
        now = int(time.time())
        batch_id = self._new_id("batch")
        batch = {
            "id": batch_id,
            "object": "batch",
            "endpoint": body.get("endpoint"),
            "errors": None,
            "input_file_id": body["input_file_id"],
            "completion_window": "24h",
            "status": "validating",
            "output_file_id": None,
            "error_file_id": None,
            "created_at": now,
            "in_progress_at": None,
            "expires_at": now + 86400,
            "finalizing_at": None,
            "completed_at": None,
            "failed_at": None,
            "expired_at": None,
            "cancelling_at": None,
            "cancelled_at": None,
            "request_counts": {"total": 0, "completed": 0, "failed": 0},
            "metadata": body.get("metadata") or {},
        }
        self.batches[batch_id] = batch
        self._behaviours[batch_id] = dataclasses.replace(self.behaviour)
        self._polls[batch_id] = 0
        self.creates += 1
        return batch

    def poll(self, batch_id: str) -> dict:
        batch = self.batches[batch_id]
        behaviour = self._behaviours[batch_id]
        self._polls[batch_id] += 1
        now = int(time.time())
        if batch["status"] == "validating":
            batch.update(status="in_progress", in_progress_at=now)
            batch["request_counts"]["total"] = len(self.batch_lines(batch_id))
        elif batch["status"] == "cancelling":
            self._finish(batch_id, "cancelled")
        elif batch["status"] == "in_progress" and self._polls[batch_id] > behaviour.polls and not behaviour.never_end:
            self._finish(batch_id, "completed")
        return batch

    def cancel(self, batch_id: str) -> dict:
        batch = self.batches[batch_id]
        if batch["status"] in ("validating", "in_progress", "finalizing"):
            batch.update(status="cancelling", cancelling_at=int(time.time()))
        return batch

    def _finish(self, batch_id: str, ending: str) -> None:
        batch, b = self.batches[batch_id], self._behaviours[batch_id]
        now = int(time.time())
        lines = self.batch_lines(batch_id)
        problems = _validate(lines, batch["endpoint"], len(self.contents[batch["input_file_id"]]))
        if b.fail_validation or problems:
            codes = problems or [("invalid_json_line", 1)]
            batch.update(
                status="failed",
                failed_at=now,
                errors={
                    "object": "list",
                    "data": [{"code": c, "line": n, "message": "Line is invalid.", "param": None} for c, n in codes],
                },
            )
            return
        ran = len(lines)
        if ending == "cancelled":
            ran = len(lines) // 2
        if b.expire_after is not None:
            ran, ending = min(ran, b.expire_after), "expired"
        out, err, usage, done = [], [], {"input_tokens": 0, "output_tokens": 0}, 0
        for k, line in enumerate(lines):
            custom_id, ticket = line["custom_id"], ticket_of(line["custom_id"])
            if ticket in b.drop:
                continue
            if k >= ran:
                code = "batch_expired" if ending == "expired" else "batch_cancelled"
                err.append(_line(custom_id, None, {"code": code, "message": "This request was not executed."}))
                continue
            if ticket in b.fail:
                body = {"error": {"message": "Bad request.", "type": "invalid_request_error", "param": None}}
                body["error"]["code"] = "context_length_exceeded"
                err.append(_line(custom_id, {"status_code": 400, "request_id": self._new_id("req"), "body": body}))
                continue
            completion = self._complete(line["body"])
            usage["input_tokens"] += completion["usage"]["prompt_tokens"]
            usage["output_tokens"] += completion["usage"]["completion_tokens"]
            response = {"status_code": 200, "request_id": self._new_id("req"), "body": completion}
            out.append(_line(custom_id, response))
            done += 1
            if ticket in b.duplicate:
                out.append(_line(custom_id, response))
            if ticket in b.contradict:
                other = json.loads(json.dumps(completion))
                other["choices"][0]["message"]["content"] = "A different answer."
                out.append(_line(custom_id, {**response, "body": other}))
        out += [b'{"custom_id": "t1:broken' for _ in range(b.malformed_lines)]
        out += [
            _line(f"t1:foreign-{k}:{'0' * 64}:{'0' * 16}", {"status_code": 200, "body": self._complete(None)})
            for k in range(b.foreign_lines)
        ]
        if b.shuffle:
            random.Random(7).shuffle(out)
            random.Random(8).shuffle(err)
        batch["request_counts"] = {"total": len(lines), "completed": done, "failed": len(err)}
        if out:
            batch["output_file_id"] = self.add_file(b"".join(x + b"\n" for x in out), "output.jsonl", "batch_output")[
                "id"
            ]
        if err:
            batch["error_file_id"] = self.add_file(b"".join(x + b"\n" for x in err), "errors.jsonl", "batch_output")[
                "id"
            ]
        if b.report_usage:
            batch["usage"] = {
                **usage,
                "total_tokens": usage["input_tokens"] + usage["output_tokens"],
                "input_tokens_details": {"cached_tokens": 0},
                "output_tokens_details": {"reasoning_tokens": 0},
            }
        stamp = {"completed": "completed_at", "expired": "expired_at", "cancelled": "cancelled_at"}[ending]
        batch.update(status=ending, finalizing_at=now, **{stamp: now})

    def _complete(self, body: dict | None) -> dict:
        user = body["messages"][-1]["content"] if body else "nothing"
        prompt_tokens = (len(json.dumps(body["messages"])) // 4 + 1) if body else 1
        return {
            "id": self._new_id("chatcmpl"),
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body["model"] if body else "unknown",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": fake_summary(user)},
                    "logprobs": None,
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": 7, "total_tokens": prompt_tokens + 7},
        }


class _Http(Exception):
    def __init__(self, status: int, kind: str, message: str, code: str | None = None):
        super().__init__(message)
        self.status, self.kind, self.message, self.code = status, kind, message, code


def _line(custom_id: str, response: dict | None, error: dict | None = None) -> bytes:
    obj = {
        "id": f"batch_req_{random.getrandbits(48):012x}",
        "custom_id": custom_id,
        "response": response,
        "error": error,
    }
    return json.dumps(obj, ensure_ascii=False).encode("utf-8")


def _validate(lines: list[dict], endpoint: str, size: int) -> list[tuple[str, int]]:
    """The documented input checks: unique custom IDs, POST to the batch's endpoint, one model, limits."""
    problems, seen, models = [], set(), set()
    if len(lines) > MAX_REQUESTS:
        problems.append(("too_many_requests", 0))
    if size > MAX_BYTES:
        problems.append(("file_too_large", 0))
    for n, line in enumerate(lines, 1):
        if not isinstance(line.get("custom_id"), str) or line["custom_id"] in seen:
            problems.append(("duplicate_custom_id", n))
        seen.add(line.get("custom_id"))
        if line.get("method") != "POST" or line.get("url") != endpoint:
            problems.append(("invalid_url", n))
        models.add((line.get("body") or {}).get("model"))
    if len(models) > 1:
        problems.append(("mismatched_model", 0))
    return problems


def _handler(server: OpenAIServer):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args) -> None:  # quiet: the test output is the report
            pass

        def do_GET(self) -> None:
            self._dispatch("GET")

        def do_POST(self) -> None:
            self._dispatch("POST")

        def do_DELETE(self) -> None:
            self._dispatch("DELETE")

        def _dispatch(self, method: str) -> None:
            url = urlparse(self.path)
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            with server.lock:
                server.calls.append((method, url.path))
            try:
                if self.headers.get("Authorization") != f"Bearer {server.api_key}":
                    raise _Http(401, "invalid_request_error", "Incorrect API key provided.", "invalid_api_key")
                with server.lock:
                    if server.faults.unavailable and not url.path.endswith("/files"):
                        server.faults.unavailable -= 1
                        raise _Http(503, "server_error", "The server is overloaded.", None)
                    self._route(method, url.path, parse_qs(url.query), body)
            except _Http as exc:
                error = {"message": exc.message, "type": exc.kind, "param": None, "code": exc.code}
                self._json(exc.status, {"error": error})
            except KeyError:
                self._json(
                    404, {"error": {"message": "No such object.", "type": "invalid_request_error", "code": None}}
                )

        def _route(self, method: str, path: str, query: dict, body: bytes) -> None:
            parts = path.strip("/").split("/")
            if parts[:1] != ["v1"]:
                raise KeyError(path)
            parts = parts[1:]
            if method == "POST" and parts == ["files"]:
                fields = _multipart(self.headers.get("Content-Type", ""), body)
                if fields.get("purpose", (b"",))[0] != b"batch":
                    raise _Http(400, "invalid_request_error", "purpose must be batch", "invalid_value")
                data, filename = fields["file"]
                self._json(200, server.add_file(data, filename or "upload.jsonl", "batch"))
            elif method == "GET" and len(parts) == 2 and parts[0] == "files":
                self._json(200, server.files[parts[1]])
            elif method == "DELETE" and len(parts) == 2 and parts[0] == "files":
                server.files.pop(parts[1])
                server.contents.pop(parts[1], None)
                self._json(200, {"id": parts[1], "object": "file", "deleted": True})
            elif method == "GET" and len(parts) == 3 and parts[0] == "files" and parts[2] == "content":
                self._content(server.contents[parts[1]])
            elif method == "POST" and parts == ["batches"]:
                batch = server.create_batch(json.loads(body or b"{}"))
                if server.faults.lose_create_answers:
                    server.faults.lose_create_answers -= 1
                    self._drop()
                    return
                self._json(200, batch)
            elif method == "GET" and parts == ["batches"] and not server.faults.no_list:
                self._list(query)
            elif method == "GET" and len(parts) == 2 and parts[0] == "batches":
                self._json(200, server.poll(parts[1]))
            elif method == "POST" and len(parts) == 3 and parts[0] == "batches" and parts[2] == "cancel":
                self._json(200, server.cancel(parts[1]))
            else:
                raise KeyError(path)

        def _list(self, query: dict) -> None:
            limit = int((query.get("limit") or ["20"])[0])
            after = (query.get("after") or [None])[0]
            ordered = sorted(server.batches.values(), key=lambda b: (b["created_at"], b["id"]), reverse=True)
            if after:
                ids = [b["id"] for b in ordered]
                ordered = ordered[ids.index(after) + 1 :]
            page = ordered[:limit]
            self._json(
                200,
                {
                    "object": "list",
                    "data": page,
                    "first_id": page[0]["id"] if page else None,
                    "last_id": page[-1]["id"] if page else None,
                    "has_more": len(ordered) > limit,
                },
            )

        def _content(self, data: bytes) -> None:
            cut = server.faults.cut_downloads > 0
            if cut:
                server.faults.cut_downloads -= 1
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            if cut:
                self.wfile.write(data[: len(data) // 2])
                self.wfile.flush()
                self._drop()
                return
            self.wfile.write(data)

        def _drop(self) -> None:
            self.close_connection = True
            try:
                self.connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

        def _json(self, status: int, obj: dict) -> None:
            data = json.dumps(obj).encode("utf-8")
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    return Handler


def _multipart(content_type: str, body: bytes) -> dict[str, tuple[bytes, str | None]]:
    message = BytesParser(policy=email_policy).parsebytes(
        f"Content-Type: {content_type}\r\nMIME-Version: 1.0\r\n\r\n".encode() + body
    )
    fields = {}
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition")
        fields[name] = (part.get_payload(decode=True) or b"", part.get_filename())
    return fields
