"""plan_batches: length-sorted batches under a token budget."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from inference.engine.batching import Batch, padding_efficiency, plan_batches, round_up


def _check_invariants(lengths, batches, max_tokens, max_size, multiple):
    # Every input index exactly once.
    flat = [i for b in batches for i in b.indices]
    assert sorted(flat) == list(range(len(lengths)))
    for b in batches:
        assert b.indices, "no empty batch"
        assert len(b.indices) <= max_size
        assert b.padded_length * len(b.indices) <= max_tokens or len(b.indices) == 1
        # Padded to its own longest member, rounded up to the multiple (an empty item still takes a slot).
        longest = max(max(lengths[i] for i in b.indices), 1)
        assert b.padded_length % multiple == 0
        assert longest <= b.padded_length < longest + multiple
        # Longest first inside the batch.
        members = [lengths[i] for i in b.indices]
        assert members == sorted(members, reverse=True)
    # Longest batches first.
    widths = [b.padded_length for b in batches]
    assert widths == sorted(widths, reverse=True)


lengths_st = st.lists(st.integers(0, 600), max_size=300)


@given(lengths_st, st.integers(1, 5000), st.integers(1, 64), st.sampled_from([1, 2, 8, 64]))
def test_plan_batches_invariants(lengths, max_tokens, max_size, multiple):
    batches = plan_batches(lengths, max_tokens, max_size, multiple)
    _check_invariants(lengths, batches, max_tokens, max_size, multiple)
    assert plan_batches(list(lengths), max_tokens, max_size, multiple) == batches  # deterministic


@given(st.lists(st.integers(1, 600), min_size=1, max_size=300), st.integers(600, 5000), st.integers(1, 64))
def test_batches_are_not_split_needlessly(lengths, max_tokens, max_size):
    """A batch is only closed when the next item would break the size or token limit."""
    batches = plan_batches(lengths, max_tokens, max_size)
    for b, nxt in zip(batches, batches[1:], strict=False):
        assert len(b.indices) == max_size or b.padded_length * (len(b.indices) + 1) > max_tokens, (b, nxt)


def test_single_batch_when_everything_fits():
    lengths = [5, 9, 3, 7]
    (batch,) = plan_batches(lengths, max_tokens=1000, max_size=10)
    assert batch.indices == (1, 3, 0, 2)  # positions in the caller's list, longest first
    assert batch.padded_length == 9
    assert batch.padded_tokens == 36


def test_max_size_respected():
    batches = plan_batches([10] * 10, max_tokens=10_000, max_size=4)
    assert [len(b.indices) for b in batches] == [4, 4, 2]


def test_max_tokens_respected():
    batches = plan_batches([100] * 10, max_tokens=350, max_size=100)
    assert [len(b.indices) for b in batches] == [3, 3, 3, 1]
    assert all(b.padded_tokens <= 350 for b in batches)


def test_padded_length_is_each_batchs_own_longest_rounded_up():
    lengths = [100, 99, 10, 9, 3]
    batches = plan_batches(lengths, max_tokens=208, max_size=2, multiple=8)
    assert [b.padded_length for b in batches] == [104, 16, 8]
    assert [sorted(lengths[i] for i in b.indices) for b in batches] == [[99, 100], [9, 10], [3]]


def test_oversize_item_gets_its_own_batch():
    lengths = [5, 5000, 5, 5]
    batches = plan_batches(lengths, max_tokens=100, max_size=10)
    assert batches[0] == Batch((1,), 5000)
    assert sorted(i for b in batches[1:] for i in b.indices) == [0, 2, 3]
    assert all(1 not in b.indices for b in batches[1:])


def test_equal_lengths_keep_input_order():
    assert plan_batches([4, 4, 4], 100, 10)[0].indices == (0, 1, 2)


def test_zero_length_items_still_take_a_slot():
    batches = plan_batches([0, 0], max_tokens=100, max_size=10, multiple=8)
    assert batches == [Batch((0, 1), 8)]


def test_empty_input():
    assert plan_batches([], 100, 10) == []
    assert padding_efficiency([], []) == 1.0


@pytest.mark.parametrize(("max_tokens", "max_size", "multiple"), [(0, 1, 1), (1, 0, 1), (1, 1, 0), (-5, 10, 1)])
def test_invalid_arguments_raise(max_tokens, max_size, multiple):
    with pytest.raises(ValueError, match="positive"):
        plan_batches([1, 2, 3], max_tokens, max_size, multiple)


@given(st.integers(0, 10_000), st.integers(1, 128))
def test_round_up(n, multiple):
    r = round_up(n, multiple)
    assert r % multiple == 0 and n <= r < n + multiple


def test_padding_efficiency_definition():
    lengths = [10, 5]
    assert padding_efficiency(lengths, [Batch((0, 1), 10)]) == pytest.approx(15 / 20)
    assert padding_efficiency(lengths, [Batch((0,), 10), Batch((1,), 5)]) == pytest.approx(1.0)


def test_sorted_batching_beats_arrival_order_on_long_tailed_lengths():
    rng = random.Random(20240310)
    # Ticket lengths are long-tailed: most short, a few near the model's limit.
    lengths = [min(512, max(4, int(rng.lognormvariate(4.0, 0.9)))) for _ in range(4000)]

    planned = padding_efficiency(lengths, plan_batches(lengths, max_tokens=16_384, max_size=256))

    fixed = 32
    padded = 0
    for start in range(0, len(lengths), fixed):
        chunk = lengths[start : start + fixed]
        padded += max(chunk) * len(chunk)
    arrival = sum(lengths) / padded

    assert planned >= 0.85
    assert arrival < 0.5
    assert planned >= 2 * arrival
