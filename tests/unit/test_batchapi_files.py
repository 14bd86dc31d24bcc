"""The Batch API file format, as pure functions: custom IDs, request lines, splitting, reading results."""

from __future__ import annotations

import datetime as dt
import json
import stat

import pytest

from inference.batchapi.cost import price
from inference.batchapi.requestfile import (
    Request,
    build_request,
    make_custom_id,
    open_private,
    parse_custom_id,
    private_dir,
    split_parts,
    version_tag,
)
from inference.batchapi.resultfile import ResultReader
from inference.batchapi.settings import BatchSettings
from inference.errors import ConfigError
from inference.records import FailureKind, SkipReason, SourceTicket
from inference.textprep import content_hash

AT = dt.datetime(2026, 11, 30, 3, tzinfo=dt.UTC)
VERSION = "gpt-test@abc+123"
TAG = version_tag(VERSION)
H1, H2 = "1" * 64, "2" * 64


@pytest.mark.parametrize("ticket_id", ["1", "ab:cd:ef", "ticket-ü-✓", "x" * 128, "y" * 512])
def test_a_custom_id_carries_ticket_text_hash_and_version_back(ticket_id):
    key = parse_custom_id(make_custom_id(ticket_id, H1, VERSION))
    assert (key.ticket_id, key.content_hash, key.version_tag) == (ticket_id, H1, TAG)


@pytest.mark.parametrize(
    "custom_id",
    [
        None,
        42,
        "",
        "request-1",
        f"t2:1:{H1}:{TAG}",
        f"t1::{H1}:{TAG}",
        f"t1:1:{H1[:-1]}:{TAG}",
        f"t1:1:{H1}:zz",
        f"t1:1:{'A' * 64}:{TAG}",  # upper-case hex is not how hashes are written
        f"t1:{'x' * 513}:{H1}:{TAG}",
    ],
)
def test_anything_else_is_not_one_of_ours(custom_id):
    assert parse_custom_id(custom_id) is None


def ticket(subject, body, ticket_id="7"):
    return SourceTicket(ticket_id, subject, body, AT)


def test_a_request_line_is_one_json_line_with_the_configured_prompt_model_and_limit():
    settings = BatchSettings(model="m-1", prompt="Summarise.", max_tokens=50, extra_body={"temperature": 0})
    request, line = build_request(ticket("Refund", "Line one\nline two\x00 \ud800"), settings, VERSION)
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    obj = json.loads(line)
    assert obj["custom_id"] == make_custom_id("7", content_hash("Refund", "Line one\nline two\x00 \ud800"), VERSION)
    assert (obj["method"], obj["url"]) == ("POST", "/v1/chat/completions")
    assert obj["body"] == {
        "model": "m-1",
        "messages": [
            {"role": "system", "content": "Summarise."},
            {"role": "user", "content": "Refund\nLine one\nline two \ufffd"},  # the input policy, as everywhere
        ],
        "max_completion_tokens": 50,
        "temperature": 0,
    }
    assert request.size == len(line) and not request.truncated and request.source_updated_at == AT


def test_long_text_is_cut_and_flagged_and_empty_text_is_skipped():
    settings = BatchSettings(model="m", max_chars=100)
    request, line = build_request(ticket("s", "word " * 500), settings, VERSION)
    assert request.truncated and len(json.loads(line)["body"]["messages"][1]["content"]) <= 100
    assert build_request(ticket(" ", "\n\t"), settings, VERSION) is SkipReason.EMPTY_INPUT


def req(ticket_id: str, size: int) -> Request:
    return Request(ticket_id, H1, AT, False, 10, size)


def test_parts_stay_under_both_limits_and_keep_the_order():
    parts = split_parts([req(str(k), 40) for k in range(10)], max_requests=4, max_bytes=100)
    assert [[r.ticket_id for r in p] for p in parts] == [["0", "1"], ["2", "3"], ["4", "5"], ["6", "7"], ["8", "9"]]
    parts = split_parts([req(str(k), 10) for k in range(10)], max_requests=4, max_bytes=1000)
    assert [len(p) for p in parts] == [4, 4, 2]
    with pytest.raises(ConfigError, match="smaller than one request"):
        split_parts([req("big", 101)], max_requests=4, max_bytes=100)


