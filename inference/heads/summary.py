"""The summary head: the ticket's own most central sentences (extractive, from the same encoder pass),
or a one-sentence abstractive summary from a local seq2seq / causal LM (INFERENCE_SUMMARY=abstractive)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import sqlalchemy as sa

from inference.heads import summary_batch
from inference.heads.base import Checker, EncodedChunk, Head, HeadOutput, OutputColumn
from inference.records import FailureKind

MAX_SUMMARY_CHARS = 2000


def extractive_summary(
    text: str,
    sentences: Sequence[tuple[int, int]],
    sentence_vectors: np.ndarray,
    item_vector: np.ndarray,
    max_sentences: int = 2,
    max_chars: int = 600,
) -> str | None:
    """The sentences (one, or two when there are more than two) closest to the ticket's own embedding,
    in their original order; sentences longer than `max_chars` only when nothing shorter exists.
    Always verbatim sentences of `text`."""
    if not sentences:
        return None
    closeness = sentence_vectors @ item_vector
    order = [int(i) for i in np.argsort(-closeness, kind="stable")]
    short = [i for i in order if sentences[i][1] - sentences[i][0] <= max_chars] or order
    k = 1 if len(sentences) <= 2 else max_sentences
    chosen = sorted(short[:k])
    return " ".join(text[sentences[i][0] : sentences[i][1]] for i in chosen)


class _Extractive:
    needs_sentences = True

    def __call__(self, chunk: EncodedChunk) -> HeadOutput:
        assert chunk.sentences is not None and chunk.sentence_vectors is not None
        return HeadOutput(
            [
                {"summary": extractive_summary(text, sentences, vectors, vector)}
                for text, sentences, vectors, vector in zip(
                    chunk.texts, chunk.sentences, chunk.sentence_vectors, chunk.embeddings, strict=True
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
        if settings.summary == "abstractive":
            from inference.modelinfo import weights_fingerprint

            out["summary_model"] = weights_fingerprint(settings.summary_model)
            out["summary_max_tokens"] = settings.summary_max_tokens
        return out

    def build(self, settings, encoder):
        if settings.summary == summary_batch.BATCH_API:
            return summary_batch.Deferred()  # filled in by the Batch API step
        if settings.summary != "abstractive":
            return _Extractive()
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
