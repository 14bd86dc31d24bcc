"""The category head: zero-shot label descriptions plus few-shot example prototypes, calibrated confidence."""

from __future__ import annotations

import hashlib
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import sqlalchemy as sa

from inference.examples import Example
from inference.heads.base import Checker, EncodedChunk, Head, HeadOutput, OutputColumn

# label score = w * description prototype + (1 - w) * example prototype, for labels with examples.
# 0 won 5-fold cross-validation on the bundled examples (0.817 vs 0.810 at 0.2, 0.794 at 0.4; BENCHMARKS.md):
# with ~50 examples a label, its descriptions add nothing; labels without examples use descriptions alone.
DESCRIPTION_WEIGHT = 0.0
TEMPERATURES = np.geomspace(0.005, 0.5, 60)
DEFAULT_TEMPERATURE = 0.05


def _unit(v: np.ndarray) -> np.ndarray:
    return v / np.linalg.norm(v, axis=-1, keepdims=True)


@dataclass
class Categories:
    labels: list[str]
    scores: np.ndarray  # the chosen label's score (cosine scale)
    confidence: np.ndarray  # calibrated probability of the chosen label
    uncertain: np.ndarray  # confidence below the threshold


class CategoryClassifier:
    """Zero-shot label descriptions plus few-shot example prototypes; calibrated confidence.

    Each label's score mixes the cosine to its descriptions' prototype and to its examples'
    prototype. Confidence is a softmax over label scores at a temperature fitted by leave-one-out
    on the examples (so it follows whatever examples a deployment brings).
    """

    def __init__(
        self,
        taxonomy: dict[str, list[str]],
        examples: Sequence[Example],
        encoder,
        uncertain_below: float = 0.5,
        description_weight: float = DESCRIPTION_WEIGHT,
        cache: Path | None = None,
    ):
        """`cache`: an .npz of the prototypes for exactly this model version (they cost a few seconds
        of model time to compute on a CPU at every task start otherwise)."""
        self.labels = list(taxonomy)
        self.uncertain_below = uncertain_below
        self.weight = description_weight
        index = {label: k for k, label in enumerate(self.labels)}
        stored = _read_cache(cache, self.labels, len(examples))
        if stored is not None:
            self.desc, self.example_vectors = stored
        else:
            self.desc = np.stack([_unit(_encode(encoder, taxonomy[label]).mean(axis=0)) for label in self.labels])
            texts = [e.text for e in examples]
            self.example_vectors = _encode(encoder, texts) if texts else np.zeros((0, encoder.dim), dtype=np.float32)
            _write_cache(cache, self.labels, self.desc, self.example_vectors)
        self.example_labels = np.array([index[e.label] for e in examples], dtype=np.int64)
        self.example_sums = np.zeros_like(self.desc)
        np.add.at(self.example_sums, self.example_labels, self.example_vectors)
        self.example_counts = np.bincount(self.example_labels, minlength=len(self.labels))
        self.temperature = self._fit_temperature()

    def _scores(self, emb: np.ndarray, sums: np.ndarray, counts: np.ndarray) -> np.ndarray:
        desc = emb @ self.desc.T
        has = counts > 0
        if not has.any():
            return desc
        protos = np.where(has[:, None], sums / np.maximum(counts, 1)[:, None], 0.0)
        norms = np.linalg.norm(protos, axis=1, keepdims=True)
        protos = np.divide(protos, norms, out=np.zeros_like(protos), where=norms > 0)
        mixed = self.weight * desc + (1 - self.weight) * (emb @ protos.T)
        return np.where(has[None, :], mixed, desc)

    def scores(self, emb: np.ndarray) -> np.ndarray:
        return self._scores(np.nan_to_num(emb, nan=0.0), self.example_sums, self.example_counts)

    def _fit_temperature(self) -> float:
        """Maximum likelihood over a grid, each example scored without itself in its prototype."""
        if len(self.example_labels) < 2 * len(self.labels):
            return DEFAULT_TEMPERATURE
        rows = []
        for vec, label in zip(self.example_vectors, self.example_labels, strict=True):
            sums, counts = self.example_sums.copy(), self.example_counts.copy()
            sums[label] -= vec
            counts[label] -= 1
            rows.append(self._scores(vec[None, :], sums, counts)[0])
        held_out = np.stack(rows)
        best, best_nll = DEFAULT_TEMPERATURE, np.inf
        for t in TEMPERATURES:
            logp = held_out / t - _logsumexp(held_out / t)
            nll = -logp[np.arange(len(held_out)), self.example_labels].mean()
            if nll < best_nll:
                best, best_nll = float(t), nll
        return best

    def __call__(self, emb: np.ndarray) -> Categories:
        scores = self.scores(emb)
        best = scores.argmax(axis=1)
        logits = scores / self.temperature
        probs = np.exp(logits - _logsumexp(logits))
        confidence = probs[np.arange(len(best)), best].astype(np.float32)
        return Categories(
            [self.labels[i] for i in best],
            scores[np.arange(len(best)), best].astype(np.float32),
            confidence,
            confidence < self.uncertain_below,
        )


