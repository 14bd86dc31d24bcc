"""Tables. The `tickets` source table is the demo's; a deployment points at its own (see SourceColumns).

Ticket IDs are stored as text in our tables so any source key type (integer, UUID, string) fits.
Embeddings are little-endian float32 bytes (`numpy.frombuffer(blob, "<f4")`), portable across dialects.
"""

from __future__ import annotations

import logging

import sqlalchemy as sa

from inference import heads
from inference.errors import SchemaOutdated
from inference.store.db import UTCDateTime, writing

log = logging.getLogger("inference")

metadata = sa.MetaData()

ID = sa.String(512)  # a source ID as text: at most 512 bytes (inference/store/source_keys.py, MAX_ID_BYTES)
RUN_ID = sa.String(250)
BIGINT = sa.BigInteger().with_variant(sa.Integer(), "sqlite")

tickets = sa.Table(
    "tickets",
    metadata,
    sa.Column("ticket_id", BIGINT, primary_key=True, autoincrement=False),
    sa.Column("subject", sa.Text),
    sa.Column("body", sa.Text),
    sa.Column("created_at", UTCDateTime, nullable=False),
    sa.Column("updated_at", UTCDateTime, nullable=False),
    sa.Index("ix_tickets_created_at", "created_at"),
    sa.Index("ix_tickets_updated_at", "updated_at"),
)


# Outputs are nullable and declared by the head modules (inference/heads/): which heads a run computes
# is configuration (INFERENCE_HEADS). A staged result carries the same output columns as a result.
def _outputs() -> list[sa.Column]:
    return [sa.Column(c.name, c.type, nullable=True) for c in heads.output_columns()]


ticket_results = sa.Table(
    "ticket_results",
    metadata,
    sa.Column("ticket_id", ID, primary_key=True),
    sa.Column("model_id", sa.String(200), nullable=False),
    sa.Column("model_version", sa.String(128), nullable=False),
    sa.Column("content_hash", sa.String(64), nullable=False),
    sa.Column("source_updated_at", UTCDateTime, nullable=False),
    *_outputs(),
    sa.Column("truncated", sa.Boolean, nullable=False),
    sa.Column("input_tokens", sa.Integer, nullable=False),
    sa.Column("run_id", RUN_ID, nullable=False),
    sa.Column("created_at", UTCDateTime, nullable=False),
    sa.Column("updated_at", UTCDateTime, nullable=False),
)

# One row per (run, ticket) that failed; `attempt` counts tries. A row stays open (pending or dead_letter)
# until a result for the ticket is written, which resolves every open row of that ticket.
FAILURE_PENDING, FAILURE_DEAD, FAILURE_RESOLVED = "pending", "dead_letter", "resolved"

ticket_failures = sa.Table(
    "ticket_failures",
    metadata,
    sa.Column("id", BIGINT, primary_key=True, autoincrement=True),
    sa.Column("run_id", RUN_ID, nullable=False),
    sa.Column("ticket_id", ID, nullable=False),
    sa.Column("attempt", sa.Integer, nullable=False),
    sa.Column("content_hash", sa.String(64), nullable=False),
    sa.Column("model_version", sa.String(128), nullable=False),
    sa.Column("error_class", sa.String(40), nullable=False),
    sa.Column("retryable", sa.Boolean, nullable=False),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("message", sa.String(500), nullable=False),
    sa.Column("created_at", UTCDateTime, nullable=False),
    sa.Column("updated_at", UTCDateTime, nullable=False),
    sa.UniqueConstraint("run_id", "ticket_id", name="uq_ticket_failures_run_ticket"),
    sa.Index("ix_ticket_failures_ticket_status", "ticket_id", "status"),
    sa.CheckConstraint("status IN ('pending', 'dead_letter', 'resolved')", name="ck_ticket_failures_status"),
)

