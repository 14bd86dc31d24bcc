"""Bad input through the whole pipeline (run_window, the real model), on every dialect that can store it.

The policy under test is the one documented in inference/textprep.py; Encoder.encode is spied on so the
tests see exactly what text reached the model.
"""

from __future__ import annotations

import re

import pytest
import sqlalchemy as sa

from inference.pipeline import run_window
from inference.store.db import writing
from inference.store.schema import tickets
from inference.textprep import content_hash, max_chars_for
from tests.support.tables import items, results, source
from tests.support.tickets import W2, add_ticket, expected_model_text, settings_for

CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")
SURROGATE = re.compile("[\ud800-\udfff]")
MAX_TOKENS = 256

EMPTY = {
    1: (None, None),
    2: ("", ""),
    3: ("   ", "\t\n  \r\n"),
    4: (None, " \n "),
    5: ("\u00a0\u2003", None),  # no-break and em spaces
    6: ("", "\u3000\u2028"),  # ideographic space, line separator
}


def test_null_empty_and_whitespace_tickets_are_skipped_and_never_reach_the_model(db_engine, model, encoded):
    for ticket_id, (subject, body) in EMPTY.items():
        add_ticket(db_engine, ticket_id, subject, body)
    add_ticket(db_engine, 7, "Refund please", "I was charged twice for my plan.")  # the control: it must get through

    summary = run_window(settings_for(db_engine), "run-empty", W2, predictor=model)

    assert (summary["status"], summary["backlog"], summary["succeeded"], summary["skipped"]) == ("succeeded", 7, 1, 6)
    assert summary["reasons"] == {"empty_input": 6}
    states = items(db_engine, "run-empty")
    for ticket_id in EMPTY:
        assert (states[str(ticket_id)].status, states[str(ticket_id)].reason) == ("skipped", "empty_input")
    assert set(results(db_engine)) == {"7"}
    # What the model received: the one real ticket's text and nothing else; no blank input ever.
    assert encoded.texts == ["Refund please\nI was charged twice for my plan."]
    assert all(t.strip() for t in encoded.texts)


