"""inference_staging gets a nullable embedding_dim.

A staged result carries the same output columns as a result (the head modules declare them once for both tables).

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("inference_staging") as batch:
        batch.add_column(sa.Column("embedding_dim", sa.Integer(), nullable=True))


def downgrade() -> None:
    # SQLite: the table is copied without the column (batch mode); staged rows are kept.
    with op.batch_alter_table("inference_staging") as batch:
        batch.drop_column("embedding_dim")