def _read_cache(path: Path | None, labels: list[str], n_examples: int):
    if path is None or not path.is_file():
        return None
    try:
        with np.load(path, allow_pickle=False) as data:
            if list(data["labels"]) != labels or len(data["examples"]) != n_examples:
                return None
            return data["desc"], data["examples"]
    except (OSError, ValueError, KeyError):
        return None  # unreadable: recompute


def _write_cache(path: Path | None, labels: list[str], desc: np.ndarray, examples: np.ndarray) -> None:
    if path is None:
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp.npz")
        np.savez(tmp, labels=np.array(labels), desc=desc, examples=examples)
        os.replace(tmp, path)  # atomic: concurrent tasks never read half a file
    except OSError:
        pass  # a cache, not a requirement


def _logsumexp(x: np.ndarray) -> np.ndarray:
    top = x.max(axis=1, keepdims=True)
    return top + np.log(np.exp(x - top).sum(axis=1, keepdims=True))


def _encode(encoder, texts: Sequence[str]) -> np.ndarray:
    out = encoder.encode(list(texts))
    if out.errors:
        raise RuntimeError(f"could not embed {len(out.errors)} of the category descriptions or examples")
    return out.embeddings


class _Loaded:
    needs_sentences = False

    def __init__(self, classifier: CategoryClassifier):
        self.classifier = classifier

    def __call__(self, chunk: EncodedChunk) -> HeadOutput:
        got = self.classifier(chunk.embeddings)
        return HeadOutput(
            [
                {
                    "category": got.labels[k],
                    "category_score": float(got.scores[k]),
                    "category_confidence": float(got.confidence[k]),
                    "category_uncertain": bool(got.uncertain[k]),
                }
                for k in range(len(chunk))
            ]
        )


class CategoryHead(Head):
    name = "category"
    order = 20
    columns = (
        OutputColumn("category", sa.String(64)),
        OutputColumn("category_score", sa.Float()),
        OutputColumn("category_confidence", sa.Float()),
        OutputColumn("category_uncertain", sa.Boolean()),
    )

    def fingerprint(self, settings) -> dict:
        from inference.examples import BUNDLED_EXAMPLES
        from inference.taxonomy import load_taxonomy, taxonomy_fingerprint

        spec = settings.fewshot_file
        files = [str(p) for p in BUNDLED_EXAMPLES] if not spec else [p.strip() for p in spec.split(",") if p.strip()]
        return {
            "taxonomy": taxonomy_fingerprint(load_taxonomy(settings)),
            "fewshot": "none" if spec == "none" else [_file_digest(p) for p in files],
            "uncertain_below": settings.uncertain_below,
        }

    def build(self, settings, encoder) -> _Loaded:
        return _Loaded(classifier_for(settings, encoder))

    def checker(self, settings) -> Checker:
        from inference.taxonomy import load_taxonomy

        return check_category(set(load_taxonomy(settings)))


def check_category(labels: set[str]) -> Checker:
    def check(row) -> str | None:
        if row.get("category") not in labels:
            return "category is not in the taxonomy"
        score = row.get("category_score")
        if not isinstance(score, float) or not math.isfinite(score) or not -1.0001 <= score <= 1.0001:
            return "category score is not a cosine similarity"
        confidence = row.get("category_confidence")
        if confidence is not None and (not isinstance(confidence, float) or not 0.0 <= confidence <= 1.0):
            return "category confidence is not a probability"
        return None

    return check


def classifier_for(settings, encoder) -> CategoryClassifier:
    """The classifier as the pipeline builds it: taxonomy, few-shot examples, prototype cache."""
    from inference.examples import load_example_files
    from inference.taxonomy import load_taxonomy

    taxonomy = load_taxonomy(settings)
    examples = load_example_files(settings.fewshot_file, set(taxonomy))
    cache = None
    if settings.cache_dir:
        # Keyed on what the prototypes are computed from (weights, taxonomy, examples, the encoder and its
        # dtype), never on INFERENCE_MODEL_VERSION: a fixed version string must not serve stale prototypes.
        from inference.modelinfo import heads_fingerprint, weights_fingerprint

        parts = (weights_fingerprint(settings.model_dir), heads_fingerprint(settings), encoder.identity)
        key = hashlib.sha256("|".join(map(str, parts)).encode()).hexdigest()[:24]
        cache = Path(settings.cache_dir) / f"category-{key}.npz"
    return CategoryClassifier(taxonomy, examples, encoder, settings.uncertain_below, cache=cache)


def _file_digest(path: str) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest() if Path(path).is_file() else "missing"


HEAD = CategoryHead()
