"""newest_per_ticket: one row per ticket before an upsert."""

from __future__ import annotations

import datetime as dt
import random

from hypothesis import given
from hypothesis import strategies as st

from inference.store.results import newest_per_ticket

T0 = dt.datetime(2024, 3, 10, 2, tzinfo=dt.UTC)


def row(ticket_id: str, minutes: int, tag: str = "") -> dict:
    return {"ticket_id": ticket_id, "source_updated_at": T0 + dt.timedelta(minutes=minutes), "tag": tag}


def test_keeps_the_newest_version_per_ticket():
    rows = [row("t1", 5, "new"), row("t1", 1, "old"), row("t2", 3, "only"), row("t1", 2, "middle")]
    out = newest_per_ticket(rows)
    assert [(r["ticket_id"], r["tag"]) for r in out] == [("t1", "new"), ("t2", "only")]


def test_later_row_wins_a_tie():
    rows = [row("t1", 5, "first"), row("t1", 5, "second"), row("t1", 1, "older"), row("t1", 5, "third")]
    assert [r["tag"] for r in newest_per_ticket(rows)] == ["third"]


def test_output_sorted_by_ticket_id():
    ids = [f"ticket-{i:03d}" for i in range(50)]
    random.Random(3).shuffle(ids)
    out = newest_per_ticket([row(t, 0) for t in ids])
    assert [r["ticket_id"] for r in out] == sorted(ids)


def test_rows_are_passed_through_unchanged():
    original = row("t1", 0, "x")
    (out,) = newest_per_ticket([original])
    assert out is original


def test_empty_and_generator_input():
    assert newest_per_ticket([]) == []
    assert len(newest_per_ticket(row(f"t{i % 3}", i) for i in range(9))) == 3


@given(st.lists(st.tuples(st.sampled_from(["a", "b", "c", "d"]), st.integers(0, 5)), max_size=40))
def test_matches_a_reference(pairs):
    rows = [dict(row(t, m), seq=k) for k, (t, m) in enumerate(pairs)]
    out = newest_per_ticket(rows)
    assert [r["ticket_id"] for r in out] == sorted({t for t, _ in pairs})
    for r in out:
        mine = [x for x in rows if x["ticket_id"] == r["ticket_id"]]
        newest = max(x["source_updated_at"] for x in mine)
        assert r["source_updated_at"] == newest
        assert r["seq"] == max(x["seq"] for x in mine if x["source_updated_at"] == newest)
