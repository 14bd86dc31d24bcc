"""The extractive summary carries the request (inference/heads/summary.py `request_choice`): never a greeting,
thanks or a quoted line; a leading greeting is cut off; always verbatim text of the ticket."""

from __future__ import annotations

import numpy as np

from inference.heads.summary import request_choice
from inference.textprep import sentence_spans


def test_the_request_summary_is_the_request_not_the_greeting_nor_the_quote():
    text = "Hello support team,\nI hope you are well.\nMy parcel never arrived and tracking shows nothing.\n> On your side: refund sent."
    spans = sentence_spans(text)
    rng = np.random.default_rng(0)
    vectors = rng.standard_normal((len(spans), 8))
    # a label scorer that likes the third sentence's direction
    target = vectors[2] / np.linalg.norm(vectors[2])
    scores = lambda v: np.stack([v @ target, -(v @ target)], axis=1)  # noqa: E731
    ranges = request_choice(text, spans, vectors, target, scores)
    assert [text[a:b] for a, b in ranges] == ["My parcel never arrived and tracking shows nothing."]


def test_a_leading_greeting_is_cut_off_the_chosen_sentence():
    text = "Hi, my invoice shows the wrong VAT number and needs fixing"
    spans = sentence_spans(text)
    vectors = np.ones((1, 4)) / 2
    ranges = request_choice(text, spans, vectors, vectors[0], lambda v: np.zeros((len(v), 2)))
    assert [text[a:b] for a, b in ranges] == ["my invoice shows the wrong VAT number and needs fixing"]
