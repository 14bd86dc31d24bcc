"""Checks every staged output must pass before it is written: the common fields, then each configured
head's own check (see inference.heads). A check returns a fixed-text reason, never raises."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from inference import heads

HEX64 = re.compile(r"[0-9a-f]{64}")


def check_common(row: Mapping[str, Any]) -> str | None:
    if not isinstance(row.get("content_hash"), str) or not HEX64.fullmatch(row["content_hash"]):
        return "content hash is malformed"
    tokens = row.get("input_tokens")
    if isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 1:
        return "input token count is not positive"
    return None


class OutputChecker:
    """Everything the configured heads promise, checked on a staged row (`checker(row)`) or on a page of rows
    at once (`checker.page(rows)`: the first failing check's reason, or None, per row); checks that can
    (heads.base.PageChecker) see the whole page in one call."""

    def __init__(self, checks: list):
        self.checks = checks

    def __call__(self, row: Mapping[str, Any]) -> str | None:
        return self.page([row])[0]

    def page(self, rows: Sequence[Mapping[str, Any]]) -> list[str | None]:
        reasons: list[str | None] = [None] * len(rows)
        for one in self.checks:
            open_ = [k for k, reason in enumerate(reasons) if reason is None]
            if not open_:
                break
            batch = getattr(one, "page", None)
            found = batch([rows[k] for k in open_]) if batch else [one(rows[k]) for k in open_]
            for k, reason in zip(open_, found, strict=True):
                reasons[k] = reason or None
        return reasons


def output_checker(settings) -> OutputChecker:
    """One checker of a staged row against everything the configured heads promise."""
    return OutputChecker([check_common, *(head.checker(settings) for head in heads.configured(settings))])
