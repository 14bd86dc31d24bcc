"""One declaration per setting and run option: the declarations are consistent, and what derives from them
(settings checks, the form's schema, the task's check, the CLI flags, README's tables) agrees."""

from __future__ import annotations

import dataclasses
import datetime as dt
import re

import pytest
from jsonschema import FormatChecker, validate
from jsonschema.exceptions import ValidationError

from inference import cli, settings_docs
from inference.batchapi.settings import BatchSettings
from inference.config import Settings, SourceColumns, settings_from_env
from inference.errors import ConfigError, InvalidOptions
from inference.options import OPTIONS, parse_options
from inference.settings_deploy import AlertSettings, RoutingSettings, alerts_from_env, routing_from_env
from inference.settings_spec import (
    DAY_PATTERN,
    FIRST_DAY,
    LAST_DAY,
    TICKET_ID,
    TICKET_ID_MAX_LENGTH,
    TICKET_ID_PATTERN,
    env_fields,
    values_from_env,
    variables,
)

CLASSES = (Settings, SourceColumns, BatchSettings, RoutingSettings, AlertSettings)
OWNER = {spec.name: cls for cls in CLASSES for _, spec in env_fields(cls)}


# --- the declarations -------------------------------------------------------------------------------------


def test_every_setting_is_declared_once():
    names = [spec.name for spec in variables()]
    assert len(names) == len(set(names)), "a variable is declared twice"
    assert set(names) == set(OWNER)
    undeclared = {f.name for f in dataclasses.fields(Settings)} - {n for n, _ in env_fields(Settings)}
    assert undeclared == {"source", "batch"}, f"Settings fields without a variable: {sorted(undeclared)}"


@pytest.mark.parametrize("spec", variables(), ids=lambda s: s.name)
def test_a_declaration_is_complete(spec):
    assert re.fullmatch(r"(INFERENCE|TICKETS)_[A-Z0-9_]+", spec.name)
    assert spec.doc and "\n" not in spec.doc
    assert spec.group in ("library", "source", "routing", "alerts")
    if spec.kind in (int, float):
        assert spec.low is not None and spec.high is not None and spec.low <= spec.high
    if spec.floor:
        assert spec.floor in dict(env_fields(OWNER[spec.name]))


@pytest.mark.parametrize(
    "spec", [s for s in variables() if s.shown is None and s.default not in (None, ())], ids=lambda s: s.name
)
def test_the_documented_default_reads_back_as_the_default(spec):
    """What .env.example and README write as the default means the default when set (a default of none
    is written as the variable left empty)."""
    cls = OWNER[spec.name]
    assert getattr(cls(**values_from_env(cls, {spec.name: spec.default_text})), _field(spec)) == spec.default


@pytest.mark.parametrize("spec", [s for s in variables() if s.kind in (int, float)], ids=lambda s: s.name)
def test_out_of_range_values_are_refused_naming_the_variable(spec):
    cls = OWNER[spec.name]
    for raw in (str(spec.high + 1), str(spec.low - 1)):
        with pytest.raises(ConfigError, match=spec.name):
            cls(**values_from_env(cls, {spec.name: raw}))
    cls(**values_from_env(cls, {spec.name: str(spec.high)}))  # the bound itself is fine


def _field(spec) -> str:
    return next(name for name, s in env_fields(OWNER[spec.name]) if s is spec)


def test_settings_and_the_environment_share_the_defaults():
    assert settings_from_env({}) == Settings()
    assert routing_from_env({}) == RoutingSettings()
    assert alerts_from_env({}) == AlertSettings()


# --- Airflow adapters' settings ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "raw"),
    [
        ("INFERENCE_TASK_RETRIES", "two"),
        ("INFERENCE_TASK_RETRIES", "21"),
        ("INFERENCE_RETRY_DELAY_SECONDS", "0"),
        ("INFERENCE_K8S_GPUS", "-1"),
        ("INFERENCE_RUN_DEADLINE_MINUTES", "1.5"),
    ],
)
def test_routing_refuses_bad_values_naming_the_variable(name, raw):
    with pytest.raises(ConfigError, match=name):
        routing_from_env({name: raw})


def test_routing_blank_values():
    assert routing_from_env({"INFERENCE_GPU_QUEUE": "", "INFERENCE_TASK_RETRIES": " "}) == RoutingSettings()
    assert routing_from_env({"INFERENCE_K8S_GPU_TOLERATION": ""}).k8s_gpu_toleration == ""  # empty: none


