"""One declaration per setting and per run option; reading, checking and documenting them derive from it.

A setting is a dataclass field declared with `env(...)`: its environment variable, default, bounds or
choices and one doc line sit on the field (`inference.config.Settings`, `inference.settings_deploy`). A run
option is a field declared with `option(...)` (`inference.options.RunOptions`). From these come: settings
from the environment and their checks, the run options' checks, the Airflow trigger form
(plugins/inference_airflow/params.py), the CLI's `run` flags, and README's tables (inference.settings_docs);
tests hold `.env.example` to them.

Standard library only: the DAG file reaches this module at parse time.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import re
from collections.abc import Iterator, Mapping
from dataclasses import MISSING, dataclass
from typing import Any

from inference.errors import ConfigError, InvalidOptions

SPEC = "inference.spec"  # the dataclass field metadata key holding an Env or an Option

# Limits more than one declaration shares.
# A ticket ID a run may name: up to 128 characters (so at most 512 bytes of UTF-8, the widest key our tables
# hold), as help desks write their keys (SUP-1234, EU/2026/42, #1234, a mail Message-ID without its brackets,
# letters of any script), but nothing SQL-shaped (reliability catalogue, 8): no whitespace, control character,
# quote or SQL punctuation, and no "--". SQL only ever sees IDs as bind parameters; this is the operator check.
# One pattern for the task (Python's re) and the form (JSON Schema).
TICKET_ID_MAX_LENGTH = 128
# Valid alike in Python's re and JavaScript's u and v modes (a browser compiles a form's pattern with v, where
# ( ) | { } [ ] inside a class must be escaped).
TICKET_ID_PATTERN = (
    r"(?!.*--)[^\s'" '"' r"`;\\=\(\)*%,\|<>&^$?!~\[\]\{\}\x00-\x1f\x7f-\x9f]{1," f"{TICKET_ID_MAX_LENGTH}}}"
)
TICKET_ID = re.compile(TICKET_ID_PATTERN)  # use with fullmatch
TICKET_ID_TEXT = (
    f"1-{TICKET_ID_MAX_LENGTH} characters: letters and digits of any script and _ . : - # / @ + "
    "(no whitespace, quotes, control characters, other SQL punctuation or --)"
)
MAX_TICKET_IDS = 10_000
# Logical dates a run may name. Whole years, so the form's pattern can hold the range (format "date"
# checks the day); later dates are no one's tickets, and 9999-12-31's window would end past datetime.max.
FIRST_DAY, LAST_DAY = dt.date(1970, 1, 1), dt.date(2999, 12, 31)
DAY_PATTERN = "^(19[7-9][0-9]|2[0-9]{3})-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])$"
MAX_WINDOW_DAYS = 366
DEFAULT_MAX_SEQ_LENGTH = 256
MAX_BATCH_TOKENS = 10_000_000
MAX_SHARDS = 1024  # Airflow maps at most 1024 task instances by default ([core] max_map_length)


# --------------------------------------------------------------------------------------------------------
# Environment variables
# --------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Env:
    """One environment variable: its name, type, default, rules and one doc line."""

    name: str
    kind: type  # str, int, float, bool, or tuple (a comma-separated list)
    default: Any
    doc: str
    low: float | None = None
    high: float | None = None
    choices: tuple[str, ...] = ()  # str: one of them; tuple: any of them (normalised to this order)
    floor: str | None = None  # another field of the same settings whose value is a lower bound too
    blank_is_value: bool = False  # `VAR=` means "" (e.g. "off"), not "the default"
    shown: str | None = None  # the default as documented, where the code computes it
    group: str = "library"  # library, source, routing, alerts: the sections of .env.example and README

    @property
    def default_text(self) -> str:
        """The default as .env.example and README write it."""
        if self.shown is not None:
            return self.shown
        return "none" if self.default in (None, ()) else self.text(self.default)

    def text(self, value: Any) -> str:
        if isinstance(value, bool):
            return str(value).lower()
        if isinstance(value, tuple):
            return ",".join(value)
        return str(value)

    def read(self, env: Mapping[str, str]) -> Any:
        """The typed value in `env` (checked by the settings' __post_init__); MISSING when unset or blank.

        Free text (paths, URLs, identifiers) is taken verbatim: a stray space or newline is an error,
        not silently repaired. Everything else is stripped (and choices lower-cased) first."""
        raw = env.get(self.name)
        if raw is None or (raw == "" and not self.blank_is_value):
            return MISSING
        if self.kind is str and not self.choices:
            return raw
        raw = raw.strip()
        if not raw:
            return MISSING
        if self.kind in (int, float):
            try:
                return self.kind(raw)
            except ValueError:
                raise self.error(f"must be {'an integer' if self.kind is int else 'a number'}, got {raw!r}") from None
        if self.kind is bool:
            word = raw.lower()
            if word not in ("0", "false", "no", "off", "1", "true", "yes", "on"):
                raise self.error(f"must be true or false, got {raw!r}")
            return word in ("1", "true", "yes", "on")
        return raw.lower() if self.choices and self.kind is str else raw

    def check(self, value: Any, floor: float | None = None) -> Any:
        """A typed value (from the environment or from code) checked against the rules; lists normalised."""
        if value is None and self.default is None:
            return None
        if self.kind is int:
            low = self.low if floor is None else max(self.low, floor)
            if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= self.high:
                raise self.error(f"must be an integer from {low} to {self.high}, got {value!r}")
        elif self.kind is float:
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not self.low <= value <= self.high:
                raise self.error(f"must be between {self.low:g} and {self.high:g}, got {value!r}")
        elif self.kind is bool:
            if not isinstance(value, bool):
                raise self.error(f"must be true or false, got {value!r}")
        elif self.kind is tuple:
            return self._items(value)
        elif self.choices and value not in self.choices:
            raise self.error(f"must be one of {', '.join(self.choices)}, got {value!r}")
        return value

    def _items(self, value: Any) -> tuple[str, ...]:
        items = value.split(",") if isinstance(value, str) else value if isinstance(value, (list, tuple)) else None
        if items is None:
            raise self.error(f"must be a comma-separated list, got {value!r}")
        items = [str(x).strip() for x in items if str(x).strip()]
        if not self.choices:
            return tuple(items)
        names = {x.lower() for x in items}
        if not names or names - set(self.choices):
            raise self.error(f"must list one or more of {', '.join(self.choices)}, got {value!r}")
        return tuple(c for c in self.choices if c in names)

    def error(self, text: str) -> ConfigError:
        return ConfigError(f"{self.name} {text}")


def env(name: str, default: Any, doc: str, *, kind: type | None = None, factory=None, repr: bool = True, **rules):
    """A dataclass field read from the environment variable `name` (see Env)."""
    spec = Env(name, kind or type(default), default, doc, **rules)
    if factory is not None:
        return dataclasses.field(default_factory=factory, repr=repr, metadata={SPEC: spec})
    return dataclasses.field(default=default, repr=repr, metadata={SPEC: spec})


def env_fields(cls) -> Iterator[tuple[str, Env]]:
    for f in dataclasses.fields(cls):
        if isinstance(f.metadata.get(SPEC), Env):
            yield f.name, f.metadata[SPEC]


def values_from_env(cls, environ: Mapping[str, str]) -> dict[str, Any]:
    """Keyword arguments for `cls` from the variables set in `environ` (unset ones keep the field default)."""
    out = {name: spec.read(environ) for name, spec in env_fields(cls)}
    return {k: v for k, v in out.items() if v is not MISSING}


def check_fields(obj) -> None:
    """Each declared field of a settings object checked against its rules (call from __post_init__)."""
    for name, spec in env_fields(type(obj)):
        value = getattr(obj, name)
        checked = spec.check(value, getattr(obj, spec.floor) if spec.floor else None)
        if checked is not value:
            object.__setattr__(obj, name, checked)


def variables() -> list[Env]:
    """Every environment variable the library and its Airflow adapters read, in documentation order."""
    from inference.batchapi.settings import BatchSettings
    from inference.config import Settings, SourceColumns
    from inference.settings_deploy import AlertSettings, RoutingSettings

    classes = (Settings, SourceColumns, BatchSettings, RoutingSettings, AlertSettings)
    return [spec for cls in classes for _, spec in env_fields(cls)]


# --------------------------------------------------------------------------------------------------------
# Run options
# --------------------------------------------------------------------------------------------------------


def short_repr(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def logical_date(name: str, value: object) -> dt.date | None:
    """A logical date: YYYY-MM-DD (or a date / datetime) from FIRST_DAY to LAST_DAY; "" and None are none."""
    from inference.window import as_utc

    if value is None or value == "":
        return None
    if isinstance(value, dt.datetime):
        value = as_utc(value).date()
    elif isinstance(value, str) and re.fullmatch(r"\d{4}-\d{2}-\d{2}", value):
        try:
            value = dt.date.fromisoformat(value)
        except ValueError:
            pass
    if not isinstance(value, dt.date):
        raise InvalidOptions(f"{name} must be a date as YYYY-MM-DD, got {short_repr(value)}")
    if not FIRST_DAY <= value <= LAST_DAY:
        raise InvalidOptions(f"{name} must be a date from {FIRST_DAY} to {LAST_DAY}, got {value}")
    return value


@dataclass(frozen=True)
class Option:
    """One run option: a DAG param, a CLI flag of `run`, and a field of RunOptions."""

    kind: str  # date, int, bool or ids
    title: str  # the form's label
    description: str  # the form's help text and the CLI's
    low: int | None = None
    high: int | None = None
    flag: str | None = None  # the CLI `run` flag; None: not on the command line
    name: str = ""  # the field's name, filled in by options_of()

    @property
    def default(self) -> Any:
        return False if self.kind == "bool" else None

    @property
    def help(self) -> str:
        """The description with the accepted range."""
        if self.kind == "int":
            return f"{self.description} Allowed: {self.low} to {self.high}."
        if self.kind == "date":
            return f"{self.description} Allowed: {FIRST_DAY} to {LAST_DAY}."
        if self.kind == "ids":
            return f"{self.description} At most {MAX_TICKET_IDS}, each {TICKET_ID_TEXT}."
        return self.description

    def json_schema(self) -> dict[str, Any]:
        """The Param schema. Integer bounds are exclusive on purpose: the Airflow form clamps a number into
        `minimum`/`maximum` without a word (limit 0 became 1), while exclusive bounds let the schema refuse it."""
        if self.kind == "date":
            return {"type": ["null", "string"], "format": "date", "pattern": DAY_PATTERN}
        if self.kind == "int":
            return {"type": ["null", "integer"], "exclusiveMinimum": self.low - 1, "exclusiveMaximum": self.high + 1}
        if self.kind == "bool":
            return {"type": "boolean"}
        # (?![\s\S]) is the end of the value in Python's re and JavaScript alike; $ would let "1\n" through in re
        item = {"type": "string", "pattern": f"^{TICKET_ID_PATTERN}(?![\\s\\S])"}
        return {"type": ["null", "array"], "items": item, "maxItems": MAX_TICKET_IDS}

    def parse(self, value: object) -> Any:
        """A value as the form, the REST API or a stored run sends it, checked; InvalidOptions names the option."""
        if self.kind == "date":
            return logical_date(self.name, value)
        if self.kind == "int":
            if value is None or value == "":
                return None
            if isinstance(value, bool) or not isinstance(value, int):
                raise InvalidOptions(f"{self.name} must be an integer, got {short_repr(value)}")
            if not self.low <= value <= self.high:
                raise InvalidOptions(f"{self.name} must be between {self.low} and {self.high}, got {value}")
            return value
        if self.kind == "bool":
            if value is None:
                return False
            if not isinstance(value, bool):
                raise InvalidOptions(f"{self.name} must be true or false, got {short_repr(value)}")
            return value
        return self._ticket_ids(value)

    def from_text(self, text: str) -> Any:
        """One command-line value (for ids: one ID of the repeatable flag)."""
        if self.kind == "int":
            try:
                number = int(text)
            except ValueError:
                raise InvalidOptions(f"{self.name} must be an integer, got {short_repr(text)}") from None
            return self.parse(number)
        if self.kind == "ids":
            return self._ticket_ids([text])[0]
        return self.parse(text)

    def _ticket_ids(self, value: object) -> tuple[str, ...] | None:
        if value is None or value == []:
            return None
        if not isinstance(value, (list, tuple)):
            raise InvalidOptions(f"{self.name} must be a list of ticket IDs, got {short_repr(value)}")
        if len(value) > MAX_TICKET_IDS:
            raise InvalidOptions(f"{self.name} holds {len(value)} IDs; at most {MAX_TICKET_IDS} per run")
        ids = []
        for item in value:
            item = str(item) if isinstance(item, int) and not isinstance(item, bool) else item
            if not isinstance(item, str) or not TICKET_ID.fullmatch(item):
                raise InvalidOptions(f"{self.name}: {short_repr(item)} is not a ticket ID ({TICKET_ID_TEXT})")
            ids.append(item)
        return tuple(sorted(set(ids)))


def option(kind: str, title: str, description: str, **rules):
    """A RunOptions field declared as a run option (see Option)."""
    spec = Option(kind, title, description, **rules)
    return dataclasses.field(default=spec.default, metadata={SPEC: spec})


def options_of(cls) -> dict[str, Option]:
    """The declared run options of `cls`, by name, in field order."""
    return {
        f.name: dataclasses.replace(f.metadata[SPEC], name=f.name)
        for f in dataclasses.fields(cls)
        if isinstance(f.metadata.get(SPEC), Option)
    }
