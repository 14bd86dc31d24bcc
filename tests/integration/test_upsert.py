"""The results upsert and its stale-write guard, on SQLite and on the real PostgreSQL."""

from __future__ import annotations

import datetime as dt
import threading

import pytest
import sqlalchemy as sa

from inference.store.db import writing
from inference.store.results import upsert_results
from inference.store.schema import ticket_results
from tests.support.tables import T0
from tests.support.tables import result_row as row


def upsert(engine, rows) -> set[str]:
    with writing(engine) as conn:
        return upsert_results(conn, rows)


def stored(engine) -> dict[str, sa.Row]:
    with engine.connect() as conn:
        return {r.ticket_id: r for r in conn.execute(sa.select(ticket_results))}


def test_insert_then_identical_rerun_writes_nothing(db_engine):
    assert upsert(db_engine, [row("1"), row("2")]) == {"1", "2"}
    before = stored(db_engine)
    assert upsert(db_engine, [row("1"), row("2")]) == set()
    assert stored(db_engine) == before


def test_newer_source_version_overwrites(db_engine):
    upsert(db_engine, [row("1")])
    later = T0 + dt.timedelta(minutes=5)
    assert upsert(db_engine, [row("1", at=later, digest="b" * 64, category="shipping")]) == {"1"}
    got = stored(db_engine)["1"]
    assert (got.content_hash, got.category, got.source_updated_at) == ("b" * 64, "shipping", later)


def test_older_source_version_never_overwrites_newer_result(db_engine):
    later = T0 + dt.timedelta(minutes=5)
    upsert(db_engine, [row("1", at=later, digest="b" * 64, category="shipping")])
    assert upsert(db_engine, [row("1", at=T0, digest="a" * 64)]) == set()
    got = stored(db_engine)["1"]
    assert (got.content_hash, got.category) == ("b" * 64, "shipping")


def test_same_version_with_new_model_or_text_overwrites(db_engine):
    upsert(db_engine, [row("1")])
    assert upsert(db_engine, [row("1", version="m@2")]) == {"1"}
    assert upsert(db_engine, [row("1", version="m@2", digest="c" * 64)]) == {"1"}
    got = stored(db_engine)["1"]
    assert (got.model_version, got.content_hash) == ("m@2", "c" * 64)


def test_duplicate_ids_in_one_call_keep_the_newest(db_engine):
    later = T0 + dt.timedelta(seconds=1)
    written = upsert(db_engine, [row("1", at=later, digest="b" * 64), row("1", at=T0), row("2")])
    assert written == {"1", "2"}
    assert stored(db_engine)["1"].content_hash == "b" * 64
    assert len(stored(db_engine)) == 2


def test_concurrent_overlapping_upserts_converge(pg_engine):
    """Eight writers over the same 400 tickets at once: no unique violation, no deadlock, newest wins."""
    errors: list[BaseException] = []
    versions = [T0 + dt.timedelta(seconds=k) for k in range(8)]

    def writer(k: int) -> None:
        try:
            rows = [row(str(i), at=versions[k], digest=f"{k:064x}") for i in range(400)]
            if k % 2:
                rows.reverse()  # writers see different input orders
            upsert(pg_engine, rows)
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    final = stored(pg_engine)
    assert len(final) == 400
    assert {r.content_hash for r in final.values()} == {f"{7:064x}"}


@pytest.fixture(params=["binary", "text"])
def copy_format(request, monkeypatch):
    """PostgreSQL COPY in its binary format (the default) and in the text format (the fallback for a
    column type without a binary encoder); SQLite has no COPY and ignores this."""
    from inference.store import bulk

    if request.param == "text":
        monkeypatch.setattr(bulk, "_BINARY", {k: v for k, v in bulk._BINARY.items() if k != "bytea"})
    return request.param


def test_bulk_path_keeps_awkward_values_exact(db_engine, copy_format):
    """PostgreSQL writes through COPY: tabs, newlines, backslashes, unicode, NULLs, extreme numbers and
    timestamps in other zones survive either COPY format exactly."""
    awkward = ["a\tb", "line\nbreak", "back\\slash", "\\N", "emoji-😀-עברית", "quote\"'"]
    rows = [row(t) for t in awkward]
    rows[0]["model_version"] = "m@1\\x00"
    rows[1].update(category=None, category_score=None, embedding=None, embedding_dim=None, summary=None)
    rows[2].update(category_score=-1.5e-300, category_confidence=0.123456789012345, category_uncertain=True)
    rows[3].update(summary="Zwei Sätze.\tMit Tab.\nUnd Zeile.", input_tokens=2_147_483_647, truncated=True)
    plus_five = dt.timezone(dt.timedelta(hours=5, minutes=30))
    rows[4].update(source_updated_at=T0.astimezone(plus_five) + dt.timedelta(microseconds=7))
    assert upsert(db_engine, rows) == set(awkward)
    got = stored(db_engine)
    assert set(got) == set(awkward)
    assert got["a\tb"].model_version == "m@1\\x00"
    for t, r in zip(awkward, rows, strict=True):
        for name in (
            "embedding",
            "embedding_dim",
            "category",
            "category_score",
            "category_confidence",
            "category_uncertain",
            "summary",
            "truncated",
            "input_tokens",
            "model_version",
        ):
            assert getattr(got[t], name) == r.get(name), (t, name)
        assert got[t].source_updated_at == r["source_updated_at"], t
    assert got["emoji-😀-עברית"].source_updated_at == T0 + dt.timedelta(microseconds=7)
