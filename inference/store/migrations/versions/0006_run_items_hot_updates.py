"""inference_run_items: an item's status changes without index writes.

Each item is written three times in a night (claimed, locked, settled). Its status was part of the index
ix_run_items_shard_status (run_id, shard, status), so every settle added index entries, and pages filled to the
brim left no room for heap-only (HOT) updates, so every claim did too. Now:
- ix_run_items_shard (run_id, shard, ticket_id) replaces it: a shard's page query walks it in ticket order
  (skipping the items already settled), and no column a shard updates is indexed;
- on PostgreSQL the table's fillfactor is 60: each page keeps room for the new versions, so claims and
  settles are HOT updates. Pages written before are not rewritten; the next runs' items get the room.

Revision ID: 0006
Revises: 0005
"""

from __future__ import annotations

from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

TABLE = "inference_run_items"


def upgrade() -> None:
    op.drop_index("ix_run_items_shard_status", table_name=TABLE)
    op.create_index("ix_run_items_shard", TABLE, ["run_id", "shard", "ticket_id"])
    if op.get_bind().dialect.name == "postgresql":
        op.execute(f"ALTER TABLE {TABLE} SET (fillfactor = 60)")


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(f"ALTER TABLE {TABLE} RESET (fillfactor)")
    op.drop_index("ix_run_items_shard", table_name=TABLE)
    op.create_index("ix_run_items_shard_status", TABLE, ["run_id", "shard", "status"])
