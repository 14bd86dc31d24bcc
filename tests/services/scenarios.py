"""The scenarios of the service tests: the runs that tests only wait for are started together as soon as
Airflow is up (see conftest.py), on tickets seeded while Airflow migrates its database."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field

TEXT_CANARY = "CANARYTEXT9f3e"


@dataclass
class Scenario:
    day: dt.date | None = None
    days: tuple[dt.date, ...] = ()
    run_id: str = ""
    run_ids: list[str] = field(default_factory=list)
    ticket_ids: list[str] = field(default_factory=list)
    extra: dict = field(default_factory=dict)


REST_DAY, ALERT_DAY = dt.date(2026, 6, 10), dt.date(2026, 6, 20)
BACKFILL_DAYS = (dt.date(2026, 6, 1), dt.date(2026, 6, 2), dt.date(2026, 6, 3))
# The prelaunched scenarios' tickets: seeded while `airflow db migrate` runs. (tickets, days, last date, first ID)
EARLY_SEEDS = {
    "backfill": (60, 3, BACKFILL_DAYS[-1], 1),
    "rest": (20, 1, REST_DAY, 1001),
    "alert": (40, 1, ALERT_DAY, 3001),
}


ALERT_TAMPERED = ("3003", "3011", "3019", "3027", "3035")


def prepare_alert_tickets(url: str) -> None:
    """The alert scenario's data, set up before any task runs (DDL on the inference tables would wait for the
    locks of running tasks): the canary in the text of tickets 3001..3040, and tickets ALERT_TAMPERED edited
    again and again, as a ticket is that an integration keeps rewriting: each time the run takes one to the
    model (its attempt is counted) or stages its outputs, a character is appended to its body (in the source,
    by the admin role: SECURITY DEFINER). So every attempt finds, when it checks the text again before writing,
    that the text changed since it was read: stale_input, retried, until dead-lettered."""
    import sqlalchemy as sa

    engine = sa.create_engine(url)
    try:
        with engine.begin() as conn:
            conn.execute(
                sa.text(
                    "UPDATE tickets SET subject = :c || ' ' || coalesce(subject, ''), "
                    "body = coalesce(body, '') || ' ' || :c WHERE ticket_id BETWEEN 3001 AND 3040"
                ),
                {"c": TEXT_CANARY},
            )
            conn.execute(sa.text("CREATE TABLE svc_tamper (ticket_id text PRIMARY KEY)"))
            conn.execute(sa.text("INSERT INTO svc_tamper VALUES " + ", ".join(f"('{t}')" for t in ALERT_TAMPERED)))
            conn.execute(
                sa.text(
                    """
                    CREATE FUNCTION svc_tamper_edit() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER
                    SET search_path = public AS $$
                    BEGIN
                        IF EXISTS (SELECT 1 FROM svc_tamper WHERE ticket_id = NEW.ticket_id) THEN
                            UPDATE tickets SET body = body || '.' WHERE ticket_id = CAST(NEW.ticket_id AS bigint);
                        END IF;
                        RETURN NULL;
                    END $$;
                    CREATE TRIGGER svc_tamper_claimed AFTER UPDATE OF attempts ON inference_run_items
                        FOR EACH ROW EXECUTE FUNCTION svc_tamper_edit();
                    CREATE TRIGGER svc_tamper_staged AFTER INSERT ON inference_staging
                        FOR EACH ROW EXECUTE FUNCTION svc_tamper_edit();
                    """
                )
            )
    finally:
        engine.dispose()
