"""The embedding itself: little-endian float32 bytes, unit length (`numpy.frombuffer(blob, "<f4")`)."""

from __future__ import annotations

import math

import sqlalchemy as sa

from inference.heads.base import Checker, EncodedChunk, Head, HeadOutput, OutputColumn

NORM_TOLERANCE = 1e-3


def embedding_to_bytes(vector) -> bytes:
    import numpy as np

    return np.asarray(vector, dtype="<f4").tobytes()


def embedding_from_bytes(blob: bytes):
    import numpy as np

    return np.frombuffer(blob, dtype="<f4")


class _Loaded:
    needs_sentences = False

    def __call__(self, chunk: EncodedChunk) -> HeadOutput:
        dim = chunk.embeddings.shape[1] if len(chunk) else 0
        return HeadOutput([{"embedding": embedding_to_bytes(v), "embedding_dim": dim} for v in chunk.embeddings])


class EmbeddingHead(Head):
    name = "embedding"
    order = 10
    columns = (OutputColumn("embedding", sa.LargeBinary()), OutputColumn("embedding_dim", sa.Integer()))

    def build(self, settings, encoder) -> _Loaded:
        return _Loaded()

    def checker(self, settings) -> Checker:
        from inference.modelinfo import embedding_dim

        return check_embedding(embedding_dim(settings.model_dir))


def check_embedding(dim: int) -> Checker:
    import numpy as np

    def check(row) -> str | None:
        blob = row.get("embedding")
        if not isinstance(blob, (bytes, bytearray, memoryview)) or len(blob) != 4 * dim:
            return "embedding has the wrong size"
        if row.get("embedding_dim") != dim:
            return "embedding dimension does not match the model"
        vector = embedding_from_bytes(bytes(blob))
        squared = float(np.dot(vector, vector))  # one pass; NaN or infinite when an element is (or overflows)
        if not math.isfinite(squared) and not np.isfinite(vector).all():
            return "embedding is not finite"
        if not abs(math.sqrt(squared) - 1.0) <= NORM_TOLERANCE:  # NaN-safe: an overflow is not unit length
            return "embedding is not unit length"
        return None

    return check


HEAD = EmbeddingHead()