inference_runs = sa.Table(
    "inference_runs",
    metadata,
    sa.Column("run_id", RUN_ID, primary_key=True),
    sa.Column("window_start", UTCDateTime, nullable=False),
    sa.Column("window_end", UTCDateTime, nullable=False),
    sa.Column("model_version", sa.String(128), nullable=False),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("options", sa.JSON, nullable=False),
    sa.Column("backlog", sa.Integer, nullable=False, server_default="0"),
    sa.Column("succeeded", sa.Integer, nullable=False, server_default="0"),
    sa.Column("failed", sa.Integer, nullable=False, server_default="0"),
    sa.Column("skipped", sa.Integer, nullable=False, server_default="0"),
    sa.Column("shards", sa.Integer, nullable=False, server_default="0"),
    sa.Column("real_tokens", BIGINT, nullable=False, server_default="0"),
    sa.Column("padded_tokens", BIGINT, nullable=False, server_default="0"),
    sa.Column("device_seconds", sa.Float, nullable=False, server_default="0"),
    sa.Column("source_duplicates", sa.Integer, nullable=False, server_default="0"),  # extra rows of one ID
    sa.Column("retracted", sa.Integer, nullable=False, server_default="0"),  # results of deleted tickets removed
    sa.Column("planned_at", UTCDateTime, nullable=False),
    sa.Column("finished_at", UTCDateTime),
    sa.Column("error", sa.String(500)),
)

# Per-run accounting: one row per backlog ticket, from plan to its final state.
ITEM_PLANNED, ITEM_STAGED, ITEM_SUCCEEDED, ITEM_FAILED, ITEM_SKIPPED = (
    "planned",
    "staged",
    "succeeded",
    "failed",
    "skipped",
)
FINAL_ITEM_STATES = (ITEM_SUCCEEDED, ITEM_FAILED, ITEM_SKIPPED)

inference_run_items = sa.Table(
    "inference_run_items",
    metadata,
    sa.Column("run_id", RUN_ID, primary_key=True),
    sa.Column("ticket_id", ID, primary_key=True),
    sa.Column("shard", sa.Integer, nullable=False),
    sa.Column("est_tokens", sa.Integer, nullable=False),
    sa.Column("content_hash", sa.String(64), nullable=False),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("reason", sa.String(40)),
    sa.Column("attempts", sa.Integer, nullable=False, server_default="0"),
    # No column a shard updates (attempts, status, reason) is indexed, and pages keep room for new versions:
    # claims and settles are heap-only updates (revision 0006).
    sa.Index("ix_run_items_shard", "run_id", "shard", "ticket_id"),
    postgresql_with={"fillfactor": 60},
)

# Outputs of infer_shard waiting for load_results; keyed by (run, ticket) so a rerun resumes.
inference_staging = sa.Table(
    "inference_staging",
    metadata,
    sa.Column("run_id", RUN_ID, primary_key=True),
    sa.Column("ticket_id", ID, primary_key=True),
    sa.Column("content_hash", sa.String(64), nullable=False),
    sa.Column("source_updated_at", UTCDateTime, nullable=False),
    sa.Column("model_version", sa.String(128), nullable=False),
    *_outputs(),
    sa.Column("truncated", sa.Boolean, nullable=False),
    sa.Column("input_tokens", sa.Integer, nullable=False),
    sa.Column("created_at", UTCDateTime, nullable=False),
)

