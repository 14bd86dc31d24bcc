"""Source tickets for the benchmarks, written with COPY (a million rows in about a minute, in flat memory):
the demo generator's long-tailed mix (`inference.seed.generate`), or `huge` tickets of a given size."""

from __future__ import annotations

import datetime as dt
import io
import random
from collections.abc import Iterator

import sqlalchemy as sa

from inference.seed import generate
from inference.store.schema import create_schema
from inference.window import Window

_ESCAPES = str.maketrans({"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"})
BATCH = 20_000


def _field(value: str | None) -> str:
    return "\\N" if value is None else value.replace("\x00", "").translate(_ESCAPES)


def huge_tickets(n: int, size: int, seed: int = 5) -> Iterator[tuple[int, str, str]]:
    """n tickets of `size` characters each: pasted logs, words and line breaks (what megabyte tickets are)."""
    rng = random.Random(seed)
    words = "error timeout retry request worker status failed connection reset upstream 503 200 took ms".split()
    for i in range(n):
        lines, length = [], 0
        while length < size:
            line = " ".join(rng.choice(words) for _ in range(12))
            lines.append(line)
            length += len(line) + 1
        yield i, f"Huge ticket {i}", "\n".join(lines)[:size]


def copy_tickets(engine: sa.Engine, rows, window: Window, seed: int = 7, start_id: int = 1) -> int:
    """COPY (index, subject, body) rows into the demo `tickets` table, created/updated inside the window."""
    create_schema(engine, with_demo_source=True)
    rng = random.Random(seed + 1)
    span = (window.end - window.start).total_seconds()
    raw = engine.raw_connection()
    n = 0
    try:
        cursor = raw.cursor()
        buf = io.StringIO()
        for i, subject, body in rows:
            created = window.start + dt.timedelta(seconds=rng.uniform(0, span - 3601))
            updated = created + dt.timedelta(seconds=rng.uniform(0, 3600))
            buf.write(
                f"{start_id + i}\t{_field(subject)}\t{_field(body)}\t{created.isoformat()}\t{updated.isoformat()}\n"
            )
            n += 1
            if n % BATCH == 0:
                _flush(cursor, buf)
                buf = io.StringIO()
        _flush(cursor, buf)
        raw.commit()
    finally:
        raw.close()
    # Settled as a production table is (hint bits set, all-visible, statistics): otherwise the first run pays
    # for that, while autovacuum works through the new rows beside it, and its timing means little.
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.execute(sa.text("VACUUM (FREEZE, ANALYZE) tickets"))
    return n


def _flush(cursor, buf: io.StringIO) -> None:
    buf.seek(0)
    cursor.copy_expert("COPY tickets (ticket_id, subject, body, created_at, updated_at) FROM STDIN", buf)


def seed_mix(engine: sa.Engine, n: int, window: Window, seed: int = 7, start_id: int = 1) -> int:
    """n tickets of the demo mix (0.2% malformed: NULL, empty, whitespace-only, 250 KB logs)."""
    return copy_tickets(engine, generate(n, seed), window, seed, start_id)
