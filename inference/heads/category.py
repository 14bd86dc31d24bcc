"""The category head: a calibrated linear head on the embeddings; unreadable tickets flagged `uncertain`.

Default (INFERENCE_CATEGORY_HEAD unset): fitted at task start from the bundled files, as chosen in
benchmarks/tune_categories.py (BENCHMARKS.md): logistic regression on the bundled examples + development
tickets (INFERENCE_FEWSHOT) at weight 1 and the taxonomy's descriptions at weight 12, anchored to the plain
baseline (cosine to each label's first description, `Recipe.anchor`), temperature fitted on out-of-fold
logits (`inference.category_fit`). The fit is deterministic and cached in INFERENCE_CACHE_DIR,
keyed on what it is computed from (weights, taxonomy, examples, recipe, encoder), so a task start costs a
file read, not re-embedding the examples.

INFERENCE_CATEGORY_HEAD=FILE: a head fitted on a help desk's own labelled tickets
(`python -m inference fit-categories`); its labels are the taxonomy then.

`uncertain` = confidence below INFERENCE_UNCERTAIN_BELOW (0.8), or a ticket the English-only encoder cannot
read (inference.readability; INFERENCE_FLAG_UNREADABLE). The head reads such a ticket through a word-by-word
English gloss when a bundled glossary covers its language (inference.gloss; INFERENCE_GLOSS_UNREADABLE), and
so do the fits (bundled training tickets and `fit-categories`), so training and inference read alike; the
ticket stays `uncertain`. `category_score` = cosine to the chosen label's prototype (the unit mean of its
training tickets and descriptions).
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import sqlalchemy as sa

from inference.category_fit import DEFAULT_RECIPE, LinearHead, TrainingData, fit, text_digest
from inference.errors import ConfigError
from inference.heads.base import Checker, EncodedChunk, Head, HeadOutput, OutputColumn
from inference.mailtext import INPUT_POLICY

log = logging.getLogger("inference")


@dataclass
class Categories:
    labels: list[str]
    scores: np.ndarray  # cosine to the chosen label's prototype
    confidence: np.ndarray  # calibrated probability of the chosen label
    uncertain: np.ndarray  # confidence below the threshold, or unreadable
    unreadable: np.ndarray  # the encoder cannot read the ticket's language


class CategoryClassifier:
    """A fitted `LinearHead` with the uncertainty rule of a deployment."""

    def __init__(self, head: LinearHead, uncertain_below: float = 0.8):
        self.head = head
        self.labels = list(head.labels)
        self.temperature = head.temperature
        self.uncertain_below = uncertain_below

    def __call__(self, emb: np.ndarray, unreadable: Sequence[bool] | None = None) -> Categories:
        probs = self.head.probabilities(emb)
        best = probs.argmax(axis=1)
        rows = np.arange(len(best))
        confidence = probs[rows, best].astype(np.float32)
        flags = np.zeros(len(best), dtype=bool) if unreadable is None else np.asarray(unreadable, dtype=bool)
        cosine = np.clip(self.head.cosines(emb)[rows, best], -1.0, 1.0).astype(np.float32)
        return Categories(
            [self.labels[i] for i in best], cosine, confidence, (confidence < self.uncertain_below) | flags, flags
        )


def reembed(encoder, vectors: np.ndarray, texts: dict[int, str]) -> np.ndarray:
    """`vectors` with the rows in `texts` embedded from those texts instead; a text the encoder fails on keeps
    its row."""
    if not texts:
        return vectors
    rows = sorted(texts)
    out = encoder.encode([texts[k] for k in rows])
    vectors = np.array(vectors, copy=True)
    for j, k in enumerate(rows):
        if j not in out.errors:
            vectors[k] = out.embeddings[j]
    return vectors


def gloss_languages(
    encoder, texts: Sequence[str], glossary_dir: str | None = None, glosses: bool = True
) -> tuple[list[bool], dict]:
    """The unreadable flags of `texts` and (with `glosses`), for the flagged ones a glossary covers, index ->
    its language's glossary (inference.gloss; `glossary_dir`: INFERENCE_GLOSSARY_DIR)."""
    from inference.gloss import languages
    from inference.readability import unreadable_flags

    flags = unreadable_flags(texts, token_strings(encoder, texts))
    return flags, languages(texts, flags, extra_dir=glossary_dir) if glosses else {}


def chunk_reading(
    chunk: EncodedChunk, encoder, glossary_dir: str | None, glosses: bool = True
) -> tuple[list[bool], dict]:
    """`gloss_languages` of a chunk's texts, computed once for every head that asks (category, summary)."""
    key = ("gloss_languages", glossary_dir, glosses)
    if key not in chunk.shared:
        chunk.shared[key] = gloss_languages(encoder, chunk.texts, glossary_dir, glosses)
    return chunk.shared[key]