def test_a_one_megabyte_ticket_is_truncated_flagged_and_hashed_in_full(db_engine, model, encoded):
    sentence = "The export job fails with a timeout after uploading the quarterly report. "
    huge = (sentence * (1_000_000 // len(sentence) + 1))[:1_000_000]
    add_ticket(db_engine, 1, "Export times out", huge)
    add_ticket(db_engine, 2, "Short one", "My invoice is wrong.")

    summary = run_window(settings_for(db_engine), "run-big", W2, predictor=model)

    assert (summary["status"], summary["succeeded"]) == ("succeeded", 2)
    stored = results(db_engine)
    assert (stored["1"].truncated, stored["1"].input_tokens) == (True, MAX_TOKENS)
    assert stored["1"].content_hash == content_hash("Export times out", huge)  # the hash covers all 1 MB
    assert stored["2"].truncated is False and stored["2"].input_tokens < MAX_TOKENS
    # The tokenizer never saw the megabyte: the text was cut (bounded work) before tokenization.
    assert max(len(t) for t in encoded.texts) <= max_chars_for(MAX_TOKENS)
    assert len(source(db_engine)["1"].body) == 1_000_000  # the source itself is untouched


def test_postgresql_cannot_hold_nul_bytes(pg_engine):
    """Why the NUL policy matters only for SQLite: neither psycopg2 nor the server accept NUL in text."""
    at = W2.start
    with pytest.raises(ValueError, match="NUL"):
        with writing(pg_engine) as conn:
            conn.execute(
                sa.insert(tickets), [dict(ticket_id=1, subject="a\x00b", body="x", created_at=at, updated_at=at)]
            )
    with pytest.raises(sa.exc.DBAPIError, match="null character not permitted"):
        with pg_engine.connect() as conn:
            conn.execute(sa.text("SELECT chr(0)"))
    assert source(pg_engine) == {}


def test_nul_bytes_are_removed_from_the_model_input_on_sqlite(sqlite_engine, model, encoded):
    subject, body = "pass\x00word reset", "the reset link\x00 does not\x00 work"
    add_ticket(sqlite_engine, 1, subject, body)
    add_ticket(sqlite_engine, 2, "\x00", "\x00\x00")  # nothing but NUL: empty once they are removed

    summary = run_window(settings_for(sqlite_engine), "run-nul", W2, predictor=model)

    assert (summary["succeeded"], summary["skipped"], summary["reasons"]) == (1, 1, {"empty_input": 1})
    read_back = source(sqlite_engine)["1"]
    assert (read_back.subject, read_back.body) == (subject, body)  # SQLite kept the NUL bytes
    assert results(sqlite_engine)["1"].content_hash == content_hash(subject, body)
    assert "2" not in results(sqlite_engine)
    assert encoded.texts == ["password reset\nthe reset link does not work"]  # removed, not turned into spaces


def _raw_sqlite_text(engine, ticket_id: int, subject: bytes, body: bytes) -> None:
    """Invalid UTF-8 straight into SQLite text columns (no Python str can carry it)."""
    add_ticket(engine, ticket_id, "placeholder", "placeholder")
    with writing(engine) as conn:
        conn.execute(
            sa.text(
                f"UPDATE tickets SET subject = CAST(X'{subject.hex()}' AS TEXT), body = CAST(X'{body.hex()}' AS TEXT) "
                "WHERE ticket_id = :id"
            ),
            {"id": ticket_id},
        )


def test_invalid_utf8_on_sqlite_is_processed_and_hashed_byte_exact(sqlite_engine, model, encoded):
    subject = b"caf\xe9 cr\xe8me refund"  # Latin-1, not UTF-8
    body = b"charged \xed\xa0\x80 twice \xff\xfe and \xc3 truncated"  # an encoded surrogate, 0xFF, a cut sequence
    _raw_sqlite_text(sqlite_engine, 1, subject, body)
    _raw_sqlite_text(sqlite_engine, 2, subject, body.replace(b"\x80", b"\x81"))

    summary = run_window(settings_for(sqlite_engine), "run-utf8", W2, predictor=model)

    assert (summary["status"], summary["succeeded"], summary["failed"]) == ("succeeded", 2, 0)
    with sqlite_engine.connect() as conn:
        raw = conn.execute(sa.text("SELECT hex(subject), hex(body) FROM tickets WHERE ticket_id = 1")).one()
    assert tuple(raw) == (subject.hex().upper(), body.hex().upper())  # the source is untouched, byte for byte
    read_back = source(sqlite_engine)["1"]
    assert read_back.subject.encode("utf-8", "surrogateescape") == subject
    assert read_back.body.encode("utf-8", "surrogateescape") == body
    stored = results(sqlite_engine)
    assert stored["1"].content_hash == content_hash(read_back.subject, read_back.body)
    # One byte apart in the source, so one hash apart: the replacement character does not blur them.
    assert stored["1"].content_hash != stored["2"].content_hash
    assert len(encoded.texts) == 2
    for text in encoded.texts:
        assert not SURROGATE.search(text) and "\ufffd" in text and "refund" in text


CONTROL_SUBJECT = "Invoice\x07 is \x1b[31mred\x1b[0m"
CONTROL_BODY = "line one\x0bline two\x0c\x7f \x85\x9f end\r\n\ttabbed \x01\x02\x03\x1f"


def test_control_characters_are_processed_with_a_result(db_engine, model, encoded):
    add_ticket(db_engine, 1, CONTROL_SUBJECT, CONTROL_BODY)

    summary = run_window(settings_for(db_engine), "run-ctl", W2, predictor=model)

    assert (summary["status"], summary["succeeded"]) == ("succeeded", 1)
    read_back = source(db_engine)["1"]
    assert (read_back.subject, read_back.body) == (CONTROL_SUBJECT, CONTROL_BODY)
    assert results(db_engine)["1"].content_hash == content_hash(CONTROL_SUBJECT, CONTROL_BODY)
    assert encoded.texts == [expected_model_text(CONTROL_SUBJECT, CONTROL_BODY)]
    assert not CONTROL.search(encoded.texts[0])
    assert "line one line two" in encoded.texts[0] and "\ttabbed" in encoded.texts[0]  # tab/newline are kept


UNICODE_TICKETS = {
    1: (
        "Order 📦 never arrived 😡",
        "Family plan 👨\u200d👩\u200d👧\u200d👦, thumbs 👍🏽, flag 🇫🇷, keycap 1\ufe0f\u20e3",
    ),
    2: ("لم يصل طلبي بعد", "رقم الطلب ١٢٣٤٥ — أرجو المساعدة في استرداد المبلغ"),
    3: ("\u202eהזמנה 4521 לא הגיעה\u202c", "abc \u2067שלום\u2069 def \u200f! \u202dLTR\u202c \u2066iso\u2069"),
    4: ("Ca\u0301fe\u0301 ﬁle \ufeffBOM", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢 math, 中文退款, 日本語の請求書, 한국어 환불"),
}


def _stored_bytes(engine, ticket_id: int) -> tuple[bytes, bytes]:
    """The bytes the database holds, read with SQL (not through the driver's decoding)."""
    if engine.dialect.name == "postgresql":
        stmt = "SELECT convert_to(subject, 'UTF8'), convert_to(body, 'UTF8') FROM tickets WHERE ticket_id = :id"
    else:
        stmt = "SELECT CAST(subject AS BLOB), CAST(body AS BLOB) FROM tickets WHERE ticket_id = :id"
    with engine.connect() as conn:
        subject, body = conn.execute(sa.text(stmt), {"id": ticket_id}).one()
    return bytes(subject), bytes(body)


def test_emoji_rtl_and_bidi_text_round_trip_byte_exact(db_engine, model, encoded):
    for ticket_id, (subject, body) in UNICODE_TICKETS.items():
        add_ticket(db_engine, ticket_id, subject, body)

    summary = run_window(settings_for(db_engine), "run-bidi", W2, predictor=model)

    assert (summary["status"], summary["succeeded"]) == ("succeeded", len(UNICODE_TICKETS))
    stored, read_back = results(db_engine), source(db_engine)
    for ticket_id, (subject, body) in UNICODE_TICKETS.items():
        key = str(ticket_id)
        assert _stored_bytes(db_engine, ticket_id) == (subject.encode(), body.encode())
        assert (read_back[key].subject, read_back[key].body) == (subject, body)
        assert stored[key].content_hash == content_hash(subject, body)
    # Passed through unchanged: no normalisation, no stripping of format characters.
    assert sorted(encoded.texts) == sorted(f"{s}\n{b}" for s, b in UNICODE_TICKETS.values())
