"""Labelled tickets in JSON Lines: few-shot examples, the development set and the evaluation set.

One object per line: {"id": ..., "subject": ..., "body": ..., "label": ..., "lang": ...} (`lang` optional).
The default category head is fitted on the example files at task start (INFERENCE_FEWSHOT: the bundled
few-shot examples and development set unless set); the evaluation set stays held out. A help desk with
its own labelled history fits a head on it instead: `python -m inference fit-categories`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from inference.config import ConfigError

DATA_DIR = Path(__file__).resolve().parent / "data"
FEWSHOT = DATA_DIR / "fewshot_examples.jsonl"
DEV_SET = DATA_DIR / "dev_tickets.jsonl"
EVAL_SET = DATA_DIR / "eval_tickets.jsonl"


@dataclass(frozen=True)
class Example:
    id: str
    subject: str | None
    body: str | None
    label: str
    lang: str | None = None

    @property
    def text(self) -> str:
        return "\n".join(p.strip() for p in (self.subject, self.body) if p and p.strip())


BUNDLED_EXAMPLES = (FEWSHOT, DEV_SET)  # the default category head's training data; EVAL_SET stays held out


def load_example_files(spec: str | None, labels: set[str]) -> list[Example]:
    """INFERENCE_FEWSHOT: unset = the bundled files, "none" = no examples (the taxonomy descriptions
    only), else comma-separated JSON Lines files."""
    if spec == "none":
        return []
    paths = BUNDLED_EXAMPLES if not spec else [p.strip() for p in spec.split(",") if p.strip()]
    return [e for p in paths for e in load_examples(p, labels)]


def load_examples(path: str | Path, labels: set[str] | None = None) -> list[Example]:
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"labelled tickets file {path} does not exist")
    out = []
    for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
            lang = item.get("lang")
            example = Example(
                str(item["id"]), item.get("subject"), item.get("body"), str(item["label"]), str(lang) if lang else None
            )
        except (json.JSONDecodeError, KeyError, TypeError):
            raise ConfigError(f"{path}:{lineno}: expected a JSON object with id, subject, body and label") from None
        if labels is not None and example.label not in labels:
            raise ConfigError(f"{path}:{lineno}: label {example.label!r} is not in the taxonomy")
        if not example.text:
            raise ConfigError(f"{path}:{lineno}: example {example.id} has no text")
        out.append(example)
    return out
