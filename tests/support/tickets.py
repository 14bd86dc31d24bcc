"""Tickets in: single tickets at chosen times, edits, a seeded backlog cut short, and the settings that point
the pipeline at a test's database."""

from __future__ import annotations

import datetime as dt

import sqlalchemy as sa

from inference.config import Settings
from inference.seed import seed_backlog
from inference.store.db import writing
from inference.store.schema import tickets
from inference.textprep import max_chars_for, model_input
from inference.window import window_for_date

DAY1 = dt.date(2026, 11, 29)
DAY2 = dt.date(2026, 11, 30)
W1 = window_for_date(DAY1)
W2 = window_for_date(DAY2)
SHORT_TEXT_CHARS = 240  # short tickets keep the model cheap where a test is about the database or processes


def settings_for(engine: sa.Engine, **overrides) -> Settings:
    """Settings pointing at this engine's database; small chunks so a few tickets still span several."""
    url = engine.url.render_as_string(hide_password=False)
    values = dict(db_url=url, device="cpu", chunk_size=4)
    values.update(overrides)
    return Settings(**values)


def add_ticket(
    engine: sa.Engine, ticket_id: int, subject: str | None, body: str | None, at: dt.datetime | None = None
) -> dt.datetime:
    """Inserts one ticket created (and last updated) at `at` (default: 3 h into W2); returns `at`."""
    at = at or W2.start + dt.timedelta(hours=3)
    with writing(engine) as conn:
        conn.execute(
            sa.insert(tickets),
            [dict(ticket_id=ticket_id, subject=subject, body=body, created_at=at, updated_at=at)],
        )
    return at


def edit_ticket(engine: sa.Engine, ticket_id: int, body: str, updated_at: dt.datetime) -> None:
    with writing(engine) as conn:
        n = conn.execute(
            sa.update(tickets).where(tickets.c.ticket_id == ticket_id).values(body=body, updated_at=updated_at)
        ).rowcount
    assert n == 1


def seed_short_tickets(engine: sa.Engine, n: int, days: tuple[dt.date, ...], seed: int = 11) -> list[str]:
    """Seeds n synthetic tickets spread over the nightly windows of `days`, bodies cut to SHORT_TEXT_CHARS.
    Returns their IDs as text, in the database's ORDER BY order (the order pages are cut in)."""
    seed_backlog(engine, n, [window_for_date(d) for d in days], seed=seed)
    with writing(engine) as conn:
        conn.execute(sa.update(tickets).values(body=sa.func.substr(tickets.c.body, 1, SHORT_TEXT_CHARS)))
        text_id = sa.cast(tickets.c.ticket_id, sa.String(128))
        return list(conn.scalars(sa.select(text_id).order_by(text_id)))


def expected_model_text(subject: str | None, body: str | None, max_seq_length: int = 256) -> str | None:
    return model_input(subject, body, max_chars_for(max_seq_length))[0]
