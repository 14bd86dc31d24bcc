"""The retraction sweep: results (embeddings, categories, summaries that quote the ticket) whose ticket is no
longer in the source are removed.

Keyset-paged over ticket_results (IN_PAGE IDs at a time, by ticket_id): each page's IDs are looked up in the
source by key, reading IDs only (an index lookup for a keyed source), and the missing ones are deleted in one
short transaction per page, after looking them up once more inside it (a ticket re-created meanwhile keeps its
result). Run by every load_results unless INFERENCE_RETRACT_DELETED=false (sources that delete tickets they
archive, whose results you keep).
"""

from __future__ import annotations

import sqlalchemy as sa

from inference.store.db import IN_PAGE, writing
from inference.store.results import result_ids_after, retract_results
from inference.store.source import Source


def sweep_deleted(engine: sa.Engine, source: Source, page: int = IN_PAGE) -> int:
    """Removes the results of tickets the source no longer holds; returns how many were removed."""
    retracted, after = 0, ""
    while True:
        with engine.connect() as conn:
            ids = result_ids_after(conn, after, page)
            if not ids:
                return retracted
            present = source.existing(conn, ids)
        gone = [t for t in ids if t not in present]
        if gone:
            with writing(engine) as conn:
                present = source.existing(conn, gone)
                retracted += retract_results(conn, [t for t in gone if t not in present])
        after = ids[-1]
