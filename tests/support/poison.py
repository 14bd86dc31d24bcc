"""The poison item: a ticket word that is exactly one MiniLM WordPiece token, so a fault switched on by its
token id (a forward pass that dies, a process SIGKILLed) hits exactly the batches that hold that ticket."""

from __future__ import annotations

POISON = "zebra"


def poison_token_id(encoder) -> int:
    """The token id of POISON in this encoder's vocabulary (asserting it is a single token)."""
    ids = encoder.tokenize([POISON])[0][0]
    assert len(ids) == 3, "the poison word must be one token ([CLS] token [SEP])"
    return ids[1]
