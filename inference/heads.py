"""What is computed from one encoder pass: the embedding itself and a zero-shot category."""

from __future__ import annotations

import numpy as np

from inference.engine.encoder import Encoder


class CategoryHead:
    """Cosine similarity to one prototype per label (the normalised mean of its descriptions)."""

    def __init__(self, taxonomy: dict[str, list[str]], encoder: Encoder):
        self.labels = list(taxonomy)
        protos = []
        for label in self.labels:
            out = encoder.encode(taxonomy[label])
            if out.errors:
                raise RuntimeError(f"could not embed the descriptions of category {label!r}")
            mean = out.embeddings.mean(axis=0)
            protos.append(mean / np.linalg.norm(mean))
        self.prototypes = np.stack(protos).astype(np.float32)  # [labels, dim]

    def __call__(self, embeddings: np.ndarray) -> tuple[list[str], np.ndarray]:
        sims = np.nan_to_num(embeddings, nan=0.0) @ self.prototypes.T
        best = sims.argmax(axis=1)
        return [self.labels[i] for i in best], sims[np.arange(len(best)), best].astype(np.float32)
