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


MAX_SUMMARY_CHARS = 2000


def check_output(
    row: dict, dim: int, labels: Collection[str], heads: Collection[str] = ("embedding", "category")
) -> str | None:
    """None when the staged output may be written; otherwise what is wrong with it (a fixed text)."""
    if not isinstance(row.get("content_hash"), str) or not HEX64.fullmatch(row["content_hash"]):
        return "content hash is malformed"
    if not isinstance(row.get("input_tokens"), int) or row["input_tokens"] < 1:
        return "input token count is not positive"
    if "embedding" in heads:
        reason = _check_embedding(row.get("embedding"), dim)
        if reason:
            return reason
    if "category" in heads:
        reason = _check_category(row, labels)
        if reason:
            return reason
    if "summary" in heads:
        summary = row.get("summary")
        if not isinstance(summary, str) or not summary.strip():
            return "summary is empty"
        if len(summary) > MAX_SUMMARY_CHARS:
            return "summary is too long"
    return None


def _check_embedding(blob: object, dim: int) -> str | None:
    if not isinstance(blob, (bytes, bytearray, memoryview)) or len(blob) != 4 * dim:
        return "embedding has the wrong size"
    vector = embedding_from_bytes(bytes(blob))
    if not np.isfinite(vector).all():
        return "embedding is not finite"
    if abs(float(np.linalg.norm(vector)) - 1.0) > NORM_TOLERANCE:
        return "embedding is not unit length"
    return None


def _check_category(row: dict, labels: Collection[str]) -> str | None:
    if row.get("category") not in labels:
        return "category is not in the taxonomy"
    score = row.get("category_score")
    if not isinstance(score, float) or not math.isfinite(score) or not -1.0001 <= score <= 1.0001:
        return "category score is not a cosine similarity"
    confidence = row.get("category_confidence")
    if confidence is not None and (not isinstance(confidence, float) or not 0.0 <= confidence <= 1.0):
        return "category confidence is not a probability"
    return None
