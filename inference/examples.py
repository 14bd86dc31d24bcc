"""Labelled tickets: few-shot examples, the development set and the evaluation set, and sets of your own.

One object per line: {"id": ..., "subject": ..., "body": ..., "label": ..., "lang": ...} (`lang` optional),
or a CSV/TSV file with those columns and a header row (`python -m inference eval --set FILE.csv`).
The default category head is fitted on the example files at task start (INFERENCE_FEWSHOT: the bundled
few-shot examples and development set unless set); the evaluation set stays held out. A help desk with
its own labelled history fits a head on it instead: `python -m inference fit-categories`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from inference.config import ConfigError
from inference.label_map import shown_label
from inference.labelled_files import Columns, as_text, missing_field, records, require

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
    group: str | None = None  # the --group-column value (`eval` breaks accuracy down by it)

    @property
    def text(self) -> str:
        return "\n".join(p.strip() for p in (self.subject, self.body) if p and p.strip())


BUNDLED_EXAMPLES = (FEWSHOT, DEV_SET)  # the default category head's training data; EVAL_SET stays held out


def load_example_files(spec: str | None, labels: set[str]) -> list[Example]:
    """INFERENCE_FEWSHOT: unset = the bundled files, "none" = no examples (the taxonomy descriptions
    only), else comma-separated files (JSON Lines, or CSV/TSV with a header)."""
    if spec == "none":
        return []
    paths = BUNDLED_EXAMPLES if not spec else [p.strip() for p in spec.split(",") if p.strip()]
    return [e for p in paths for e in load_examples(p, labels)]


def load_examples(path: str | Path, labels: set[str] | None = None, columns: Columns | None = None) -> list[Example]:
    """Labelled tickets of a JSON Lines file, or of a CSV/TSV file with a header (inference.labelled_files): id
    (optional: the line number), subject (optional), body, label and lang or language (optional); `columns`
    names the label, body, subject and language fields where they are named otherwise."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"labelled tickets file {path} does not exist")
    columns = columns or Columns()
    label_key, body_key, subject = columns.resolve(path)
    if columns.group:
        require(path, {"--group-column": columns.group})
    if columns.lang:
        require(path, {"--lang-column": columns.lang})
    out = []
    for lineno, item in records(path, "labelled tickets file"):
        label, lang, ticket_id = item.get(label_key), _lang(item, columns.lang), item.get("id")
        if label in (None, "") or isinstance(label, (dict, list)):
            raise ConfigError(f"{path}:{lineno}: {_no_label(item, label_key)}")
        example = Example(
            str(ticket_id) if ticket_id not in (None, "") else f"line-{lineno}",
            as_text(item.get(subject)) if subject else None,
            as_text(item.get(body_key)),
            str(label),
            str(lang) if lang else None,
            _group(item.get(columns.group)) if columns.group else None,
        )
        if labels is not None and example.label not in labels:
            raise ConfigError(f"{path}:{lineno}: label {shown_label(example.label)!r} is not in the taxonomy")
        if not example.text:
            if body_key not in item and not (subject and item.get(subject)):
                raise ConfigError(f"{path}:{lineno}: {missing_field(item, body_key, 'body')}")
            raise ConfigError(f"{path}:{lineno}: example {example.id} has no text")
        out.append(example)
    return out


def _lang(item: dict, column: str | None):
    """The ticket's language: the named column, else a `lang` field, else a `language` one (as exports name it)."""
    if column:
        return item.get(column)
    return item.get("lang") if "lang" in item else item.get("language")


def _no_label(item: dict, label_key: str) -> str:
    if label_key in item:
        return f"the {label_key!r} field is empty or not a single value"
    return missing_field(item, label_key, "label")


def _group(value) -> str:
    """A group value as text; a missing or empty one is its own group."""
    text = as_text(value)
    return text if text and text.strip() else "(none)"