def test_alert_settings_are_lists_and_never_raise():
    config = alerts_from_env(
        {
            "INFERENCE_ALERT_CHANNELS": " email, pager ,,webhook",
            "INFERENCE_ALERT_EMAIL_TO": "a@example.com, b@example.com",
            "INFERENCE_ALERT_SMTP_CONN_ID": "",
        }
    )
    assert config.channels == ("email", "pager", "webhook")  # unknown channels are logged by the notifier
    assert config.email_to == ("a@example.com", "b@example.com")
    assert (config.smtp_conn_id, config.email_from, config.webhook_conn_id) == (
        "smtp_default",
        None,
        "inference_alert_webhook",
    )


# --- dates and ticket IDs ---------------------------------------------------------------------------------


def test_the_date_pattern_holds_exactly_the_allowed_years():
    assert (FIRST_DAY.month, FIRST_DAY.day, LAST_DAY.month, LAST_DAY.day) == (1, 1, 12, 31)
    wrong = [
        year
        for year in range(10_000)
        if bool(re.fullmatch(DAY_PATTERN, f"{year:04d}-06-15")) != (FIRST_DAY.year <= year <= LAST_DAY.year)
    ]
    assert wrong == []


@pytest.mark.parametrize("text", ["9999-12-31", "1969-12-31", "0001-01-01", "3000-01-01"])
def test_a_date_out_of_range_is_refused_naming_the_option(text):
    for name in ("window_start", "window_end"):
        with pytest.raises(InvalidOptions, match=f"{name} must be a date from {FIRST_DAY} to {LAST_DAY}"):
            parse_options({"window_start": "2026-01-01", name: text})


def test_the_range_ends_are_valid_windows():
    for day in (FIRST_DAY, LAST_DAY):  # computable at both ends: no OverflowError in plan_run
        window = parse_options({"window_start": str(day)}).window(None)
        assert window.start.date() == day and window.end - window.start == dt.timedelta(days=1)


@pytest.mark.parametrize("refused", list("'\"`;\\=()*%,|<>&^$?!~[]{} \t\n\r\x00\x7f\x85\u00a0\u2028") + ["--"])
def test_ticket_ids_refuse_whitespace_quotes_and_sql_punctuation(refused):
    # reliability catalogue, 8: nothing SQL-shaped, from the form, the REST API or --ticket-id
    for value in (f"a{refused}b", f"{refused}1", f"1{refused}"):
        assert not TICKET_ID.fullmatch(value)
        with pytest.raises(InvalidOptions, match="ticket_ids"):
            parse_options({"ticket_ids": [value]})
        with pytest.raises(ValidationError):
            validate([value], OPTIONS["ticket_ids"].json_schema())
    assert TICKET_ID.fullmatch("SUP-1234") and TICKET_ID.fullmatch("工单-8") and TICKET_ID.fullmatch("EU/2026/42")


def test_the_ticket_id_pattern_holds_in_a_browsers_v_mode():
    # browsers compile a form field's pattern with JavaScript's v flag, where ( ) [ ] { } | / inside a class
    # must be escaped (checked with node's RegExp on 2026-12-05); Python's re reads the escapes the same
    refused = re.search(r"\[\^(.*)\]\{1,", TICKET_ID_PATTERN)[1].replace("\\\\", "")
    assert re.findall(r"(?<!\\)[()\[\]{}|/]", refused) == []
    assert re.search(r"([!#$%&*+,.:;<=>?@^`~-])\1", refused.replace("\\", "")) is None  # v mode: no &&, ;; ...


def test_the_ticket_id_length_is_one_constant():
    assert TICKET_ID.fullmatch("a" * TICKET_ID_MAX_LENGTH) and not TICKET_ID.fullmatch("a" * (TICKET_ID_MAX_LENGTH + 1))
    schema = OPTIONS["ticket_ids"].json_schema()
    validate(["a" * TICKET_ID_MAX_LENGTH], schema)
    with pytest.raises(ValidationError):
        validate(["a" * (TICKET_ID_MAX_LENGTH + 1)], schema)


# --- the form and the task agree --------------------------------------------------------------------------

