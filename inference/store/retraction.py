"""The retraction sweep: results (embeddings, categories, summaries that quote the ticket) whose ticket is no
longer in the source are removed.

Keyset-paged over ticket_results by ticket_id (`db.page_size` IDs at a time: 10,000 on PostgreSQL). On
PostgreSQL one statement per page returns the page's last ID and those of its IDs the source no longer holds
(an anti-join by the source's key index: no IDs travel but the missing ones); where a stored ID cannot be cast
to the source key's type, and on SQLite, the page's IDs are looked up in the source by key from here, reading
IDs only. The missing ones are deleted in one short transaction per page of them, after looking them up once
more inside it (a ticket re-created meanwhile keeps its result). Run by every load_results unless
INFERENCE_RETRACT_DELETED=false (sources that delete tickets they archive, whose results you keep).
"""

from __future__ import annotations

import sqlalchemy as sa

from inference.store.db import page_size, writing
from inference.store.results import result_ids_after, retract_results
from inference.store.schema import ticket_results
from inference.store.source import Source


def sweep_deleted(engine: sa.Engine, source: Source, page: int | None = None) -> int:
    """Removes the results of tickets the source no longer holds; returns how many were removed."""
    page = page or page_size(engine.dialect.name)
    retracted, after, gone = 0, "", []
    with engine.connect() as read:
        while True:
            last, missing = _missing(read, source, after, page)
            read.rollback()  # one short read transaction per page (no snapshot held across the sweep)
            gone += missing
            if gone and (len(gone) >= page or last is None):  # one short write transaction per page of missing
                with writing(engine) as conn:
                    present = source.existing(conn, gone)
                    retracted += retract_results(conn, [t for t in gone if t not in present])
                gone = []
            if last is None:
                return retracted
            after = last


def _missing(read: sa.Connection, source: Source, after: str, page: int) -> tuple[str | None, list[str]]:
    """The next page of stored results after `after`: (its last ticket ID, or None past the end; those of its
    tickets the source no longer holds)."""
    c = ticket_results.c
    ids = sa.select(c.ticket_id).where(c.ticket_id > after).order_by(c.ticket_id).limit(page).subquery("page")
    held = source.holds_key(ids.c.ticket_id)
    if held is not None:
        stmt = sa.select(
            sa.func.max(ids.c.ticket_id), sa.func.array_agg(ids.c.ticket_id).filter(sa.not_(held))
        ).select_from(ids)
        try:
            with read.begin_nested():
                last, missing = read.execute(stmt).one()
            return last, list(missing or ())
        except sa.exc.DataError:  # a stored ID the key's type cannot hold: looked up key by key below
            pass
    found = result_ids_after(read, after, page)
    present = source.existing(read, found) if found else set()
    return (found[-1] if found else None), [t for t in found if t not in present]
