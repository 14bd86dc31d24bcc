"""The Batch API backend's bookkeeping: inference_batches and inference_batch_requests.

FROZEN: the tables as inference/store/batch_tables.py declared them when they were added (commit 00e80d5), with
plain SQLAlchemy types. Created only where missing: between that commit and this revision
`create_batch_tables` made them outside the migrations, with this same shape.

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

_ID = sa.String(128)
_RUN_ID = sa.String(250)
_BIGINT = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
_TS = sa.DateTime(timezone=True)


def tables(metadata: sa.MetaData) -> list[sa.Table]:
    return [
        sa.Table(
            "inference_batches",
            metadata,
            sa.Column("run_id", _RUN_ID, primary_key=True),
            sa.Column("part", sa.Integer, primary_key=True, autoincrement=False),
            sa.Column("retry_round", sa.Integer, nullable=False),
            sa.Column("marker", sa.String(64), nullable=False, unique=True),
            sa.Column("mode", sa.String(16), nullable=False),
            sa.Column("state", sa.String(16), nullable=False),
            sa.Column("provider_status", sa.String(16)),
            sa.Column("provider_batch_id", sa.String(128), unique=True),
            sa.Column("input_file_id", sa.String(128)),
            sa.Column("output_file_id", sa.String(128)),
            sa.Column("error_file_id", sa.String(128)),
            sa.Column("request_count", sa.Integer, nullable=False),
            sa.Column("request_bytes", _BIGINT),
            sa.Column("created_at", _TS, nullable=False),
            sa.Column("submitted_at", _TS),
            sa.Column("expires_at", _TS),
            sa.Column("finished_at", _TS),
            sa.Column("collected_at", _TS),
            sa.Column("succeeded", sa.Integer, nullable=False, server_default="0"),
            sa.Column("failed", sa.Integer, nullable=False, server_default="0"),
            sa.Column("ignored_lines", sa.Integer, nullable=False, server_default="0"),
            sa.Column("input_tokens", _BIGINT, nullable=False, server_default="0"),
            sa.Column("output_tokens", _BIGINT, nullable=False, server_default="0"),
            sa.Column("error", sa.String(200)),
            sa.CheckConstraint(
                "state IN ('prepared', 'uploaded', 'submitted', 'exported', 'collected')",
                name="ck_inference_batches_state",
            ),
        ),
        sa.Table(
            "inference_batch_requests",
            metadata,
            sa.Column("run_id", _RUN_ID, primary_key=True),
            sa.Column("part", sa.Integer, primary_key=True, autoincrement=False),
            sa.Column("ticket_id", _ID, primary_key=True),
            sa.Column("content_hash", sa.String(64), nullable=False),
            sa.Column("source_updated_at", _TS, nullable=False),
            sa.Column("truncated", sa.Boolean, nullable=False),
            sa.Column("est_tokens", sa.Integer, nullable=False),
            sa.Column("outcome", sa.String(40)),
            sa.Column("input_tokens", sa.Integer),
            sa.Column("output_tokens", sa.Integer),
            sa.Index("ix_batch_requests_ticket", "run_id", "ticket_id"),
        ),
    ]


def upgrade() -> None:
    metadata = sa.MetaData()
    tables(metadata)
    metadata.create_all(op.get_bind(), checkfirst=True)


def downgrade() -> None:
    # An older release has no Batch API backend: its bookkeeping goes (downgrade only with no run in progress).
    for name in ("inference_batch_requests", "inference_batches"):
        op.drop_table(name)
