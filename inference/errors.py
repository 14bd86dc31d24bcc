"""Every error the library raises on purpose, in two families.

`PermanentError`: no retry can help (configuration, run options, the model, the schema, a run that does
not exist or failed its own checks). The Airflow adapter fails the task at once, without retries.
`TransientError`: a retry in a fresh process may succeed (the database went away, the device broke).

Messages are fixed texts plus names, IDs and counts: never ticket text, never a driver's message
(those can quote row values). `why` is the fixed "what went wrong" line and `remedy` the fixed "what to do"
line that logs and alerts carry (`why_of` / `remedy_of` give them for any exception, ours or not).
"""

from __future__ import annotations


class InferenceError(Exception):
    """Base of the library's own errors."""

    why: str = "the pipeline raised an error of its own"
    remedy: str = ""

    def __init__(self, message: str = "", *, remedy: str | None = None):
        super().__init__(message)
        if remedy is not None:
            self.remedy = remedy


class PermanentError(InferenceError):
    """Retrying cannot help: fix the cause, then rerun."""


class TransientError(InferenceError):
    """A retry (in a fresh process) may succeed."""


class ConfigError(PermanentError, ValueError):
    """A setting is missing or invalid; the message says which and how to fix it."""

    why = "a setting or connection is missing or invalid"
    remedy = "fix the setting named in the message (environment variable or Airflow connection), then rerun"


class InvalidOptions(ConfigError):
    """A run option is unknown, of the wrong type or out of range. The message never echoes long input."""

    why = "the run's params are invalid"
    remedy = "trigger the run again with valid params (see the README, 'Run options')"


class ModelUnavailable(PermanentError):
    """The model directory is missing or unusable; raised before anything is written."""

    why = "the model directory is missing or unusable"
    remedy = "set INFERENCE_MODEL to a local Hugging Face model directory with safetensors weights, or unset it"


class SchemaOutdated(PermanentError):
    """Our tables are older (or newer) than this code: a migration must run first."""

    why = "the result tables are not at the schema revision this code needs"
    remedy = "run `python -m inference db upgrade` against the tickets database"


class RunNotFound(PermanentError, LookupError):
    """A step was asked to work on a run that plan never recorded."""

    why = "the run was never planned (plan_run failed before recording it)"
    remedy = "the plan task failed: fix its error (see its log), then clear the run"


class ModelChanged(PermanentError):
    """The model or head configuration changed after the run was planned."""

    why = "the workers do not run the model the run was planned for"
    remedy = "deploy the same model and heads on every worker, or start a new run"


class RunFailed(PermanentError):
    """The run's accounting does not add up, or too many tickets failed. Counts only, never text."""

    why = "the run's accounting does not add up, or too many tickets failed"
    remedy = "see the run's failures (`python -m inference status`) and the failed tasks' logs"

    def __init__(self, message: str, summary: dict, *, remedy: str | None = None):
        super().__init__(message, remedy=remedy)
        self.summary = summary


class OutputsScrambled(PermanentError):
    """The model's outputs do not belong to their inputs (the per-chunk self-check): the chunk is not written."""

    why = "the model engine returned outputs that do not match their inputs (the self-check of a chunk)"
    remedy = (
        "nothing of that chunk was written; this is a bug in the engine (outputs put back in the wrong order) or "
        "a faulty device: check the engine version and the GPU, then clear the failed task"
    )


class DatabaseUnavailable(TransientError):
    """The database cannot be reached or used."""

    why = "the tickets database cannot be reached or used"
    remedy = "check TICKETS_DB_URL or the Airflow connection 'tickets_db', and that the server is running"


class DeviceBroken(TransientError):
    """The accelerator is in a state no retry inside this process can fix; a fresh process may."""

    why = "the accelerator failed in a way this process cannot recover from"
    remedy = "the task is retried in a fresh process; if it repeats, check the GPU (nvidia-smi) and its driver"


class DatabaseRefused(PermanentError):
    """The database refused a write: a constraint or trigger rejected rows (the same rows would be
    refused again, so no retry). The message names the constraint or table, never the row."""

    why = "the database refused a write (a constraint or trigger rejected the rows)"
    remedy = (
        "find the constraint or trigger named in the task log on the tickets database (our tables carry only the "
        "constraints of their migrations), remove it or fix what it expects, then clear the failed task"
    )


class DatabaseFull(TransientError):
    """The database (or the filesystem under a SQLite file) is out of space. Every write was one
    transaction, so nothing half-done remains; a retry may succeed once space is freed."""

    why = "the tickets database is out of disk space"
    remedy = (
        "free disk space where the tickets database stores its data (PostgreSQL's data directory or the SQLite "
        "file's filesystem), then clear the failed task; the next run marks the dead run failed and removes "
        "its staged rows"
    )


class DatabaseError(TransientError):
    """Any other database error, scrubbed of row contents; retried by Airflow."""

    why = "the tickets database answered with an error"
    remedy = "see the error in the task log; if it repeats, check the tickets database, then clear the failed task"


UNEXPECTED_WHY = "an unexpected error (a bug or an unhandled condition)"
UNEXPECTED_REMEDY = "read the traceback in the task log (log_url); fix the cause, then clear the failed task"


def why_of(exc: BaseException | None) -> str:
    """The fixed "what went wrong" line for any exception: ours, or a fixed text by class."""
    if isinstance(exc, InferenceError):
        return exc.why
    if exc is None:
        return "the task ended without an error of its own (killed: out of memory, node loss or a timeout)"
    return f"{UNEXPECTED_WHY}: {type(exc).__name__}"


def remedy_of(exc: BaseException | None) -> str:
    if isinstance(exc, InferenceError) and exc.remedy:
        return exc.remedy
    return UNEXPECTED_REMEDY


def is_permanent(exc: BaseException) -> bool:
    return isinstance(exc, PermanentError)
