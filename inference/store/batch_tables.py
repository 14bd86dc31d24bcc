"""Bookkeeping of the Batch API backend: one row per request file (a "part") and one per request in it.

On the shared `metadata`, so `metadata.drop_all` and migrations see them. IDs, counts, hashes and
token totals only: the request files themselves hold ticket text and never reach the database.

`marker` is a random key written before anything is uploaded: it travels in the batch's metadata, so
after a crash between "create batch" and "record its ID" the batch is found again instead of paid twice.
"""

from __future__ import annotations

import sqlalchemy as sa

from inference.store.db import UTCDateTime, writing
from inference.store.schema import BIGINT, ID, RUN_ID, SCHEMA_LOCK_KEY, metadata

# Our side of a part's life; the provider's own status is in `provider_status`.
PART_PREPARED = "prepared"  # members recorded, attempts counted; nothing uploaded yet
PART_UPLOADED = "uploaded"  # request file uploaded (input_file_id); batch maybe created, not yet recorded
PART_SUBMITTED = "submitted"  # provider batch ID recorded: waiting for a terminal status
PART_EXPORTED = "exported"  # offline: request file written for a local batch runner
PART_COLLECTED = "collected"  # every member ended as a staged result or a typed failure
PART_STATES = (PART_PREPARED, PART_UPLOADED, PART_SUBMITTED, PART_EXPORTED, PART_COLLECTED)

inference_batches = sa.Table(
    "inference_batches",
    metadata,
    sa.Column("run_id", RUN_ID, primary_key=True),
    sa.Column("part", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("retry_round", sa.Integer, nullable=False),  # 0: first submission; 1, 2, ...: retry rounds
    sa.Column("marker", sa.String(64), nullable=False, unique=True),
    sa.Column("mode", sa.String(16), nullable=False),  # api | offline
    sa.Column("state", sa.String(16), nullable=False),
    sa.Column("provider_status", sa.String(16)),  # validating, in_progress, ..., completed, expired, ...
    sa.Column("provider_batch_id", sa.String(128), unique=True),
    sa.Column("input_file_id", sa.String(128)),
    sa.Column("output_file_id", sa.String(128)),
    sa.Column("error_file_id", sa.String(128)),
    sa.Column("request_count", sa.Integer, nullable=False),
    sa.Column("request_bytes", BIGINT),
    sa.Column("created_at", UTCDateTime, nullable=False),
    sa.Column("submitted_at", UTCDateTime),
    sa.Column("expires_at", UTCDateTime),  # the provider's end of the completion window
    sa.Column("finished_at", UTCDateTime),  # the provider reached a terminal status
    sa.Column("collected_at", UTCDateTime),
    sa.Column("succeeded", sa.Integer, nullable=False, server_default="0"),
    sa.Column("failed", sa.Integer, nullable=False, server_default="0"),
    sa.Column("ignored_lines", sa.Integer, nullable=False, server_default="0"),  # unknown/malformed/duplicate
    sa.Column("input_tokens", BIGINT, nullable=False, server_default="0"),
    sa.Column("output_tokens", BIGINT, nullable=False, server_default="0"),
    sa.Column("error", sa.String(200)),  # fixed text and provider error codes, never a provider message
    sa.CheckConstraint(
        "state IN ('prepared', 'uploaded', 'submitted', 'exported', 'collected')", name="ck_inference_batches_state"
    ),
)

inference_batch_requests = sa.Table(
    "inference_batch_requests",
    metadata,
    sa.Column("run_id", RUN_ID, primary_key=True),
    sa.Column("part", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("ticket_id", ID, primary_key=True),
    sa.Column("content_hash", sa.String(64), nullable=False),  # of the text that was sent
    sa.Column("source_updated_at", UTCDateTime, nullable=False),
    sa.Column("truncated", sa.Boolean, nullable=False),
    sa.Column("est_tokens", sa.Integer, nullable=False),
    sa.Column("outcome", sa.String(40)),  # NULL while open; "result" or a FailureKind once collected
    sa.Column("input_tokens", sa.Integer),
    sa.Column("output_tokens", sa.Integer),
    sa.Index("ix_batch_requests_ticket", "run_id", "ticket_id"),
)

BATCH_TABLES = (inference_batches, inference_batch_requests)


def create_batch_tables(engine: sa.Engine) -> None:
    """Creates what is missing (until the migrations own these tables); safe to call repeatedly."""
    with writing(engine) as conn:
        if conn.dialect.name == "postgresql":
            conn.execute(sa.select(sa.func.pg_advisory_xact_lock(SCHEMA_LOCK_KEY)))
        metadata.create_all(conn, tables=list(BATCH_TABLES), checkfirst=True)
