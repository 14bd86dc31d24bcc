"""Baseline: the tables release b508944 creates.

ticket_results, ticket_failures, inference_runs, inference_run_items and inference_staging. Not the demo source
table `tickets`: that one is the demo's, and `create_schema(with_demo_source=True)` keeps creating it from the
metadata.

FROZEN. These definitions are the released schema, written out with plain SQLAlchemy types (`UTCDateTime` is a
TypeDecorator over `DateTime(timezone=True)`: same DDL), so later edits of `inference.store.schema` or of the
head modules can never change what this revision creates. `inference.store.migrate` also reads `tables()` to
check and adopt the unversioned tables an earlier release made.

Revision ID: 0001
Revises: (none)
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

_ID = sa.String(128)
_RUN_ID = sa.String(250)
_BIGINT = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
_TS = sa.DateTime(timezone=True)

# The nullable outputs (release 4597777 made them nullable; 4040965 had the first four NOT NULL and lacked the
# others). inference_staging had them all but embedding_dim.
OUTPUTS = (
    ("embedding", sa.LargeBinary),
    ("embedding_dim", sa.Integer),
    ("category", lambda: sa.String(64)),
    ("category_score", sa.Float),
    ("category_confidence", sa.Float),
    ("category_uncertain", sa.Boolean),
    ("summary", sa.Text),
)


def _outputs(skip: tuple[str, ...] = ()) -> list[sa.Column]:
    return [sa.Column(name, make(), nullable=True) for name, make in OUTPUTS if name not in skip]


def tables(metadata: sa.MetaData) -> list[sa.Table]:
    """The five tables of b508944, attached to `metadata`."""
    return [
        sa.Table(
            "ticket_results",
            metadata,
            sa.Column("ticket_id", _ID, primary_key=True),
            sa.Column("model_id", sa.String(200), nullable=False),
            sa.Column("model_version", sa.String(128), nullable=False),
            sa.Column("content_hash", sa.String(64), nullable=False),
            sa.Column("source_updated_at", _TS, nullable=False),
            *_outputs(),
            sa.Column("truncated", sa.Boolean, nullable=False),
            sa.Column("input_tokens", sa.Integer, nullable=False),
            sa.Column("run_id", _RUN_ID, nullable=False),
            sa.Column("created_at", _TS, nullable=False),
            sa.Column("updated_at", _TS, nullable=False),
        ),
        sa.Table(
            "ticket_failures",
            metadata,
            sa.Column("id", _BIGINT, primary_key=True, autoincrement=True),
            sa.Column("run_id", _RUN_ID, nullable=False),
            sa.Column("ticket_id", _ID, nullable=False),
            sa.Column("attempt", sa.Integer, nullable=False),
            sa.Column("content_hash", sa.String(64), nullable=False),
            sa.Column("model_version", sa.String(128), nullable=False),
            sa.Column("error_class", sa.String(40), nullable=False),
            sa.Column("retryable", sa.Boolean, nullable=False),
            sa.Column("status", sa.String(16), nullable=False),
            sa.Column("message", sa.String(500), nullable=False),
            sa.Column("created_at", _TS, nullable=False),
            sa.Column("updated_at", _TS, nullable=False),
            sa.UniqueConstraint("run_id", "ticket_id", name="uq_ticket_failures_run_ticket"),
            sa.Index("ix_ticket_failures_ticket_status", "ticket_id", "status"),
            sa.CheckConstraint("status IN ('pending', 'dead_letter', 'resolved')", name="ck_ticket_failures_status"),
        ),
        sa.Table(
            "inference_runs",
            metadata,
            sa.Column("run_id", _RUN_ID, primary_key=True),
            sa.Column("window_start", _TS, nullable=False),
            sa.Column("window_end", _TS, nullable=False),
            sa.Column("model_version", sa.String(128), nullable=False),
            sa.Column("status", sa.String(16), nullable=False),
            sa.Column("options", sa.JSON, nullable=False),
            sa.Column("backlog", sa.Integer, nullable=False, server_default="0"),
            sa.Column("succeeded", sa.Integer, nullable=False, server_default="0"),
            sa.Column("failed", sa.Integer, nullable=False, server_default="0"),
            sa.Column("skipped", sa.Integer, nullable=False, server_default="0"),
            sa.Column("shards", sa.Integer, nullable=False, server_default="0"),
            sa.Column("real_tokens", _BIGINT, nullable=False, server_default="0"),
            sa.Column("padded_tokens", _BIGINT, nullable=False, server_default="0"),
            sa.Column("device_seconds", sa.Float, nullable=False, server_default="0"),
            sa.Column("planned_at", _TS, nullable=False),
            sa.Column("finished_at", _TS),
            sa.Column("error", sa.String(500)),
        ),
        sa.Table(
            "inference_run_items",
            metadata,
            sa.Column("run_id", _RUN_ID, primary_key=True),
            sa.Column("ticket_id", _ID, primary_key=True),
            sa.Column("shard", sa.Integer, nullable=False),
            sa.Column("est_tokens", sa.Integer, nullable=False),
            sa.Column("content_hash", sa.String(64), nullable=False),
            sa.Column("status", sa.String(16), nullable=False),
            sa.Column("reason", sa.String(40)),
            sa.Column("attempts", sa.Integer, nullable=False, server_default="0"),
            sa.Index("ix_run_items_shard_status", "run_id", "shard", "status"),
        ),
        sa.Table(
            "inference_staging",
            metadata,
            sa.Column("run_id", _RUN_ID, primary_key=True),
            sa.Column("ticket_id", _ID, primary_key=True),
            sa.Column("content_hash", sa.String(64), nullable=False),
            sa.Column("source_updated_at", _TS, nullable=False),
            sa.Column("model_version", sa.String(128), nullable=False),
            *_outputs(skip=("embedding_dim",)),
            sa.Column("truncated", sa.Boolean, nullable=False),
            sa.Column("input_tokens", sa.Integer, nullable=False),
            sa.Column("created_at", _TS, nullable=False),
        ),
    ]


def upgrade() -> None:
    # The same CREATE TABLE / CREATE INDEX statements b508944's metadata.create_all emitted.
    metadata = sa.MetaData()
    tables(metadata)
    metadata.create_all(op.get_bind(), checkfirst=False)


def downgrade() -> None:
    # Below the baseline there is nothing: this drops every table of ours and its data. Refused unless the
    # caller asked for it explicitly (`python -m inference db downgrade base --drop-tables`).
    config = op.get_context().config
    if config is None or not config.attributes.get("drop_tables"):
        from inference.errors import ConfigError

        raise ConfigError(
            "downgrading below revision 0001 drops every result, failure and run table with their data: "
            "pass --drop-tables to do it",
            remedy="downgrade to 0001 at the lowest, or pass --drop-tables if the data can be thrown away",
        )
    metadata = sa.MetaData()
    for table in reversed(tables(metadata)):
        op.drop_table(table.name)
