"""The asset `ticket_results`: updated by every successful run, so downstream DAGs can be scheduled on fresh
results (`schedule=[TICKET_RESULTS]`). Its events carry the run's ID, window, model version and counts."""

from __future__ import annotations

from airflow.sdk import Asset

TICKET_RESULTS = Asset(name="ticket_results", uri="ticket-inference://tickets_db/ticket_results", group="inference")
