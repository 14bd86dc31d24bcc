"""A toy head, kept outside inference/heads/: the length of the model input, in characters.

It shows that an output is one module: loaded through INFERENCE_HEAD_MODULES, its column lands in the
tables, its fingerprint in the model version, its check in load_results.
"""

from __future__ import annotations

import sqlalchemy as sa

from inference.heads import EncodedChunk, Head, HeadOutput, OutputColumn


class _Loaded:
    needs_sentences = False

    def __call__(self, chunk: EncodedChunk) -> HeadOutput:
        return HeadOutput([{"text_chars": len(text)} for text in chunk.texts])


class TextLengthHead(Head):
    name = "text_length"
    columns = (OutputColumn("text_chars", sa.Integer()),)

    def fingerprint(self, settings) -> dict:
        return {"text_length": 1}

    def build(self, settings, encoder) -> _Loaded:
        return _Loaded()

    def checker(self, settings):
        def check(row) -> str | None:
            value = row.get("text_chars")
            return None if isinstance(value, int) and value > 0 else "text length is not positive"

        return check


HEAD = TextLengthHead()
