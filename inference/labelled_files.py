"""Labelled tickets from a file: JSON Lines, or CSV/TSV as help desks and spreadsheets export them.

Used by `fit-categories --from FILE` and `eval --set FILE`. A file whose name ends in .csv or .tsv is read as
delimited text: a header row naming the columns, UTF-8 (with or without the byte-order mark Excel writes),
fields quoted as RFC 4180 has them (a quoted field may span lines), the delimiter a comma, a semicolon (the
export of a spreadsheet in a locale whose decimal mark is a comma) or a tab, told from the header line. Any
other file is JSON Lines (one object per line) or one JSON array of objects, as many exports write it. Either
way each record is a mapping of column (or key) names to values; errors name the file, the line and the
column, never a value (ticket text is personal data).
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from inference.errors import ConfigError

DELIMITED = {".csv": ",", ".tsv": "\t"}
DELIMITERS = ",;\t"
MAX_FIELD_CHARS = 64 * 2**20  # one ticket's text; the csv module's own limit (128 KiB) is below big e-mails


def is_delimited(path: Path) -> bool:
    return path.suffix.lower() in DELIMITED


def records(path: Path, flag: str) -> Iterator[tuple[int, dict]]:
    """(line number, record) for each record of the file; `flag` names the option that gave the file."""
    if not path.is_file():
        raise ConfigError(f"{flag} {path}: no such file")
    try:
        yield from (_delimited(path) if is_delimited(path) else _json_lines(path))
    except UnicodeDecodeError as exc:
        raise _not_utf8(path, exc) from None


def _not_utf8(path: Path, exc: UnicodeDecodeError) -> ConfigError:
    return ConfigError(f"{path}: not UTF-8 text (byte {exc.start} of a line): export or save it as UTF-8")


def columns(path: Path) -> list[str] | None:
    """The header of a CSV/TSV file (None for JSON Lines, whose keys vary by line)."""
    if not is_delimited(path):
        return None
    try:
        with path.open(encoding="utf-8-sig", newline="") as fh:
            delimiter = _delimiter(path, fh.readline())
            fh.seek(0)
            return next(csv.reader(fh, delimiter=delimiter), [])
    except UnicodeDecodeError as exc:
        raise _not_utf8(path, exc) from None


@dataclass(frozen=True)
class Columns:
    """Where a labelled file keeps each field (JSON keys or CSV columns); subject None: the file has none."""

    label: str = "label"
    body: str = "body"
    subject: str | None = "subject"
    subject_named: bool = False  # named by the user: a CSV file must have it (else a missing one means none)
    group: str | None = None  # `eval --group-column`: a field to break accuracy down by (a queue, an intent)
    lang: str | None = None  # `eval --lang-column`: the ticket's language (None: a "lang", else a "language" field)

    @classmethod
    def from_flags(
        cls, label: str, body: str, subject: str | None, group: str | None = None, lang: str | None = None
    ) -> Columns:
        """From --label-column, --body-column, --subject-column (None: unset; `none` or the body's own
        column: no subject), --group-column and --lang-column."""
        from inference.config import subject_column

        named = subject is not None
        return cls(
            label=label,
            body=body,
            subject=subject_column(subject or "subject", body),
            subject_named=named,
            group=group,
            lang=lang,
        )

    def resolve(self, path: Path) -> tuple[str, str, str | None]:
        """(label, body, subject) keys to read from the file: a CSV/TSV file without the default subject column
        has no subject; a column it must have and lacks is refused (`require`)."""
        header = columns(path) if path.is_file() else None
        subject = self.subject
        if header is not None and not self.subject_named and subject not in header:
            subject = None
        require(path, {"--label-column": self.label, "--body-column": self.body, "--subject-column": subject})
        return self.label, self.body, subject


def as_text(value) -> str | None:
    """A field's value as text (CSV fields are text already; JSON may hold numbers)."""
    return None if value is None else str(value)


MAX_SHARED_VALUES = 500


