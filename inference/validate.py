"""Checks every staged output must pass before it is written: the common fields, then each configured
head's own check (see inference.heads). A check returns a fixed-text reason, never raises."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
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


def output_checker(settings) -> Callable[[Mapping[str, Any]], str | None]:
    """One function checking a staged row against everything the configured heads promise."""
    checks = [check_common, *(head.checker(settings) for head in heads.configured(settings))]

    def check(row: Mapping[str, Any]) -> str | None:
        for one in checks:
            reason = one(row)
            if reason:
                return reason
        return None

    return check
