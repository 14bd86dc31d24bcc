"""Which tickets need work, and how to split them into shards of similar cost. Pure functions."""

from __future__ import annotations

import datetime as dt
import heapq
import math
from collections.abc import Sequence
from typing import Protocol


class Versioned(Protocol):
    ticket_id: str
    version_at: dt.datetime
    content_hash: str


class Deduplicated:
    """One row per ticket ID, in the order IDs first appear (the source's own order): the newest version wins,
    ties broken by the higher content hash, so every reader picks the same row. Counts the rows dropped."""

    def __init__(self) -> None:
        self._best: dict[str, Versioned] = {}
        self.duplicates = 0

    def add(self, row: Versioned) -> None:
        seen = self._best.get(row.ticket_id)
        if seen is None:
            self._best[row.ticket_id] = row
            return
        self.duplicates += 1
        if (row.version_at, row.content_hash) > (seen.version_at, seen.content_hash):
            self._best[row.ticket_id] = row  # a dict keeps the key's first position

    def __len__(self) -> int:
        return len(self._best)

    def rows(self) -> list[Versioned]:
        return list(self._best.values())


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


def split_shards(items: Sequence[tuple[str, int]], n_shards: int) -> list[list[str]]:
    """Longest-processing-time-first: each item (largest first) goes to the least-loaded shard.

    Within 4/3 of the optimal makespan; deterministic for the same input (ties broken by ID).
    """
    if n_shards < 1:
        return []
    heap = [(0, k) for k in range(n_shards)]
    shards: list[list[str]] = [[] for _ in range(n_shards)]
    for ticket_id, tokens in sorted(items, key=lambda x: (-x[1], x[0])):
        load, k = heapq.heappop(heap)
        shards[k].append(ticket_id)
        heapq.heappush(heap, (load + max(tokens, 1), k))
    return [sorted(s) for s in shards if s]