def looks_per_ticket(values: list) -> bool:
    """A column of labels, queues or intents has a few values shared by many tickets; one with a value per ticket
    (ticket text or ids, named by mistake) must be refused by counts only, never by showing its values."""
    distinct = len(set(values))
    return distinct > MAX_SHARED_VALUES or (distinct > 20 and distinct > len(values) // 2)


def missing_field(item: dict, key: str, what: str, every: bool = False) -> str:
    """A record (`every`: every record; `item` is the first) lacks a field: names the record's keys when they
    look like field names (never a value)."""
    keys = [str(k) for k in item]
    whose = "the first one's" if every else "its"
    named = (
        f"; {whose} fields: {', '.join(keys)}"
        if keys and len(keys) <= 20 and all(len(k) <= 40 and "\n" not in k for k in keys)
        else f" ({whose} {len(keys)} fields are not shown)"
    )
    lacks = f"none of its records has a {key!r} field" if every else f"no {key!r} field"
    return f"{lacks} (name the {what}'s field with --{what}-column){named}"


def require(path: Path, wanted: dict[str, str | None]) -> None:
    """A CSV/TSV file must have each wanted column ({option: column}); JSON Lines are checked per line."""
    header = columns(path)
    if header is None:
        return
    missing = [f"{option} {name!r}" for option, name in wanted.items() if name is not None and name not in header]
    if missing:  # the header is not shown: a file without one would show a ticket's text
        raise ConfigError(
            f"{path}: no column for {', '.join(missing)} among the {len(header)} of its first line (a header row "
            "naming the columns is required; name yours with the options)"
        )


def _delimiter(path: Path, header_line: str) -> str:
    if path.suffix.lower() == ".tsv":
        return "\t"
    counts = {d: header_line.count(d) for d in DELIMITERS}
    best = max(counts, key=lambda d: counts[d])
    return best if counts[best] else DELIMITED[".csv"]


def _delimited(path: Path) -> Iterator[tuple[int, dict]]:
    if csv.field_size_limit() < MAX_FIELD_CHARS:
        csv.field_size_limit(MAX_FIELD_CHARS)
    with path.open(encoding="utf-8-sig", newline="") as fh:
        delimiter = _delimiter(path, fh.readline())
        fh.seek(0)
        reader = csv.DictReader(fh, delimiter=delimiter, strict=True)
        try:
            for row in reader:
                if None in row:  # more fields than the header names
                    raise ConfigError(f"{path}:{reader.line_num}: more fields than the header has columns")
                if any(v not in (None, "") for v in row.values()):
                    yield reader.line_num, row
        except csv.Error as exc:
            raise ConfigError(f"{path}:{reader.line_num}: not valid CSV ({_csv_reason(exc)})") from None


def _csv_reason(exc: csv.Error) -> str:
    """The csv module's reason without any quoted field content."""
    text = str(exc)
    return text.split(":", 1)[0] if "'" in text or '"' in text else text


def _json_lines(path: Path) -> Iterator[tuple[int, dict]]:
    with path.open(encoding="utf-8-sig") as fh:
        head = fh.read(4096).lstrip()
        fh.seek(0)
        if head.startswith("["):
            yield from _json_array(path, fh.read())
            return
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                item = json.loads(line)
            except json.JSONDecodeError:
                raise ConfigError(f"{path}:{lineno}: not a JSON object") from None
            if not isinstance(item, dict):
                raise ConfigError(f"{path}:{lineno}: not a JSON object")
            yield lineno, item


def _json_array(path: Path, text: str) -> Iterator[tuple[int, dict]]:
    """A JSON file holding one array of objects (as many exports write it), read one object at a time; the
    number given with each is its line in the file (counted as the reading goes, so a large export is read in
    one pass)."""
    decoder = json.JSONDecoder()
    lines = _LineCounter(text)
    at = text.index("[") + 1
    while True:
        at = _skip(text, at)
        if at < len(text) and text[at] == "]":
            if _skip(text, at + 1) < len(text):
                raise ConfigError(f"{path}:{lines.at(at)}: text after the array's end")
            return
        lineno = lines.at(at)
        try:
            item, at = decoder.raw_decode(text, at)
        except json.JSONDecodeError:
            raise ConfigError(f"{path}:{lineno}: not a JSON object (an array of objects is read one by one)") from None
        if not isinstance(item, dict):
            raise ConfigError(f"{path}:{lineno}: not a JSON object (an array of objects is read one by one)")
        yield lineno, item
        at = _skip(text, at)
        if at < len(text) and text[at] == ",":
            at += 1
        elif at >= len(text) or text[at] != "]":
            raise ConfigError(f"{path}:{lines.at(at)}: not valid JSON (a ',' or ']' expected)")


class _LineCounter:
    """The line of a position in `text`, for positions asked in increasing order: counts only the new part."""

    def __init__(self, text: str):
        self.text, self.pos, self.line = text, 0, 1

    def at(self, pos: int) -> int:
        self.line += self.text.count("\n", self.pos, pos)
        self.pos = pos
        return self.line


def _skip(text: str, at: int) -> int:
    while at < len(text) and text[at] in " \t\r\n":
        at += 1
    return at
