"""Taking and claiming a chunk's items by the span of its IDs (`db.ids_in_span`, infer_shard's chunks): on
PostgreSQL the page is read as one range of the items' index, bounded by its least and greatest ID as the
database orders them, and filtered by the IDs. Whatever the IDs (mixed case, punctuation, digits that sort as
text) and whichever items are already settled, the span gives exactly what the plain lookup gives, also for a
sparse page, and touches no item outside the page."""

from __future__ import annotations

import sqlalchemy as sa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from inference.store import items
from inference.store.db import writing
from inference.store.schema import ITEM_PLANNED, ITEM_SKIPPED, ITEM_SUCCEEDED, create_schema, inference_run_items

RUN = "span-run"
IDS = st.text("aZ09-_.", min_size=1, max_size=4)


def _reset(engine: sa.Engine, planned: set[str], settled: set[str]) -> None:
    base = dict(run_id=RUN, shard=0, est_tokens=1, content_hash="a" * 64, reason=None, attempts=0)
    rows = [dict(base, ticket_id=t, status=ITEM_SKIPPED if t in settled else ITEM_PLANNED) for t in planned]
    rows.append(dict(base, run_id="other-run", ticket_id="0", status=ITEM_PLANNED))  # another run: never touched
    with writing(engine) as conn:
        conn.execute(sa.delete(inference_run_items))
        conn.execute(sa.insert(inference_run_items), rows)


def _items(engine: sa.Engine) -> dict[tuple[str, str], tuple[str, int]]:
    with engine.connect() as conn:
        return {(r.run_id, r.ticket_id): (r.status, r.attempts) for r in conn.execute(sa.select(inference_run_items))}


def test_a_span_takes_and_claims_what_the_plain_lookup_does(db_engine):
    create_schema(db_engine)

    @settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(
        planned=st.sets(IDS, min_size=1, max_size=14),
        settled=st.sets(IDS, max_size=6),
        asked=st.sets(IDS, max_size=10),
    )
    def check(planned, settled, asked):
        outcomes = []
        for dense in (False, True):
            _reset(db_engine, planned, settled)
            with writing(db_engine) as conn:
                items.claim(conn, RUN, sorted(asked), dense=dense)
                taken = items.take_open_items(conn, RUN, asked, ITEM_SUCCEEDED, dense=dense)
            outcomes.append((taken, _items(db_engine)))
        assert outcomes[0] == outcomes[1]
        taken, after = outcomes[1]
        assert taken == (planned - settled) & asked
        assert after[("other-run", "0")] == (ITEM_PLANNED, 0)
        assert {t for (run, t), (_, attempts) in after.items() if attempts} == planned & asked

    check()
