"""The retraction sweep: results (embeddings, categories, summaries that quote the ticket) whose ticket is no
longer in the source are removed.

Keyset-paged over ticket_results by ticket_id (`db.page_size` IDs at a time: 10,000 on PostgreSQL): each page's
IDs are looked up in the source by key, reading IDs only (an index lookup for a keyed source), and the missing
ones are deleted in one short transaction per page of them, after looking them up once more inside it (a ticket re-created meanwhile
keeps its result). Run by every load_results unless INFERENCE_RETRACT_DELETED=false (sources that delete tickets they
archive, whose results you keep).
"""

from __future__ import annotations

import sqlalchemy as sa

from inference.store.db import page_size, writing
from inference.store.results import result_ids_after, retract_results
from inference.store.source import Source


def sweep_deleted(engine: sa.Engine, source: Source, page: int | None = None) -> int:
    """Removes the results of tickets the source no longer holds; returns how many were removed."""
    page = page or page_size(engine.dialect.name)
    retracted, after, gone = 0, "", []
    with engine.connect() as read:
        while True:
            ids = result_ids_after(read, after, page)
            present = source.existing(read, ids) if ids else set()
            read.rollback()  # one short read transaction per page (no snapshot held across the sweep)
            gone += [t for t in ids if t not in present]
            if gone and (len(gone) >= page or not ids):  # one short write transaction per page of missing tickets
                with writing(engine) as conn:
                    present = source.existing(conn, gone)
                    retracted += retract_results(conn, [t for t in gone if t not in present])
                gone = []
            if not ids:
                return retracted
            after = ids[-1]
