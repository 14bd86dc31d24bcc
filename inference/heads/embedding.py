"""The embedding itself: little-endian float32 bytes, unit length (`numpy.frombuffer(blob, "<f4")`)."""

from __future__ import annotations

import sqlalchemy as sa

from inference.heads.base import EncodedChunk, Head, HeadOutput, OutputColumn, PageChecker

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

    def checker(self, settings) -> PageChecker:
        from inference.modelinfo import embedding_dim

        return check_embedding(embedding_dim(settings.model_dir))


def check_embedding(dim: int) -> PageChecker:
    """Each row's embedding: `dim` little-endian float32 values, all finite, of unit length (within
    NORM_TOLERANCE). A page is checked at once: its vectors as one matrix, one pass for every norm."""
    import numpy as np

    def page(rows) -> list[str | None]:
        out: list[str | None] = [None] * len(rows)
        whole: list[int] = []
        for k, row in enumerate(rows):
            blob = row.get("embedding")
            if not isinstance(blob, (bytes, bytearray, memoryview)) or len(blob) != 4 * dim:
                out[k] = "embedding has the wrong size"
            elif row.get("embedding_dim") != dim:
                out[k] = "embedding dimension does not match the model"
            else:
                whole.append(k)
        if not whole:
            return out
        vectors = np.frombuffer(b"".join(bytes(rows[k]["embedding"]) for k in whole), dtype="<f4")
        vectors = vectors.reshape(len(whole), dim)
        squared = np.einsum("ij,ij->i", vectors, vectors)  # NaN or infinite where an element is (or overflows)
        unit = np.abs(np.sqrt(squared.astype(np.float64)) - 1.0) <= NORM_TOLERANCE  # False for NaN
        for j in np.flatnonzero(~unit):
            k = whole[j]
            finite = bool(np.isfinite(vectors[j]).all())
            out[k] = "embedding is not unit length" if finite else "embedding is not finite"
        return out

    return PageChecker(page)


HEAD = EmbeddingHead()
