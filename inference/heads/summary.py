"""The summary head: the sentence that carries the ticket's request (extractive, from the same encoder pass),
or a one-sentence abstractive summary from a local seq2seq / causal LM (INFERENCE_SUMMARY=abstractive).

Extractive (default), `request_summary`: among the customer's own sentences (the predictor has already cut
the quoted reply, forwarded message, signature and disclaimer off the model input; ">"-quoted lines,
greetings, thanks, sign-offs, politeness and pasted log lines are skipped too: inference.mailtext), the one
that best predicts the ticket's category (log-probability under the category head of the label the head
gives the whole ticket) plus 0.5 x its cosine to the centroid of those sentences; a second one when the first
is short. A leading greeting is cut off. Always verbatim text of the ticket. A ticket the English-only model
cannot read is scored through glosses of its sentences (inference.gloss), as the category head reads it. Measured in
benchmarks/summary_quality.py (BENCHMARKS.md, Summaries).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import sqlalchemy as sa

from inference.heads import summary_batch
from inference.heads.base import Checker, EncodedChunk, Head, HeadOutput, OutputColumn
from inference.records import FailureKind

MAX_SUMMARY_CHARS = 2000
METHOD = "request-1"  # the extractive method's version: part of the model version


def centroid_choice(
    sentences: Sequence[tuple[int, int]],
    sentence_vectors: np.ndarray,
    item_vector: np.ndarray,
    max_sentences: int = 2,
    max_chars: int = 600,
) -> list[tuple[int, int]]:
    """The sentences (one, or two when there are more than two) closest to the ticket's own embedding, in
    their original order; longer than `max_chars` only when nothing shorter exists (the fallback when no
    sentence carries a request)."""
    if not sentences:
        return []
    closeness = sentence_vectors @ item_vector
    order = [int(i) for i in np.argsort(-closeness, kind="stable")]
    short = [i for i in order if sentences[i][1] - sentences[i][0] <= max_chars] or order
    k = 1 if len(sentences) <= 2 else max_sentences
    return [sentences[i] for i in sorted(short[:k])]


def request_choice(
    text: str,
    sentences: Sequence[tuple[int, int]],
    sentence_vectors: np.ndarray,
    item_vector: np.ndarray,
    label_scores: Callable[[np.ndarray], np.ndarray],
    max_chars: int = 600,
    short: int = 60,
) -> list[tuple[int, int]]:
    """The character ranges of the summary (see the module docstring). `label_scores(vectors)` -> logits
    [n, labels] of the category head. Falls back to `centroid_choice` over the customer's own sentences
    when none qualifies (a ticket that is only a greeting)."""
    from inference.category_fit import log_softmax, unit
    from inference.mailtext import candidate_sentences, quoted_lines, split_tail, strip_greeting

    if not sentences:
        return []
    cands = candidate_sentences(text, sentences)
    cands = [i for i in cands if sentences[i][1] - sentences[i][0] <= max_chars] or cands
    if not cands:
        end = split_tail(text)
        own = [i for i, (a, _) in enumerate(sentences) if a < end] or list(range(len(sentences)))
        return centroid_choice([sentences[i] for i in own], sentence_vectors[own], item_vector)
    vecs = np.asarray(sentence_vectors[cands], dtype=np.float64)
    centroid = unit(vecs.mean(axis=0))
    # the label of the customer's own words: the whole ticket's, unless it still carries quoted lines
    has_tail = split_tail(text) < len(text.rstrip()) or bool(quoted_lines(text))
    label = int(np.argmax(label_scores((centroid if has_tail else item_vector)[None, :])[0]))
    score = log_softmax(label_scores(vecs))[:, label] + 0.5 * (vecs @ centroid)
    order = [cands[int(j)] for j in np.argsort(-score, kind="stable")]
    chosen = order[:1]
    a, b = sentences[chosen[0]]
    if b - a < short and len(order) > 2:
        chosen.append(order[1])
    return [(strip_greeting(text, *sentences[i]), sentences[i][1]) for i in sorted(chosen)]


def request_summary(
    text: str,
    sentences: Sequence[tuple[int, int]],
    sentence_vectors: np.ndarray,
    item_vector: np.ndarray,
    label_scores: Callable[[np.ndarray], np.ndarray],
) -> str | None:
    """`request_choice` as text: verbatim pieces of the ticket, joined by a space."""
    ranges = request_choice(text, sentences, sentence_vectors, item_vector, label_scores)
    return " ".join(text[a:b] for a, b in ranges) if ranges else None


def extractive_summary(
    text: str,
    sentences: Sequence[tuple[int, int]],
    sentence_vectors: np.ndarray,
    item_vector: np.ndarray,
    max_sentences: int = 2,
    max_chars: int = 600,
) -> str | None:
    """The previous default (centroid-closest sentences), kept for comparison in benchmarks."""
    ranges = centroid_choice(sentences, sentence_vectors, item_vector, max_sentences, max_chars)
    return " ".join(text[a:b] for a, b in ranges) if ranges else None


class _Extractive:
    needs_sentences = True

    def __init__(
        self,
        label_scores: Callable[[np.ndarray], np.ndarray],
        encoder=None,
        reads_glosses=False,
        glossary_dir: str | None = None,
    ):
        """`reads_glosses`: rank the sentences of tickets the English-only model cannot read by their
        glosses, as the category head reads those tickets (inference.gloss)."""
        self.label_scores = label_scores
        self.encoder = encoder
        self.reads_glosses = reads_glosses and encoder is not None
        self.glossary_dir = glossary_dir

    def __call__(self, chunk: EncodedChunk) -> HeadOutput:
        assert chunk.sentences is not None and chunk.sentence_vectors is not None
        items, sentence_vectors = chunk.embeddings, chunk.sentence_vectors
        if self.reads_glosses:
            from inference.heads.category import chunk_reading, gloss_sentence_vectors

            _, books = chunk_reading(chunk, self.encoder, self.glossary_dir)
            items, sentence_vectors = gloss_sentence_vectors(
                self.encoder, chunk.texts, chunk.sentences, items, sentence_vectors, books
            )
        return HeadOutput(
            [
                {"summary": request_summary(text, sentences, vectors, vector, self.label_scores)}
                for text, sentences, vectors, vector in zip(
                    chunk.texts, chunk.sentences, sentence_vectors, items, strict=True
                )
            ]
        )


class _Abstractive:
    needs_sentences = False

    def __init__(self, summarizer):
        self.summarizer = summarizer

    def __call__(self, chunk: EncodedChunk) -> HeadOutput:
        summaries = self.summarizer(chunk.texts)
        errors = {k: FailureKind.MODEL_ERROR for k, s in enumerate(summaries) if s is None}
        return HeadOutput([{"summary": s} for s in summaries], errors)


class SummaryHead(Head):
    name = "summary"
    order = 30
    columns = (OutputColumn("summary", sa.Text()),)

    def fingerprint(self, settings) -> dict:
        if settings.summary == summary_batch.BATCH_API:
            return summary_batch.fingerprint(settings)
        out: dict = {"summary": settings.summary}
        if settings.summary == "extractive":
            from inference.heads.category import INPUT_POLICY, head_source

            # the sentence is chosen by the category head's scores: its weights are part of this output
            out["summary_method"] = METHOD
            out["summary_category_head"] = {**head_source(settings), "input": INPUT_POLICY}
        if settings.summary == "abstractive":
            from inference.modelinfo import weights_fingerprint

            out["summary_model"] = weights_fingerprint(settings.summary_model, settings.cache_dir)
            out["summary_max_tokens"] = settings.summary_max_tokens
        return out

    def build(self, settings, encoder):
        if settings.summary == summary_batch.BATCH_API:
            return summary_batch.Deferred()  # filled in by the Batch API step
        if settings.summary != "abstractive":
            from inference.heads.category import linear_head_for

            return _Extractive(
                linear_head_for(settings, encoder).logits,
                encoder,
                settings.reads_glosses,
                settings.glossary_dir,
            )
        from inference.engine.generate import Summarizer

        return _Abstractive(Summarizer(settings.summary_model, settings.device, settings.summary_max_tokens))

    def checker(self, settings) -> Checker:
        def check(row) -> str | None:
            summary = row.get("summary")
            if not isinstance(summary, str) or not summary.strip():
                return "summary is empty"
            if len(summary) > MAX_SUMMARY_CHARS:
                return "summary is too long"
            return None

        return check


HEAD = SummaryHead()
