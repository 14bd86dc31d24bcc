"""Every error the library raises on purpose, in two families.

`PermanentError`: no retry can help (configuration, run options, the model, the schema, a run that does
not exist or failed its own checks). The Airflow adapter fails the task at once, without retries.
`TransientError`: a retry in a fresh process may succeed (the database went away, the device broke).

Messages are fixed texts plus names, IDs and counts: never ticket text, never a driver's message
(those can quote row values). `remedy` is the fixed "what to do" line that logs and alerts carry.
"""

from __future__ import annotations


class InferenceError(Exception):
    """Base of the library's own errors."""

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

    remedy = "fix the setting named in the message (environment variable or Airflow connection), then rerun"


class InvalidOptions(ConfigError):
    """A run option is unknown, of the wrong type or out of range. The message never echoes long input."""

    remedy = "trigger the run again with valid params (see the README, 'Run options')"


class ModelUnavailable(PermanentError):
    """The model directory is missing or unusable; raised before anything is written."""

    remedy = "set INFERENCE_MODEL to a local Hugging Face model directory with safetensors weights, or unset it"


class SchemaOutdated(PermanentError):
    """Our tables are older (or newer) than this code: a migration must run first."""

    remedy = "run `python -m inference db upgrade` against the tickets database"


class RunNotFound(PermanentError, LookupError):
    """A step was asked to work on a run that plan never recorded."""

    remedy = "the plan task failed: fix its error (see its log), then clear the run"


class ModelChanged(PermanentError):
    """The model or head configuration changed after the run was planned."""

    remedy = "deploy the same model and heads on every worker, or start a new run"


class RunFailed(PermanentError):
    """The run's accounting does not add up, or too many tickets failed. Counts only, never text."""

    remedy = "see the run's failures (`python -m inference status`) and the failed tasks' logs"

    def __init__(self, message: str, summary: dict, *, remedy: str | None = None):
        super().__init__(message, remedy=remedy)
        self.summary = summary


class DatabaseUnavailable(TransientError):
    """The database cannot be reached or used."""

    remedy = "check TICKETS_DB_URL or the Airflow connection 'tickets_db', and that the server is running"


class DeviceBroken(TransientError):
    """The accelerator is in a state no retry inside this process can fix; a fresh process may."""

    remedy = "the task is retried in a fresh process; if it repeats, check the GPU (nvidia-smi) and its driver"


def is_permanent(exc: BaseException) -> bool:
    return isinstance(exc, PermanentError)
