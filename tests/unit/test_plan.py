"""needs_work and shard_count."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from inference.plan import needs_work, shard_count

H1, H2 = "a" * 64, "b" * 64
V1, V2 = "model-v1", "model-v2"


# --- needs_work --------------------------------------------------------------------------------


NEEDS_WORK_TABLE = [
    ("no result yet", H1, None, V1, None, False, True),
    ("no result yet, empty dead set", H1, None, V1, set(), False, True),
    ("text changed", H2, (H1, V1), V1, None, False, True),
    ("model changed", H1, (H1, V1), V2, None, False, True),
    ("text and model changed", H2, (H1, V1), V2, None, False, True),
    ("identical", H1, (H1, V1), V1, None, False, False),
    ("identical, other hash dead-lettered", H1, (H1, V1), V1, {H2}, False, False),
    ("identical but reprocess", H1, (H1, V1), V1, None, True, True),
    ("dead-lettered, same hash, no result", H1, None, V1, {H1}, False, False),
    ("dead-lettered, same hash, old result", H1, (H2, V1), V1, {H1}, False, False),
    ("dead-lettered, same hash, model changed", H1, (H1, V1), V2, {H1}, False, False),
    ("dead-lettered, same hash, reprocess", H1, None, V1, {H1}, True, True),
    ("dead-lettered old hash, text changed since", H2, (H1, V1), V1, {H1}, False, True),
    ("dead-lettered old hash, no result", H2, None, V1, {H1}, False, True),
]


@pytest.mark.parametrize(
    ("case", "content_hash", "stored", "model_version", "dead", "reprocess", "expected"),
    NEEDS_WORK_TABLE,
    ids=[row[0] for row in NEEDS_WORK_TABLE],
)
def test_needs_work_truth_table(case, content_hash, stored, model_version, dead, reprocess, expected):
    assert needs_work(content_hash, stored, model_version, dead, reprocess=reprocess) is expected, case


# --- shard_count -------------------------------------------------------------------------------


def test_shard_count_no_items_means_no_shards():
    assert shard_count(0, 1000, 64, 0, None) == 0
    assert shard_count(10**9, 1000, 64, 0, 8) == 0


def test_shard_count_from_token_total():
    assert shard_count(2500, 1000, 64, 100, None) == 3  # ceil, never fewer than needed
    assert shard_count(3000, 1000, 64, 100, None) == 3
    assert shard_count(1, 1000, 64, 100, None) == 1


def test_shard_count_at_least_one_when_there_is_work():
    assert shard_count(0, 1000, 64, 5, None) == 1


def test_shard_count_capped_by_max_shards_and_items():
    assert shard_count(10**9, 1000, 64, 10_000, None) == 64
    assert shard_count(10**9, 1000, 64, 3, None) == 3


def test_shard_count_requested_wins_within_caps():
    assert shard_count(10**9, 1000, 64, 100, 4) == 4
    assert shard_count(1, 1000, 64, 100, 4) == 4
    assert shard_count(1, 1000, 64, 100, 500) == 64
    assert shard_count(1, 1000, 64, 2, 8) == 2


def test_shard_count_zero_request_means_automatic():
    assert shard_count(5000, 1000, 64, 100, 0) == shard_count(5000, 1000, 64, 100, None) == 5


@given(st.integers(0, 10**9), st.integers(1, 10**6), st.integers(1, 1024), st.integers(0, 10**5))
def test_shard_count_bounds(total, per_shard, max_shards, items):
    n = shard_count(total, per_shard, max_shards, items, None)
    if items == 0:
        assert n == 0
    else:
        assert 1 <= n <= min(max_shards, items)