def out_line(ticket_id, digest=H1, content="A summary.", status=200, tag=TAG, **extra) -> str:
    body = {
        "choices": [{"message": {"content": content}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 9, "completion_tokens": 3},
    }
    line = {
        "id": "batch_req_1",
        "custom_id": f"t1:{ticket_id}:{digest}:{tag}",
        "response": {"status_code": status, "body": body},
        "error": None,
    }
    line.update(extra)
    return json.dumps(line)


def read(lines, expected=None, status="completed"):
    reader = ResultReader(expected or {"1": H1, "2": H2}, TAG)
    reader.feed_all(lines)
    return reader.finish(status)


def test_replies_are_matched_by_custom_id_in_any_order():
    outcome = read([out_line("2", H2, "Two."), out_line("1", H1, "One.")])
    assert {t: r.summary for t, r in outcome.replies.items()} == {"1": "One.", "2": "Two."}
    assert (outcome.input_tokens, outcome.output_tokens) == (18, 6)


def test_lines_for_another_text_version_or_ticket_are_dropped():
    outcome = read([out_line("1", H2), out_line("2", H2, tag="f" * 16), out_line("3", H1), out_line("1", H1, "One.")])
    assert {t: r.summary for t, r in outcome.replies.items()} == {"1": "One."}
    assert outcome.counts.unknown == 3
    assert [(f.ticket_id, f.kind) for f in outcome.failures] == [("2", FailureKind.BATCH_MISSING)]


def test_malformed_lines_never_become_replies():
    lines = ["{not json", "[]", '{"custom_id": 5}', b"\xff\xfe", out_line("1", content=None), "", "  "]
    outcome = read([*lines, out_line("2", H2, "Two.")])
    assert outcome.counts.malformed == 5 and outcome.counts.lines == 6
    assert list(outcome.replies) == ["2"]
    assert [(f.ticket_id, f.kind, f.message) for f in outcome.failures] == [
        ("1", FailureKind.INVALID_OUTPUT, "the batch output line is malformed")
    ]


def test_a_repeated_line_counts_once_and_contradicting_lines_write_nothing():
    outcome = read(
        [
            out_line("1", content="Same."),
            out_line("1", content="Same."),
            out_line("2", H2, "A."),
            out_line("2", H2, "B."),
        ]
    )
    assert {t: r.summary for t, r in outcome.replies.items()} == {"1": "Same."}
    assert (outcome.counts.duplicates, outcome.counts.conflicting) == (1, 1)
    assert [(f.ticket_id, f.kind) for f in outcome.failures] == [("2", FailureKind.INVALID_OUTPUT)]


def test_request_errors_keep_only_the_code():
    provider_error = {
        "error": {"message": "Your text 'secret ticket words' is too long", "code": "context_length_exceeded"}
    }
    http_error = json.dumps(
        {"custom_id": f"t1:1:{H1}:{TAG}", "response": {"status_code": 400, "body": provider_error}, "error": None}
    )
    expired = json.dumps(
        {"custom_id": f"t1:2:{H2}:{TAG}", "response": None, "error": {"code": "batch_expired", "message": "x"}}
    )
    outcome = read([http_error, expired])
    assert [(f.ticket_id, f.kind, f.message) for f in outcome.failures] == [
        ("1", FailureKind.BATCH_REQUEST_ERROR, "the provider answered HTTP 400, code context_length_exceeded"),
        ("2", FailureKind.BATCH_EXPIRED, "the batch was expired before this request ran"),
    ]
    weird = json.dumps({"custom_id": f"t1:1:{H1}:{TAG}", "response": None, "error": {"code": "<script> words words"}})
    assert read([weird]).failures[0].message == "the provider answered HTTP none, code unknown"


def test_vllm_style_error_lines_and_filtered_output_are_request_errors():
    vllm = json.dumps(
        {
            "id": "vllm-1",
            "custom_id": f"t1:1:{H1}:{TAG}",
            "response": {"status_code": 400, "request_id": "r", "body": None},
            "error": "boom",
        }
    )
    filtered = json.dumps(
        {
            "custom_id": f"t1:2:{H2}:{TAG}",
            "response": {
                "status_code": 200,
                "body": {"choices": [{"message": {"content": ""}, "finish_reason": "content_filter"}]},
            },
        }
    )
    kinds = [(f.ticket_id, f.kind) for f in read([vllm, filtered]).failures]
    assert kinds == [("1", FailureKind.BATCH_REQUEST_ERROR), ("2", FailureKind.BATCH_REQUEST_ERROR)]


@pytest.mark.parametrize(
    ("status", "kind"),
    [
        ("completed", FailureKind.BATCH_MISSING),
        ("expired", FailureKind.BATCH_EXPIRED),
        ("cancelled", FailureKind.BATCH_EXPIRED),
        ("failed", FailureKind.BATCH_REQUEST_ERROR),
    ],
)
def test_a_request_without_any_line_fails_by_how_the_batch_ended(status, kind):
    outcome = read([], status=status)
    assert [(f.ticket_id, f.kind, f.retryable) for f in outcome.failures] == [("1", kind, True), ("2", kind, True)]


@pytest.mark.parametrize(
    "bad",
    [
        {"model": " "},
        {"max_tokens": 0},
        {"max_requests": 50_001},
        {"max_bytes": 300_000_000},
        {"poll_seconds": 0},
        {"price_input_per_mtok": -1},
        {"extra_body": {"model": "x"}},
        {"extra_body": []},
    ],
)
def test_bad_settings_are_refused_at_once(bad):
    with pytest.raises(ConfigError):
        BatchSettings(**{"model": "m", **bad})


def test_retry_rounds_use_the_smaller_limit_and_the_fingerprint_follows_what_changes_summaries():
    settings = BatchSettings(model="m", max_requests=500, retry_max_requests=20)
    assert (settings.part_limit(0), settings.part_limit(1), settings.part_limit(2)) == (500, 20, 20)
    base = settings.fingerprint()
    assert BatchSettings(model="m", max_requests=7).fingerprint() == base  # limits do not change a summary
    assert BatchSettings(model="m", prompt="Other.").fingerprint() != base
    assert BatchSettings(model="m2").fingerprint() != base


def test_request_files_are_private_and_gone_afterwards():
    with private_dir() as tmp:
        with open_private(tmp / "part.jsonl") as fh:
            fh.write(b"x")
        assert stat.S_IMODE(tmp.stat().st_mode) == 0o700
        assert stat.S_IMODE((tmp / "part.jsonl").stat().st_mode) == 0o600
        with pytest.raises(FileExistsError):
            open_private(tmp / "part.jsonl")
    assert not tmp.exists()


def test_cost_is_tokens_times_the_configured_price():
    assert price(BatchSettings(model="m"), 1_000_000, 1_000_000) is None
    priced = BatchSettings(model="m", price_input_per_mtok=0.075, price_output_per_mtok=0.3)
    assert price(priced, 2_000_000, 1_000_000) == pytest.approx(0.45)
