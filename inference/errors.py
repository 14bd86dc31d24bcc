"""Typed per-item error classes and skip reasons: what a failures row or a skipped item can say."""

from __future__ import annotations

OOM = "oom"  # the item's batch ran out of memory even alone
NAN_OUTPUT = "nan_output"  # the model produced NaN/inf (retried in float32)
MODEL_ERROR = "model_error"  # the model raised on this item alone
INVALID_OUTPUT = "invalid_output"  # the output failed validation before upsert
STALE_INPUT = "stale_input"  # the ticket was edited after its text was read: redo with the new text
PROCESS_CRASH = "process_crash"  # the worker died with this ticket in the model, INFERENCE_MAX_ATTEMPTS times

RETRYABLE = {
    OOM: True,
    NAN_OUTPUT: True,
    MODEL_ERROR: True,
    INVALID_OUTPUT: True,
    STALE_INPUT: True,
    PROCESS_CRASH: False,
}

SKIP_EMPTY = "empty_input"  # nothing to embed: NULL, empty or whitespace-only subject and body
SKIP_DELETED = "deleted"  # the ticket was deleted after planning
SKIP_SUPERSEDED = "superseded"  # a newer version of the ticket already has its result


def message_for(error_class: str) -> str:
    """The stored message: fixed text per class, so nothing from the ticket can leak into it."""
    return {
        OOM: "out of memory even as a batch of one",
        NAN_OUTPUT: "model output contained NaN or infinity",
        MODEL_ERROR: "model raised on this item alone",
        INVALID_OUTPUT: "output failed validation",
        STALE_INPUT: "ticket changed after its text was read",
        PROCESS_CRASH: "the worker process died while this ticket was in the model",
    }.get(error_class, error_class)