# What a run did over time (the run report, `python -m inference report`): one row per committed chunk of
# infer_shard / retry_failed, and one per step invocation. Counts, timings and histograms only, never text.
inference_chunks = sa.Table(
    "inference_chunks",
    metadata,
    sa.Column("run_id", RUN_ID, primary_key=True),
    sa.Column("step", sa.String(32), primary_key=True),  # infer_shard or retry_failed
    sa.Column("shard", sa.Integer, primary_key=True, autoincrement=False),  # -1 for retry_failed
    sa.Column("step_started_at", UTCDateTime, primary_key=True),  # the task invocation this chunk belongs to
    sa.Column("seq", sa.Integer, primary_key=True, autoincrement=False),  # 1, 2, ... within that invocation
    sa.Column("committed_at", UTCDateTime, nullable=False),
    sa.Column("tickets", sa.Integer, nullable=False),
    sa.Column("staged", sa.Integer, nullable=False),
    sa.Column("failed", sa.Integer, nullable=False),
    sa.Column("skipped", sa.Integer, nullable=False),
    sa.Column("truncated", sa.Integer, nullable=False),
    sa.Column("uncertain", sa.Integer, nullable=False),
    sa.Column("real_tokens", BIGINT, nullable=False),
    sa.Column("padded_tokens", BIGINT, nullable=False),
    sa.Column("model_seconds", sa.Float, nullable=False),
    sa.Column("batch_sizes", sa.JSON, nullable=False),  # rows per successful forward pass, in order
    sa.Column("token_lengths", sa.JSON, nullable=False),  # {tokens: tickets} of the staged results
    sa.Column("categories", sa.JSON, nullable=False),  # {label: tickets} of the staged results ({} without the head)
)

inference_steps = sa.Table(
    "inference_steps",
    metadata,
    sa.Column("run_id", RUN_ID, primary_key=True),
    sa.Column("step", sa.String(32), primary_key=True),
    sa.Column("shard", sa.Integer, primary_key=True, autoincrement=False),  # -1 for steps that are not per shard
    sa.Column("started_at", UTCDateTime, primary_key=True),
    sa.Column("finished_at", UTCDateTime),  # NULL: still running, or the process died
    sa.Column("status", sa.String(16), nullable=False),  # running, succeeded, failed
    sa.Column("error", sa.String(200)),  # the error's class (and our own message), never row contents
    sa.CheckConstraint("status IN ('running', 'succeeded', 'failed')", name="ck_inference_steps_status"),
)

OUR_TABLES = (
    ticket_results,
    ticket_failures,
    inference_runs,
    inference_run_items,
    inference_staging,
    inference_chunks,
    inference_steps,
)


SCHEMA_LOCK_KEY = 7_316_402_911  # any constant: serialises concurrent first-time CREATE TABLE on PostgreSQL


def create_schema(engine: sa.Engine, *, with_demo_source: bool = False) -> None:
    """Readies the database for a run; safe to call from several processes at once.

    Our tables are versioned (`inference.store.migrate`): created at head in an empty database, else
    SchemaOutdated (the run refuses to start) unless they are at head: `python -m inference db upgrade` migrates
    them, and adopts the unversioned tables of an earlier release. At head, a table of ours dropped by hand is
    recreated, the demo source table is created when asked for, and the nullable output columns of head
    modules from outside this repository (INFERENCE_HEAD_MODULES), which no migration knows, are added in place.
    """
    from inference.store import migrate

    migrate.prepare(engine)
    tables = list(OUR_TABLES) + ([tickets] if with_demo_source else [])
    with writing(engine) as conn:
        if conn.dialect.name == "postgresql":
            conn.execute(sa.select(sa.func.pg_advisory_xact_lock(SCHEMA_LOCK_KEY)))
        metadata.create_all(conn, tables=tables, checkfirst=True)
        _add_missing_columns(conn, tables)


def _add_missing_columns(conn: sa.Connection, tables: list[sa.Table]) -> None:
    """Forward migration for tables made by an older version: nullable columns are added in place."""
    inspector = sa.inspect(conn)
    for table in tables:
        present = {c["name"] for c in inspector.get_columns(table.name)}
        for column in table.columns:
            if column.name in present:
                continue
            if not column.nullable:
                raise SchemaOutdated(
                    f"table {table.name} has no column {column.name} and it cannot be added in place: "
                    "migrate it by hand, or drop the table if its content can be recomputed"
                )
            ddl = column.type.compile(dialect=conn.dialect)
            log.warning("adding the nullable column %s.%s, which no migration declares", table.name, column.name)
            conn.exec_driver_sql(f'ALTER TABLE "{table.name}" ADD COLUMN "{column.name}" {ddl}')
