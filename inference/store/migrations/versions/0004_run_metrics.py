"""Run metrics for the run report: inference_chunks and inference_steps.

inference_chunks holds one row per committed chunk, inference_steps one row per step invocation with its wall time.

FROZEN: the tables as inference/store/schema.py declares them in this revision, with plain SQLAlchemy types.

Revision ID: 0004
Revises: 0003
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

_RUN_ID = sa.String(250)
_BIGINT = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
_TS = sa.DateTime(timezone=True)


def tables(metadata: sa.MetaData) -> list[sa.Table]:
    return [
        sa.Table(
            "inference_chunks",
            metadata,
            sa.Column("run_id", _RUN_ID, primary_key=True),
            sa.Column("step", sa.String(32), primary_key=True),
            sa.Column("shard", sa.Integer, primary_key=True, autoincrement=False),
            sa.Column("step_started_at", _TS, primary_key=True),
            sa.Column("seq", sa.Integer, primary_key=True, autoincrement=False),
            sa.Column("committed_at", _TS, nullable=False),
            sa.Column("tickets", sa.Integer, nullable=False),
            sa.Column("staged", sa.Integer, nullable=False),
            sa.Column("failed", sa.Integer, nullable=False),
            sa.Column("skipped", sa.Integer, nullable=False),
            sa.Column("truncated", sa.Integer, nullable=False),
            sa.Column("uncertain", sa.Integer, nullable=False),
            sa.Column("real_tokens", _BIGINT, nullable=False),
            sa.Column("padded_tokens", _BIGINT, nullable=False),
            sa.Column("model_seconds", sa.Float, nullable=False),
            sa.Column("batch_sizes", sa.JSON, nullable=False),
            sa.Column("token_lengths", sa.JSON, nullable=False),
            sa.Column("categories", sa.JSON, nullable=False),
        ),
        sa.Table(
            "inference_steps",
            metadata,
            sa.Column("run_id", _RUN_ID, primary_key=True),
            sa.Column("step", sa.String(32), primary_key=True),
            sa.Column("shard", sa.Integer, primary_key=True, autoincrement=False),
            sa.Column("started_at", _TS, primary_key=True),
            sa.Column("finished_at", _TS),
            sa.Column("status", sa.String(16), nullable=False),
            sa.Column("error", sa.String(200)),
            sa.CheckConstraint("status IN ('running', 'succeeded', 'failed')", name="ck_inference_steps_status"),
        ),
    ]


def upgrade() -> None:
    metadata = sa.MetaData()
    for table in tables(metadata):
        table.create(op.get_bind())


def downgrade() -> None:
    # Older releases keep no per-chunk or per-step metrics: the run report loses its timings.
    for name in ("inference_steps", "inference_chunks"):
        op.drop_table(name)
