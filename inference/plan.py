"""Which tickets need work, and how many shards. Pure functions (plan writes the shards themselves in the
database: inference/store/planning.py)."""

from __future__ import annotations

import math


def needs_work(
    content_hash: str,
    stored: tuple[str, str] | None,
    model_version: str,
    dead_hashes: set[str] | None,
    reprocess: bool = False,
) -> bool:
    """No result yet, or the text or the model changed since; dead-lettered inputs wait for a change."""
    if dead_hashes and content_hash in dead_hashes and not reprocess:
        return False
    if reprocess or stored is None:
        return True
    stored_hash, stored_version = stored
    return stored_hash != content_hash or stored_version != model_version


def shard_count(total_tokens: int, shard_tokens: int, max_shards: int, items: int, requested: int | None) -> int:
    if items == 0:
        return 0
    wanted = requested if requested else math.ceil(total_tokens / shard_tokens)
    return max(1, min(wanted, max_shards, items))
