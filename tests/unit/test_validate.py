"""Every staged output is checked before it is written: the common fields, then each head's own check."""

from __future__ import annotations

import hashlib
import math

import numpy as np
import pytest

from inference.config import Settings
from inference.heads.category import check_category
from inference.heads.embedding import check_embedding, embedding_from_bytes, embedding_to_bytes
from inference.validate import OutputChecker, check_common, output_checker

DIM = 16
LABELS = ("billing", "login", "shipping")


def check_output(row: dict, dim: int, labels) -> str | None:
    for check in (check_common, check_embedding(dim), check_category(set(labels))):
        reason = check(row)
        if reason:
            return reason
    return None


def unit_vector(dim: int = DIM, seed: int = 0) -> np.ndarray:
    v = np.random.default_rng(seed).standard_normal(dim).astype(np.float32)
    return v / np.linalg.norm(v)


def good_row(**changes) -> dict:
    row = dict(
        embedding=embedding_to_bytes(unit_vector()),
        embedding_dim=DIM,
        category="billing",
        category_score=0.42,
        content_hash=hashlib.sha256(b"ticket").hexdigest(),
        input_tokens=17,
    )
    row.update(changes)
    return row


def with_value(index: int, value: float) -> bytes:
    v = unit_vector().copy()
    v[index] = value
    return embedding_to_bytes(v)


def test_good_row_accepted():
    assert check_output(good_row(), DIM, LABELS) is None


@pytest.mark.parametrize("score", [-1.0, 0.0, 1.0, 1.00005])  # cosine similarity incl. rounding
def test_score_range_accepted(score):
    assert check_output(good_row(category_score=score), DIM, LABELS) is None


def test_buffer_types_accepted():
    blob = embedding_to_bytes(unit_vector())
    assert check_output(good_row(embedding=bytearray(blob)), DIM, LABELS) is None
    assert check_output(good_row(embedding=memoryview(blob)), DIM, LABELS) is None


def test_unit_length_within_tolerance_accepted():
    v = unit_vector() * np.float32(1.0005)
    assert check_output(good_row(embedding=embedding_to_bytes(v)), DIM, LABELS) is None


DEFECTS = {
    "too short": (dict(embedding=embedding_to_bytes(unit_vector(DIM - 1))), "wrong size"),
    "too long": (dict(embedding=embedding_to_bytes(unit_vector(DIM + 1))), "wrong size"),
    "float64 bytes": (dict(embedding=unit_vector().astype(np.float64).tobytes()), "wrong size"),
    "odd byte count": (dict(embedding=embedding_to_bytes(unit_vector()) + b"\x00"), "wrong size"),
    "empty": (dict(embedding=b""), "wrong size"),
    "missing": (dict(embedding=None), "wrong size"),
    "a list, not bytes": (dict(embedding=unit_vector().tolist()), "wrong size"),
    "NaN": (dict(embedding=with_value(3, float("nan"))), "not finite"),
    "inf": (dict(embedding=with_value(0, float("inf"))), "not finite"),
    "-inf": (dict(embedding=with_value(DIM - 1, float("-inf"))), "not finite"),
    "not unit length": (dict(embedding=embedding_to_bytes(unit_vector() * 2)), "not unit length"),
    "zero vector": (dict(embedding=embedding_to_bytes(np.zeros(DIM, np.float32))), "not unit length"),
    "slightly long": (dict(embedding=embedding_to_bytes(unit_vector() * np.float32(1.01))), "not unit length"),
    "finite but overflowing": (dict(embedding=with_value(5, 1e30)), "not unit length"),
    "unknown category": (dict(category="refunds"), "category is not in the taxonomy"),
    "category None": (dict(category=None), "category is not in the taxonomy"),
    "NaN score": (dict(category_score=float("nan")), "category score"),
    "inf score": (dict(category_score=math.inf), "category score"),
    "score above 1": (dict(category_score=1.5), "category score"),
    "score below -1": (dict(category_score=-1.5), "category score"),
    "score not a float": (dict(category_score="0.4"), "category score"),
    "score missing": (dict(category_score=None), "category score"),
    "hash too short": (dict(content_hash="a" * 63), "content hash"),
    "hash too long": (dict(content_hash="a" * 65), "content hash"),
    "hash upper case": (dict(content_hash="A" * 64), "content hash"),
    "hash not hex": (dict(content_hash="g" * 64), "content hash"),
    "hash bytes": (dict(content_hash=b"a" * 64), "content hash"),
    "zero tokens": (dict(input_tokens=0), "token count"),
    "negative tokens": (dict(input_tokens=-3), "token count"),
    "tokens as float": (dict(input_tokens=17.0), "token count"),
    "tokens missing": (dict(input_tokens=None), "token count"),
}


