"""Length-sorted batching under a token budget. Pure functions: no torch here."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


def round_up(n: int, multiple: int) -> int:
    return -(-n // multiple) * multiple


@dataclass(frozen=True)
class Batch:
    indices: tuple[int, ...]  # positions in the caller's input list, longest first
    padded_length: int

    @property
    def padded_tokens(self) -> int:
        return self.padded_length * len(self.indices)


def plan_batches(lengths: Sequence[int], max_tokens: int, max_size: int, multiple: int = 1) -> list[Batch]:
    """Sort by length (longest first), then cut batches so that padded_length * size <= max_tokens.

    Each batch is padded only to its own longest member, rounded up to `multiple`. The longest
    batches come first, so a budget too large for the device fails at once, not an hour in.
    An item longer than the budget on its own gets a batch of one.
    """
    if max_tokens < 1 or max_size < 1 or multiple < 1:
        raise ValueError("max_tokens, max_size and multiple must be positive")
    order = sorted(range(len(lengths)), key=lambda i: (-lengths[i], i))
    batches: list[Batch] = []
    current: list[int] = []
    width = 0
    for i in order:
        if not current:
            width = round_up(max(lengths[i], 1), multiple)
        elif len(current) >= max_size or width * (len(current) + 1) > max_tokens:
            batches.append(Batch(tuple(current), width))
            current, width = [], round_up(max(lengths[i], 1), multiple)
        current.append(i)
    if current:
        batches.append(Batch(tuple(current), width))
    return batches


def padding_efficiency(lengths: Sequence[int], batches: Sequence[Batch]) -> float:
    padded = sum(b.padded_tokens for b in batches)
    return sum(lengths) / padded if padded else 1.0