def gloss_sentence_vectors(
    encoder,
    texts: Sequence[str],
    sentences: Sequence,
    items: np.ndarray,
    sentence_vectors: Sequence[np.ndarray],
    books: dict,
) -> tuple[np.ndarray, list[np.ndarray]]:
    """For the summary head: the ticket and sentence vectors of the tickets in `books` (index -> glossary),
    read through glosses in the ticket's language (the sentence chosen is still the ticket's own text)."""
    from inference.gloss import gloss

    sentence_vectors = list(sentence_vectors)
    if not books:
        return items, sentence_vectors
    batch: list[str] = []
    spans: list[tuple[int, int, int]] = []
    for k, book in books.items():
        start = len(batch)
        batch.append(gloss(texts[k], book=book) or texts[k])
        batch.extend(gloss(texts[k][a:b], book=book) or texts[k][a:b] for a, b in sentences[k])
        spans.append((k, start, len(batch)))
    out = encoder.encode(batch)
    items = np.array(items, copy=True)
    for k, start, end in spans:
        if not any(j in out.errors for j in range(start, end)):
            items[k] = out.embeddings[start]
            sentence_vectors[k] = out.embeddings[start + 1 : end]
    return items, sentence_vectors


def token_strings(encoder, texts: Sequence[str]) -> list[list[str]] | None:
    """The encoder's token strings per text (for the readability signal), when it can say."""
    fn = getattr(encoder, "token_strings", None)
    return fn(texts) if fn is not None else None


class _Loaded:
    needs_sentences = False

    def __init__(
        self,
        classifier: CategoryClassifier,
        encoder,
        flag_unreadable: bool,
        reads_glosses: bool = False,
        glossary_dir=None,
    ):
        self.classifier = classifier
        self.encoder = encoder
        self.flag_unreadable = flag_unreadable
        self.reads_glosses = reads_glosses
        self.glossary_dir = glossary_dir

    def __call__(self, chunk: EncodedChunk) -> HeadOutput:
        flags = None
        emb = chunk.embeddings
        if self.flag_unreadable:
            flags, books = chunk_reading(chunk, self.encoder, self.glossary_dir, self.reads_glosses)
            if books:
                from inference.gloss import gloss

                emb = reembed(self.encoder, emb, {k: gloss(chunk.texts[k], book=b) for k, b in books.items()})
        got = self.classifier(emb, flags)
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
        from inference.readability import VERSION

        out: dict = {
            "uncertain_below": settings.uncertain_below,
            "category_unreadable": VERSION if settings.flag_unreadable else "off",
        }
        out["category_gloss"] = _gloss_key(settings)
        out.update(head_source(settings))
        return out

    def build(self, settings, encoder) -> _Loaded:
        return _Loaded(
            classifier_for(settings, encoder),
            encoder,
            settings.flag_unreadable,
            settings.reads_glosses,
            settings.glossary_dir,
        )

    def checker(self, settings) -> Checker:
        return check_category(set(head_labels(settings)))


def head_source(settings) -> dict:
    """What the head's weights are computed from: a fitted file's fingerprint, or the default recipe's
    inputs (taxonomy, example files, recipe)."""
    if settings.category_head:
        return {"category_head": fitted_head(settings.category_head).fingerprint()}
    from inference.examples import BUNDLED_EXAMPLES
    from inference.taxonomy import load_taxonomy, taxonomy_fingerprint

    spec = settings.fewshot_file
    files = [str(p) for p in BUNDLED_EXAMPLES] if not spec else [p.strip() for p in spec.split(",") if p.strip()]
    return {
        "taxonomy": taxonomy_fingerprint(load_taxonomy(settings)),
        "fewshot": "none" if spec == "none" else [_file_digest(p) for p in files],
        "category_recipe": DEFAULT_RECIPE.key(),
        "training_gloss": _gloss_key(settings),
    }


def _gloss_key(settings) -> str:
    """The glossaries the head reads unreadable tickets through (training tickets too), or "off"."""
    if not settings.reads_glosses:
        return "off"
    from inference.gloss import glossary_digest

    return glossary_digest(extra_dir=settings.glossary_dir)


def head_labels(settings) -> list[str]:
    if settings.category_head:
        return fitted_head(settings.category_head).labels
    from inference.taxonomy import load_taxonomy

    return list(load_taxonomy(settings))


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


_FITTED_FILES: dict[tuple, LinearHead] = {}


def fitted_head(path: str) -> LinearHead:
    """A head file written by `fit-categories`, read once per (path, size, mtime)."""
    p = Path(path)
    try:
        st = p.stat()
    except FileNotFoundError:
        raise ConfigError(
            f"INFERENCE_CATEGORY_HEAD file {path} does not exist: write it with "
            "`python -m inference fit-categories --from FILE.jsonl --out PATH`"
        ) from None
    key = (str(p.resolve()), st.st_size, st.st_mtime_ns)
    if key not in _FITTED_FILES:
        _FITTED_FILES[key] = LinearHead.load(p)
    return _FITTED_FILES[key]


def model_signature(settings, encoder) -> dict:
    """The embeddings a head is fitted on: weights, pooling, max length, the encoder kind and dtype."""
    from inference.modelinfo import pooling_mode, weights_fingerprint

    return {
        "weights": weights_fingerprint(settings.model_dir, settings.cache_dir),
        "pooling": pooling_mode(settings.model_dir),
        "max_seq_length": settings.max_seq_length,
        "encoder": encoder.identity,
        "dim": int(encoder.dim),
    }


