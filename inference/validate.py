"""Checks every output must pass before it is written. Returns a reason, never raises."""

from __future__ import annotations

import math
import re
from collections.abc import Collection

import numpy as np

HEX64 = re.compile(r"[0-9a-f]{64}")
NORM_TOLERANCE = 1e-3


def embedding_to_bytes(vector: np.ndarray) -> bytes:
    return np.asarray(vector, dtype="<f4").tobytes()


def embedding_from_bytes(blob: bytes) -> np.ndarray:
    return np.frombuffer(blob, dtype="<f4")


def check_output(row: dict, dim: int, labels: Collection[str]) -> str | None:
    """None when the staged output may be written; otherwise what is wrong with it."""
    blob = row.get("embedding")
    if not isinstance(blob, (bytes, bytearray, memoryview)) or len(blob) != 4 * dim:
        return "embedding has the wrong size"
    vector = embedding_from_bytes(bytes(blob))
    if not np.isfinite(vector).all():
        return "embedding is not finite"
    if abs(float(np.linalg.norm(vector)) - 1.0) > NORM_TOLERANCE:
        return "embedding is not unit length"
    if row.get("category") not in labels:
        return "category is not in the taxonomy"
    score = row.get("category_score")
    if not isinstance(score, float) or not math.isfinite(score) or not -1.0001 <= score <= 1.0001:
        return "category score is not a cosine similarity"
    if not isinstance(row.get("content_hash"), str) or not HEX64.fullmatch(row["content_hash"]):
        return "content hash is malformed"
    if not isinstance(row.get("input_tokens"), int) or row["input_tokens"] < 1:
        return "input token count is not positive"
    return None
