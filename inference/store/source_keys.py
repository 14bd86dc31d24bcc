"""Ticket IDs as keys: the text form our tables store, the SQLite values a key stands for, and what makes an
ID unstorable (see inference.store.source for how keys are read and looked up)."""

from __future__ import annotations

import hashlib
import math
import re
from typing import Any

import sqlalchemy as sa

MAX_ID_BYTES = 512  # the width of ticket_id in our tables (revision 0005)
UNSUPPORTED_PREFIX = "!unsupported-id:"

_INT_TEXT = re.compile(r"-?(0|[1-9][0-9]*)")
_BLOB_TEXT = re.compile(r"X'((?:[0-9A-F]{2})*)'")


def sqlite_key(value: Any) -> str | None:
    """The key of a value SQLite returned (None for NULL and values no key can stand for)."""
    if value is None or isinstance(value, bool):
        return None if value is None else str(int(value))
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            return None
        if value.is_integer() and abs(value) < 2**63:
            return str(int(value))
        return repr(value)
    if isinstance(value, bytes | bytearray | memoryview):
        return "X'" + bytes(value).hex().upper() + "'"
    return str(value)


def sqlite_values(key: str) -> list[Any]:
    """Every SQLite value whose key is `key` (the text, and the number or blob it may also be)."""
    values: list[Any] = [key]
    if _INT_TEXT.fullmatch(key) and -(2**63) <= int(key) < 2**63:
        values.append(int(key))
    else:
        try:
            number = float(key)
        except ValueError:
            number = None
        if number is not None and math.isfinite(number) and repr(number) == key:
            values.append(number)
    blob = _BLOB_TEXT.fullmatch(key)
    if blob:
        values.append(bytes.fromhex(blob.group(1)))
    return values


def id_problem(key: str | None) -> str | None:
    """Why a key cannot be stored in our tables, or None."""
    if key is None:
        return "null"
    try:
        size = len(key.encode("utf-8"))
    except UnicodeEncodeError:
        return "not UTF-8"
    if size > MAX_ID_BYTES:
        return f"longer than {MAX_ID_BYTES} bytes"
    if "\x00" in key:
        return "contains NUL"
    return None


def surrogate_key(problem: str, raw: Any, digest: str) -> str:
    """A stable stand-in key for a row whose ID cannot be a key (never a real ID's key: see UNSUPPORTED_PREFIX)."""
    seed = digest if raw is None else repr(raw)
    kind = problem.split()[0].lower().replace("-", "")
    return f"{UNSUPPORTED_PREFIX}{kind}:{hashlib.sha256(seed.encode('utf-8', 'surrogatepass')).hexdigest()[:40]}"


def sort_key(value: Any) -> tuple:
    """SQLite's order across storage classes: numbers, then text, then blobs (one type per column elsewhere)."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return (0, value, "")
    if isinstance(value, str):
        return (1, 0, value)
    if isinstance(value, bytes | bytearray | memoryview):
        return (2, 0, bytes(value).hex())
    return (1, 0, str(value))


class PgType(sa.types.UserDefinedType):
    """A PostgreSQL type by name, for CAST(:keys AS <name>[])."""

    cache_ok = True

    def __init__(self, name: str):
        self.name = name

    def get_col_spec(self, **_kw) -> str:
        return self.name