def check_compatible(head: LinearHead, signature: dict, path: str) -> None:
    """A fitted head only makes sense on embeddings of the model it was fitted on."""
    fitted_on = head.meta.get("model", {})
    if head.dim != signature["dim"] or fitted_on.get("weights") != signature["weights"]:
        raise ConfigError(
            f"INFERENCE_CATEGORY_HEAD {path} was fitted on embeddings of another model "
            f"({fitted_on.get('model_id', '?')}, weights {str(fitted_on.get('weights'))[:12]}, dim {head.dim}); "
            "fit it again for this INFERENCE_MODEL with `python -m inference fit-categories`"
        )
    if fitted_on.get("pooling") != signature["pooling"]:
        raise ConfigError(
            f"INFERENCE_CATEGORY_HEAD {path} was fitted with {fitted_on.get('pooling')} pooling, "
            f"the model now uses {signature['pooling']}: fit it again"
        )


# Fitted heads per encoder object and key: the summary head and the category head share one fit.
_SHARED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def linear_head_for(settings, encoder) -> LinearHead:
    """The configured head: the fitted file, or the default recipe fitted from the bundled files (cached)."""
    signature = model_signature(settings, encoder)
    if settings.category_head:
        head = fitted_head(settings.category_head)
        check_compatible(head, signature, settings.category_head)
        return head
    parts = {"source": head_source(settings), "input": INPUT_POLICY, **signature}
    key = hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:24]
    shared = _SHARED.setdefault(encoder, {})
    if key in shared:
        return shared[key]
    cache = Path(settings.cache_dir) / f"category-head-{key}.npz" if settings.cache_dir else None
    head = None
    if cache is not None and cache.is_file():
        try:
            head = LinearHead.load(cache)
        except ConfigError:
            head = None  # damaged or from another release: fit again
    if head is None:
        data = default_training(settings, encoder)
        head, _ = fit(data, DEFAULT_RECIPE, {"model": signature, "source": "bundled"})
        if cache is not None:
            try:
                head.save(cache)
            except OSError:
                log.warning("could not write the category head cache in %s", settings.cache_dir)
    shared[key] = head
    return head


def classifier_for(settings, encoder) -> CategoryClassifier:
    """The classifier as the pipeline builds it."""
    return CategoryClassifier(linear_head_for(settings, encoder), settings.uncertain_below)


@dataclass
class DefaultTexts:
    """What the default recipe is fitted on, before embedding."""

    labels: list[str]
    texts: list[str]  # the example files' tickets as the pipeline reads tickets (inference.mailtext.ticket_text)
    y: np.ndarray
    descriptions: list[str]
    dy: np.ndarray

    @property
    def digests(self) -> list[str]:
        return [text_digest(t) for t in self.texts]


def default_texts(settings, max_length: int) -> DefaultTexts:
    """The example files (INFERENCE_FEWSHOT) and the taxonomy's descriptions."""
    from inference.examples import load_example_files
    from inference.taxonomy import load_taxonomy

    taxonomy = load_taxonomy(settings)
    labels = list(taxonomy)
    index = {label: k for k, label in enumerate(labels)}
    examples = load_example_files(settings.fewshot_file, set(labels))
    return DefaultTexts(
        labels,
        [ticket_text_of(e, max_length) for e in examples],
        np.array([index[e.label] for e in examples], dtype=int),
        [t for label in labels for t in taxonomy[label]],
        np.array([index[label] for label in labels for _ in taxonomy[label]], dtype=int),
    )


def default_training(settings, encoder) -> TrainingData:
    """The default recipe's training data, embedded by `encoder`."""
    src = default_texts(settings, encoder.max_length)
    vectors = embed(encoder, texts_as_read(settings, encoder, src.texts) + src.descriptions)
    n = len(src.texts)
    return TrainingData(src.labels, vectors[:n], src.y, vectors[n:], src.dy, src.digests)


def texts_as_read(settings, encoder, texts: Sequence[str]) -> list[str]:
    """Training tickets as the head reads tickets: a gloss for those flagged unreadable (inference.gloss)."""
    if not settings.reads_glosses:
        return list(texts)
    from inference.gloss import gloss

    _, books = gloss_languages(encoder, texts, settings.glossary_dir)
    return [gloss(t, book=books[k]) if k in books else t for k, t in enumerate(texts)]


def ticket_text_of(example, max_length: int) -> str:
    """A labelled ticket as the pipeline reads a ticket (input policy, mail tail cut off)."""
    from inference.mailtext import ticket_text
    from inference.textprep import max_chars_for

    text, _ = ticket_text(example.subject, example.body, max_chars_for(max_length))
    return text or example.text


def embed(encoder, texts: Sequence[str]) -> np.ndarray:
    if not texts:
        return np.zeros((0, encoder.dim), dtype=np.float32)
    out = encoder.encode(list(texts))
    if out.errors:
        raise RuntimeError(f"could not embed {len(out.errors)} of the category head's training texts")
    return out.embeddings


def _file_digest(path: str) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest() if Path(path).is_file() else "missing"


HEAD = CategoryHead()
