"""What plan needs of a source row, computed by PostgreSQL itself (inference/store/source.py, "Hashes in the
database"): the content hash, the characters, whether the text is surely visible, the version instant.

Each expression gives exactly what Python gives for the same row (tests/integration/test_source_hashes.py):
- content hash: sha256 of `json_build_array(subject, body)` in UTF-8, the bytes `textprep.content_hash` hashes
  (JSON escapes only quotes, backslashes and control characters in both; PostgreSQL text holds no NUL and no
  lone surrogates). Only for text and varchar columns (and domains over them) in a UTF-8 database, server 11
  or later: char(n) keeps its padding in JSON but not in length(), other encodings are converted.
- surely visible: an ASCII letter or digit in subject or body. Other rows need the input policy's full
  definition of "visible", which only Python has, so their text comes along.
- version: microseconds since the epoch of updated_at, else created_at, exact on every server version.
"""

from __future__ import annotations

import sqlalchemy as sa

HASHED_TYPES = {"text", "varchar"}  # base types whose JSON form is the value Python reads
_ALNUM = "[0-9A-Za-z]"
_CAN_HASH = sa.text(
    "SELECT current_setting('server_encoding') = 'UTF8' AND current_setting('server_version_num')::int >= 110000"
)


def can_hash(conn: sa.Connection) -> bool:
    """Whether this server computes the hashes: UTF-8, sha256() (PostgreSQL 11)."""
    return bool(conn.scalar(_CAN_HASH))


def surely_visible(subject: sa.ColumnElement, body: sa.ColumnElement) -> sa.ColumnElement[bool]:
    """Never NULL."""
    return sa.func.coalesce(sa.or_(*[sa.collate(c, "C").op("~")(sa.literal(_ALNUM)) for c in (subject, body)]), False)


def digest(subject: sa.ColumnElement, body: sa.ColumnElement) -> sa.ColumnElement[str]:
    document = sa.cast(sa.func.json_build_array(subject, body), sa.Text)
    return sa.func.encode(sa.func.sha256(sa.func.convert_to(document, sa.literal("UTF8"))), sa.literal("hex"))


def chars(subject: sa.ColumnElement, body: sa.ColumnElement) -> sa.ColumnElement[int]:
    return sa.func.coalesce(sa.func.char_length(subject), 0) + sa.func.coalesce(sa.func.char_length(body), 0)


def micros(at: sa.ColumnElement) -> sa.ColumnElement[int]:
    """A timestamp with time zone as microseconds since the epoch: whole seconds plus the fraction, so that
    servers whose EXTRACT returns a double (before 14) are exact too."""
    seconds = sa.cast(sa.extract("epoch", sa.func.date_trunc("second", at)), sa.BigInteger)
    fraction = sa.cast(sa.extract("microseconds", at), sa.BigInteger) % 1_000_000
    return seconds * 1_000_000 + fraction


def version_micros(created: sa.ColumnElement, updated: sa.ColumnElement) -> sa.ColumnElement[int]:
    """updated_at, or created_at where it is NULL (0 where both are: no such row is in a window)."""
    return sa.case((updated.is_not(None), micros(updated)), (created.is_not(None), micros(created)), else_=0)


def finite(at: sa.ColumnElement) -> sa.ColumnElement[bool]:
    """Not +-infinity (NULL counts as finite); never NULL."""
    return sa.func.coalesce(sa.func.isfinite(at), True)
