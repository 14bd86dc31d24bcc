"""A spy on what reaches the model: every text handed to the Encoder's tokenizing methods."""

from __future__ import annotations

import functools
import threading

from inference.engine.encoder import Encoder


class EncodeSpy:
    """Every text handed to the Encoder's tokenizing methods (tokenize, tokenize_with_offsets, ...), in call
    order: text reaches the model only through them (encode tokenizes too, and infer_shard tokenizes ahead
    of the model on its prefetch thread). A tokenizing method calling another is recorded once."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []
        self.local = threading.local()

    @property
    def texts(self) -> list[str]:
        return [t for call in self.calls for t in call]

    def wrap(self, real):
        @functools.wraps(real)
        def tokenizing(encoder, texts, *args, **kwargs):
            outermost = not getattr(self.local, "inside", False)
            if outermost:
                self.calls.append(list(texts))
            self.local.inside = True
            try:
                return real(encoder, texts, *args, **kwargs)
            finally:
                self.local.inside = not outermost

        return tokenizing


def spy_on_encoder(monkeypatch) -> EncodeSpy:
    """Wraps every tokenizing method of Encoder for the rest of the test (undone by monkeypatch)."""
    spy = EncodeSpy()
    names = [name for name in vars(Encoder) if name.startswith("tokenize") and callable(vars(Encoder)[name])]
    assert "tokenize" in names
    for name in names:
        monkeypatch.setattr(Encoder, name, spy.wrap(vars(Encoder)[name]))
    return spy