PROBES = [
    None,
    "",
    True,
    False,
    0,
    1,
    -1,
    255,
    256,
    1024,
    1025,
    10_000_000,
    10_000_001,
    "10",
    [],
    ["a"],
    ["a;b"],
    [""],
    ["INC0012345"],
    ["EU/2026/42", "#1234", "CAF+x7@mail.example"],
    ["工单-8"],
    ["é" * 128],
    ["é" * 129],
    ["INC 0012345"],
    ["a\u00a0b"],
    ["<a@b.example>"],
    ["1 OR 1=1"],
    ["1)UNION SELECT 1"],
    ["admin--"],
    ["a\nb"],
    ["a\u2028b"],
    ["a\\b"],
    ['a"b'],
    ["a'b"],
    "2026-01-01",
    "2026-02-30",
    "20260101",
    str(FIRST_DAY),
    str(FIRST_DAY - dt.timedelta(days=1)),
    str(LAST_DAY),
    str(LAST_DAY + dt.timedelta(days=1)),
    "9999-12-31",
]


def _form_accepts(schema: dict, value) -> bool:
    try:
        validate(value, schema, format_checker=FormatChecker())  # what Airflow's Param.resolve runs
    except ValidationError:
        return False
    return True


def _task_accepts(name: str, value) -> bool:
    try:
        OPTIONS[name].parse(value)
    except InvalidOptions as exc:
        assert name in str(exc)
        return False
    return True


@pytest.mark.parametrize("name", OPTIONS)
def test_what_the_form_accepts_the_task_accepts(name):
    """No single value passes the form and then fails the run; the task may be more lenient ("" or [] as
    empty, integer ticket IDs), never stricter. (JSON Schema counts 10.0 as an integer: only the task sees it.)"""
    schema = OPTIONS[name].json_schema()
    stricter = [v for v in PROBES if _form_accepts(schema, v) and not _task_accepts(name, v)]
    assert stricter == []


@pytest.mark.parametrize("name", [n for n, o in OPTIONS.items() if o.kind == "int"])
def test_the_form_refuses_out_of_range_numbers_instead_of_clamping_them(name):
    """The Airflow form clamps a number into the schema's minimum/maximum silently; exclusive bounds do not."""
    spec = OPTIONS[name]
    schema = spec.json_schema()
    assert not {"minimum", "maximum"} & set(schema)
    assert [_form_accepts(schema, v) for v in (spec.low - 1, spec.low, spec.high, spec.high + 1)] == [
        False,
        True,
        True,
        False,
    ]


# --- the CLI ----------------------------------------------------------------------------------------------


def test_every_option_with_a_flag_is_a_run_flag():
    run = cli._parser()._subparsers._group_actions[0].choices["run"]
    flags = {s for a in run._actions for s in a.option_strings}
    assert {o.flag for o in OPTIONS.values() if o.flag} <= flags


def test_run_flags_give_the_same_options_as_the_params():
    args = cli._parser().parse_args(
        ["run", "--ticket-id", "b-2", "--ticket-id", "a.1", "--limit", "5", "--max-batch-tokens", "512", "--dry-run"]
    )
    from_flags = parse_options({n: getattr(args, n) for n, o in OPTIONS.items() if o.flag})
    params = {"ticket_ids": ["b-2", "a.1"], "limit": 5, "max_batch_tokens": 512, "dry_run": True}
    assert from_flags == parse_options(params)


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["run", "--date", "9999-12-31"], "--date"),
        (["run", "--date", "2026-02-30"], "--date"),
        (["seed", "--date", "1969-12-31"], "--date"),
        (["run", "--limit", "0"], "--limit"),
        (["run", "--shards", "1025"], "--shards"),
        (["run", "--max-batch-tokens", "255"], "--max-batch-tokens"),
        (["run", "--ticket-id", "1; DROP TABLE tickets"], "--ticket-id"),
    ],
)
def test_bad_flags_are_refused_up_front_without_a_traceback(capsys, argv, named):
    with pytest.raises(SystemExit) as exited:
        cli.main(["--db", "sqlite:////nonexistent/never.db", *argv])
    err = capsys.readouterr().err
    assert exited.value.code == 2
    assert f"argument {named}:" in err and "Traceback" not in err


# --- README -----------------------------------------------------------------------------------------------


def test_readme_tables_match_the_declarations():
    text = settings_docs.README.read_text(encoding="utf-8")
    assert settings_docs.render(text) == text, "run `python -m inference.settings_docs` and commit README.md"
