"""needs_work, shard_count and split_shards."""

from __future__ import annotations

import itertools
import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from inference.plan import needs_work, shard_count, split_shards

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


# --- split_shards ------------------------------------------------------------------------------


def _loads(shards, weights):
    return [sum(max(weights[t], 1) for t in s) for s in shards]


def _check_split(items, n_shards, shards):
    weights = dict(items)
    flat = [t for s in shards for t in s]
    assert sorted(flat) == sorted(weights), "every item exactly once"
    assert all(shards), "no empty shards"
    assert len(shards) == min(n_shards, len(items))
    if items:
        loads = _loads(shards, weights)
        total, biggest = sum(loads), max(max(w, 1) for w in weights.values())
        assert max(loads) <= total / len(shards) + biggest


def test_split_shards_example():
    items = [("a", 7), ("b", 5), ("c", 4), ("d", 3), ("e", 1)]
    shards = split_shards(items, 2)
    _check_split(items, 2, shards)
    assert sorted(_loads(shards, dict(items))) == [10, 10]  # the optimum for total 20 on 2 shards
    assert all(s == sorted(s) for s in shards)


def test_split_shards_more_shards_than_items():
    shards = split_shards([("a", 5), ("b", 1)], 10)
    assert sorted(shards) == [["a"], ["b"]]


def test_split_shards_no_items_or_no_shards():
    assert split_shards([], 4) == []
    assert split_shards([("a", 1)], 0) == []
    assert split_shards([("a", 1)], -1) == []


def test_split_shards_one_shard_takes_everything():
    assert split_shards([("b", 3), ("a", 7), ("c", 0)], 1) == [["a", "b", "c"]]


def test_split_shards_zero_token_items_still_count():
    shards = split_shards([(f"t{i}", 0) for i in range(9)], 3)
    assert sorted(len(s) for s in shards) == [3, 3, 3]


def test_split_shards_deterministic_regardless_of_input_order():
    rng = random.Random(7)
    items = [(f"ticket-{i:04d}", rng.choice([1, 5, 5, 20, 256])) for i in range(500)]
    expected = split_shards(items, 7)
    for _ in range(5):
        shuffled = items[:]
        rng.shuffle(shuffled)
        assert split_shards(shuffled, 7) == expected


def test_split_shards_balanced_on_long_tail():
    rng = random.Random(11)
    items = [(f"t{i}", min(256, int(rng.paretovariate(1.2) * 10))) for i in range(5000)]
    shards = split_shards(items, 16)
    _check_split(items, 16, shards)
    loads = _loads(shards, dict(items))
    assert max(loads) - min(loads) <= 256


items_st = st.lists(
    st.tuples(st.text(min_size=1, max_size=6), st.integers(0, 1000)), max_size=80, unique_by=lambda x: x[0]
)


@given(items_st, st.integers(1, 20))
def test_split_shards_properties(items, n_shards):
    shards = split_shards(items, n_shards)
    _check_split(items, n_shards, shards)
    assert split_shards(list(reversed(items)), n_shards) == shards


def _optimal_makespan(weights: list[int], n_shards: int) -> int:
    best = sum(weights)
    for assignment in itertools.product(range(n_shards), repeat=len(weights)):
        loads = [0] * n_shards
        for w, k in zip(weights, assignment, strict=True):
            loads[k] += w
        best = min(best, max(loads))
    return best


@given(st.lists(st.integers(1, 50), min_size=1, max_size=7), st.integers(2, 3))
def test_split_shards_within_four_thirds_of_optimal(weights, n_shards):
    items = [(f"t{i}", w) for i, w in enumerate(weights)]
    shards = split_shards(items, n_shards)
    makespan = max(_loads(shards, dict(items)))
    assert 3 * makespan <= 4 * _optimal_makespan(weights, n_shards)