@pytest.mark.parametrize("defect", sorted(DEFECTS))
def test_each_defect_rejected(defect):
    changes, reason = DEFECTS[defect]
    result = check_output(good_row(**changes), DIM, LABELS)
    assert result is not None
    assert reason in result


def test_hash_with_trailing_newline_rejected():
    result = check_output(good_row(content_hash="a" * 64 + "\n"), DIM, LABELS)
    assert result is not None and "content hash" in result


def test_missing_keys_rejected_without_raising():
    row = good_row()
    for key in list(row):
        partial = {k: v for k, v in row.items() if k != key}
        assert check_output(partial, DIM, LABELS) is not None, key


def test_round_trip_float32():
    v = unit_vector(384, seed=3)
    blob = embedding_to_bytes(v)
    assert isinstance(blob, bytes) and len(blob) == 4 * 384
    back = embedding_from_bytes(blob)
    assert back.dtype == np.dtype("<f4")
    np.testing.assert_array_equal(back, v)


def test_round_trip_converts_other_dtypes_and_byte_orders():
    v = unit_vector(32, seed=5)
    for source in (v.astype(np.float64), v.astype(">f4"), v.tolist()):
        np.testing.assert_array_equal(embedding_from_bytes(embedding_to_bytes(source)), v)
    np.testing.assert_allclose(embedding_from_bytes(embedding_to_bytes(v.astype(np.float16))), v, atol=1e-3)


def test_bytes_are_little_endian_float32():
    assert embedding_to_bytes(np.array([1.0], dtype=np.float64)) == b"\x00\x00\x80\x3f"


def test_the_configured_heads_decide_what_is_checked():
    """A deployment without the category head does not reject rows for having no category."""
    row = good_row(embedding=embedding_to_bytes(unit_vector(384)), embedding_dim=384, category=None)
    assert output_checker(Settings(heads=("embedding",), cache_dir=""))(row) is None
    assert "category" in output_checker(Settings(heads=("embedding", "category"), cache_dir=""))(row)
    assert "summary" in output_checker(Settings(heads=("embedding", "summary"), cache_dir=""))(row)
    assert "dimension" in output_checker(Settings(heads=("embedding",), cache_dir=""))({**row, "embedding_dim": 383})


def test_a_page_is_checked_at_once_with_each_rows_own_reason():
    """Loading checks a page of rows in one call (the embedding's norms as one matrix): every row gets the
    reason it gets alone, whatever it sits between, and rows of the wrong size do not disturb the matrix."""
    checker = OutputChecker([check_common, check_embedding(DIM), check_category(set(LABELS))])
    cases = [(good_row(), None)] + [(good_row(**changes), reason) for changes, reason in DEFECTS.values()]
    rows = [row for row, _ in cases for _ in range(2)] + [good_row(embedding=embedding_to_bytes(unit_vector(seed=3)))]
    reasons = checker.page(rows)
    assert reasons == [checker(row) for row in rows]
    for (_row, expected), got in zip([c for c in cases for _ in range(2)], reasons[:-1], strict=True):
        assert (got is None) if expected is None else (got is not None and expected in got)
    assert reasons[-1] is None
    assert checker.page([]) == []


def test_the_page_check_agrees_with_numpys_norm_at_the_tolerance():
    """Just inside and just outside NORM_TOLERANCE, as np.linalg.norm sees it."""
    from inference.heads.embedding import NORM_TOLERANCE

    check = check_embedding(DIM)
    for scale in (
        1 + NORM_TOLERANCE * 0.9,
        1 - NORM_TOLERANCE * 0.9,
        1 + NORM_TOLERANCE * 1.1,
        1 - NORM_TOLERANCE * 1.1,
    ):
        v = unit_vector() * np.float32(scale)
        inside = abs(float(np.linalg.norm(v)) - 1.0) <= NORM_TOLERANCE
        assert (check(good_row(embedding=embedding_to_bytes(v))) is None) is inside, scale
