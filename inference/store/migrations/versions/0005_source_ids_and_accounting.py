"""Source IDs up to 512 bytes, and the run's source accounting.

- `ticket_id` of ticket_results, ticket_failures, inference_run_items, inference_staging and
  inference_batch_requests: VARCHAR(128) -> VARCHAR(512). Real sources have longer IDs (composite keys, URLs);
  on PostgreSQL a wider varchar changes only the catalog (no table rewrite, no index rebuild); SQLite copies
  each table (batch mode), keeping its rows. Keys beyond 512 bytes fail per ticket (`unsupported_id`).
- inference_runs.source_duplicates (source rows dropped because another row of the same ID was newer) and
  inference_runs.retracted (results removed because their ticket left the source): integers, default 0.

Revision ID: 0005
Revises: 0004
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

ID_TABLES = (
    "ticket_results",
    "ticket_failures",
    "inference_run_items",
    "inference_staging",
    "inference_batch_requests",
)


def upgrade() -> None:
    for table in ID_TABLES:
        with op.batch_alter_table(table) as batch:
            batch.alter_column("ticket_id", existing_type=sa.String(128), type_=sa.String(512), existing_nullable=False)
    with op.batch_alter_table("inference_runs") as batch:
        batch.add_column(sa.Column("source_duplicates", sa.Integer(), nullable=False, server_default="0"))
        batch.add_column(sa.Column("retracted", sa.Integer(), nullable=False, server_default="0"))


def downgrade() -> None:
    # The older release holds IDs of at most 128 characters: rows of longer IDs (tickets it could not process
    # anyway) are deleted first; every other row is kept.
    with op.batch_alter_table("inference_runs") as batch:
        batch.drop_column("retracted")
        batch.drop_column("source_duplicates")
    for table in ID_TABLES:
        t = sa.table(table, sa.column("ticket_id"))
        op.execute(sa.delete(t).where(sa.func.length(t.c.ticket_id) > 128))
        with op.batch_alter_table(table) as batch:
            batch.alter_column("ticket_id", existing_type=sa.String(512), type_=sa.String(128), existing_nullable=False)
