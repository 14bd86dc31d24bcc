"""settings_from_env and load_taxonomy_file: parsing, precedence and every rejection path."""

from __future__ import annotations

import json

import pytest

from inference.config import (
    ConfigError,
    Settings,
    SourceColumns,
    default_db_url,
    load_taxonomy_file,
    settings_from_env,
)

SECRET = "s3cr3t-Pa55w0rd-xyzzy"
PG_URL = f"postgresql+psycopg2://inference:{SECRET}@db.internal:5432/tickets"

SOURCE_VARS = {
    "TICKETS_SOURCE_TABLE": "table",
    "TICKETS_SOURCE_SCHEMA": "schema",
    "TICKETS_COL_ID": "ticket_id",
    "TICKETS_COL_SUBJECT": "subject",
    "TICKETS_COL_BODY": "body",
    "TICKETS_COL_CREATED_AT": "created_at",
    "TICKETS_COL_UPDATED_AT": "updated_at",
}


# --- defaults and overrides -------------------------------------------------------------------


def test_empty_environment_gives_documented_defaults():
    s = settings_from_env({})
    assert s.db_url == default_db_url()
    assert s.db_url.startswith("sqlite:///")
    assert s.model_dir, "an unset INFERENCE_MODEL must resolve to the bundled model directory"
    assert s.model_version is None
    assert s.device == "auto"
    assert s.max_batch_tokens is None
    assert s.taxonomy_file is None
    assert s.source == SourceColumns()
    # The env-free defaults equal the dataclass defaults: one source of truth.
    assert s == Settings()


def test_environment_values_are_parsed_and_typed():
    env = {
        "TICKETS_DB_URL": PG_URL,
        "INFERENCE_MODEL": "/models/minilm",
        "INFERENCE_MODEL_VERSION": "v7",
        "INFERENCE_DEVICE": " CUDA ",
        "INFERENCE_MAX_SEQ_LENGTH": " 128 ",
        "INFERENCE_MAX_BATCH_TOKENS": "4096",
        "INFERENCE_MAX_BATCH_SIZE": "64",
        "INFERENCE_CHUNK_SIZE": "500",
        "INFERENCE_SHARD_TOKENS": "20000",
        "INFERENCE_MAX_SHARDS": "8",
        "INFERENCE_MAX_ATTEMPTS": "5",
        "INFERENCE_MAX_FAILURE_RATE": "0.25",
        "INFERENCE_TAXONOMY": "/etc/taxonomy.json",
        "TICKETS_SOURCE_TABLE": "support_tickets",
        "TICKETS_SOURCE_SCHEMA": "crm",
        "TICKETS_COL_ID": "id",
        "TICKETS_COL_SUBJECT": "title",
        "TICKETS_COL_BODY": "description",
        "TICKETS_COL_CREATED_AT": "opened_at",
        "TICKETS_COL_UPDATED_AT": "modified_at",
    }
    s = settings_from_env(env)
    assert s.db_url == PG_URL
    assert s.model_dir == "/models/minilm"
    assert s.model_version == "v7"
    assert s.device == "cuda"
    assert (s.max_seq_length, s.max_batch_tokens, s.max_batch_size) == (128, 4096, 64)
    assert (s.chunk_size, s.shard_tokens, s.max_shards, s.max_attempts) == (500, 20000, 8, 5)
    assert isinstance(s.max_seq_length, int)
    assert s.max_failure_rate == pytest.approx(0.25)
    assert s.taxonomy_file == "/etc/taxonomy.json"
    assert s.source == SourceColumns(
        table="support_tickets",
        schema="crm",
        ticket_id="id",
        subject="title",
        body="description",
        created_at="opened_at",
        updated_at="modified_at",
    )


@pytest.mark.parametrize("subject", ["none", "None", "description"])
def test_a_source_without_a_subject_reads_its_body_once(subject):
    env = {"TICKETS_COL_SUBJECT": subject, "TICKETS_COL_BODY": "description", "TICKETS_COL_UPDATED_AT": "created_at"}
    source = settings_from_env(env).source
    assert source.subject is None
    assert source.read == ["ticket_id", "description", "created_at"]
    assert settings_from_env({}).source.read == ["ticket_id", "subject", "body", "created_at", "updated_at"]
    assert settings_from_env({"TICKETS_COL_SUBJECT": "no ne"}).source.subject == "no ne"  # a column of that name
    with pytest.raises(ConfigError, match="TICKETS_COL_SUBJECT: source subject name ' none' begins or ends with"):
        settings_from_env({"TICKETS_COL_SUBJECT": " none"})


def test_blank_values_fall_back_to_defaults():
    blank = {"INFERENCE_MAX_SEQ_LENGTH": "  ", "INFERENCE_MAX_FAILURE_RATE": "", "TICKETS_SOURCE_SCHEMA": ""}
    s = settings_from_env(blank)
    defaults = settings_from_env({})
    assert s.max_seq_length == defaults.max_seq_length
    assert s.max_failure_rate == defaults.max_failure_rate
    assert s.source.schema is None


def test_overrides_win_over_environment():
    env = {"INFERENCE_DEVICE": "cuda", "INFERENCE_MAX_BATCH_SIZE": "64", "INFERENCE_MODEL_VERSION": "env"}
    s = settings_from_env(env, device="cpu", max_batch_size=8, model_version="flag")
    assert (s.device, s.max_batch_size, s.model_version) == ("cpu", 8, "flag")


def test_none_override_means_not_given():
    s = settings_from_env({"INFERENCE_MAX_BATCH_SIZE": "64"}, max_batch_size=None)
    assert s.max_batch_size == 64


def test_overrides_are_validated_too():
    with pytest.raises(ConfigError, match="INFERENCE_DEVICE"):
        settings_from_env({}, device="tpu")
    with pytest.raises(ConfigError, match="INFERENCE_MAX_BATCH_SIZE"):
        settings_from_env({}, max_batch_size=0)


# --- every invalid value names its variable ---------------------------------------------------


@pytest.mark.parametrize("device", ["tpu", "gpu", "cuda:0", "mps"])
def test_bad_device(device):
    with pytest.raises(ConfigError, match="INFERENCE_DEVICE") as err:
        settings_from_env({"INFERENCE_DEVICE": device})
    assert device in str(err.value)


INT_VARS = [
    "INFERENCE_MAX_SEQ_LENGTH",
    "INFERENCE_MAX_BATCH_TOKENS",
    "INFERENCE_MAX_BATCH_SIZE",
    "INFERENCE_CHUNK_SIZE",
    "INFERENCE_SHARD_TOKENS",
    "INFERENCE_MAX_SHARDS",
    "INFERENCE_MAX_ATTEMPTS",
]


@pytest.mark.parametrize("name", INT_VARS)
@pytest.mark.parametrize("raw", ["abc", "1.5", "12k", "1e3"])
def test_non_integer(name, raw):
    with pytest.raises(ConfigError, match=name):
        settings_from_env({name: raw})


OUT_OF_RANGE = [
    ("INFERENCE_MAX_SEQ_LENGTH", "7"),
    ("INFERENCE_MAX_SEQ_LENGTH", "8193"),
    ("INFERENCE_MAX_SEQ_LENGTH", "-1"),
    ("INFERENCE_MAX_BATCH_TOKENS", "255"),  # below the default max_seq_length of 256
    ("INFERENCE_MAX_BATCH_TOKENS", "10000001"),
    ("INFERENCE_MAX_BATCH_SIZE", "0"),
    ("INFERENCE_MAX_BATCH_SIZE", "65537"),
    ("INFERENCE_CHUNK_SIZE", "0"),
    ("INFERENCE_CHUNK_SIZE", "100001"),
    ("INFERENCE_SHARD_TOKENS", "999"),
    ("INFERENCE_MAX_SHARDS", "0"),
    ("INFERENCE_MAX_SHARDS", "1025"),
    ("INFERENCE_MAX_ATTEMPTS", "0"),
    ("INFERENCE_MAX_ATTEMPTS", "101"),
]


@pytest.mark.parametrize(("name", "raw"), OUT_OF_RANGE)
def test_out_of_range(name, raw):
    with pytest.raises(ConfigError, match=name):
        settings_from_env({name: raw})


@pytest.mark.parametrize(
    ("name", "raw"),
    [
        ("INFERENCE_MAX_SEQ_LENGTH", "8"),
        ("INFERENCE_MAX_SEQ_LENGTH", "8192"),
        ("INFERENCE_MAX_BATCH_TOKENS", "256"),
        ("INFERENCE_MAX_BATCH_SIZE", "1"),
        ("INFERENCE_MAX_SHARDS", "1024"),
        ("INFERENCE_MAX_ATTEMPTS", "100"),
    ],
)
def test_range_bounds_are_inclusive(name, raw):
    settings_from_env({name: raw})  # must not raise


def test_batch_token_floor_follows_seq_length():
    settings_from_env({"INFERENCE_MAX_SEQ_LENGTH": "64", "INFERENCE_MAX_BATCH_TOKENS": "64"})
    with pytest.raises(ConfigError, match="INFERENCE_MAX_BATCH_TOKENS"):
        settings_from_env({"INFERENCE_MAX_SEQ_LENGTH": "512", "INFERENCE_MAX_BATCH_TOKENS": "511"})


def test_bool_is_not_an_integer_setting():
    with pytest.raises(ConfigError, match="INFERENCE_MAX_ATTEMPTS"):
        Settings(max_attempts=True)


@pytest.mark.parametrize("raw", ["-0.01", "1.01", "5", "nan", "inf", "-inf", "five percent"])
def test_bad_failure_rate(raw):
    with pytest.raises(ConfigError, match="INFERENCE_MAX_FAILURE_RATE"):
        settings_from_env({"INFERENCE_MAX_FAILURE_RATE": raw})


@pytest.mark.parametrize("raw", ["0", "1", "0.0", "1.0"])
def test_failure_rate_bounds_are_inclusive(raw):
    assert settings_from_env({"INFERENCE_MAX_FAILURE_RATE": raw}).max_failure_rate == float(raw)


@pytest.mark.parametrize("url", ["tickets.db", "localhost:5432/tickets", "postgresql:/host/db"])
def test_bad_db_url(url):
    with pytest.raises(ConfigError, match="TICKETS_DB_URL"):
        settings_from_env({"TICKETS_DB_URL": url})


def test_empty_db_url_override_is_rejected():
    with pytest.raises(ConfigError, match="TICKETS_DB_URL"):
        settings_from_env({}, db_url="")


def test_bad_db_url_error_does_not_echo_the_password():
    with pytest.raises(ConfigError) as err:
        settings_from_env({"TICKETS_DB_URL": f"postgresql+psycopg2:/inference:{SECRET}@db/tickets"})
    assert SECRET not in str(err.value)


# Source names: any name a help desk's table really has (CSV headers as pandas or `sqlite3 .import` keep them,
# any script, quotes and SQL-looking text included: they are quoted wherever they go into SQL); refused, each
# naming the setting: the empty name, leading or trailing whitespace (never stripped), control and invisible
# characters, more than 63 bytes in UTF-8 (PostgreSQL would cut it short).
GOOD_SOURCE_NAMES = [
    "tickets",
    "Ticket",
    "Ticket ID",
    "Created At",
    "help-desk",
    "Betreff",
    "Änderungsdatum",
    "工单 编号",
    "Nachricht / Text",
    'say "hi"',
    "it's",
    "a.b",
    "1tickets",
    "#id",
    "$amount",
    "100% done",
    "tickets; drop table x",
    'src"; DROP TABLE src; --',
    "tic\u00a0kets",  # a no-break space inside
    "x" * 63,
    "ä" * 31 + "x",  # 63 bytes
]
BAD_SOURCE_NAMES = {
    " tickets": "begins or ends with whitespace",
    "tickets ": "begins or ends with whitespace",
    "tickets\n": "begins or ends with whitespace",
    "\u00a0tickets": "begins or ends with whitespace",
    "tic\x00kets": "holds the control or invisible character U+0000",
    "tic\nkets": "holds the control or invisible character U+000A",
    "tic\tkets": "holds the control or invisible character U+0009",
    "tic\x7fkets": "holds the control or invisible character U+007F",
    "tic\u200bkets": "holds the control or invisible character U+200B",  # zero-width space
    "tic\u202ekets": "holds the control or invisible character U+202E",  # right-to-left override
    "tic\u2028kets": "holds the control or invisible character U+2028",  # line separator
    "x" * 64: "is 64 bytes long in UTF-8, more than PostgreSQL's 63",
    "ä" * 32: "is 64 bytes long in UTF-8, more than PostgreSQL's 63",
}


@pytest.mark.parametrize("var", sorted(SOURCE_VARS))
@pytest.mark.parametrize("value", GOOD_SOURCE_NAMES)
def test_source_names_help_desks_really_have_are_accepted(var, value):
    s = settings_from_env({var: value})
    assert getattr(s.source, SOURCE_VARS[var]) == value  # exactly as given: nothing stripped or folded


@pytest.mark.parametrize("var", sorted(SOURCE_VARS))
@pytest.mark.parametrize("value", sorted(BAD_SOURCE_NAMES))
def test_bad_source_names_are_refused_naming_the_setting_and_why(var, value):
    with pytest.raises(ConfigError) as err:
        settings_from_env({var: value})
    message = str(err.value)
    assert message.startswith(f"{var}: source {SOURCE_VARS[var]} name {value!r} {BAD_SOURCE_NAMES[value]}")
    assert "at most 63 bytes in UTF-8" in message  # and what a valid name looks like


@pytest.mark.parametrize("value", [*BAD_SOURCE_NAMES, "", None, 5, b"tickets"])
def test_source_columns_refuse_bad_names(value):
    with pytest.raises(ConfigError, match="TICKETS_SOURCE_TABLE: source table name"):
        SourceColumns(table=value)


def test_empty_source_names_are_refused_in_code_and_mean_the_default_in_the_environment():
    for field in ("table", "schema", "ticket_id", "subject", "body", "created_at", "updated_at"):
        with pytest.raises(ConfigError, match=f"source {field} name '' is empty"):
            SourceColumns(**{field: ""})
    assert settings_from_env({"TICKETS_SOURCE_TABLE": ""}).source.table == "tickets"


def test_source_name_limits_accepted():
    SourceColumns(table="_" + "x" * 62, schema="ß" * 31 + "s", ticket_id="T1", subject="s_2")


def test_source_name_error_names_the_environment_variable():
    unnamed = []
    for var in sorted(SOURCE_VARS):
        with pytest.raises(ConfigError) as err:
            settings_from_env({var: "tickets\x00"})
        if var not in str(err.value):
            unnamed.append(var)
    assert unnamed == []


def test_messages_show_odd_source_names_quoted_and_plain_ones_as_they_are():
    from inference.config import shown_name

    assert [shown_name(n) for n in ("tickets", "createdAt", "Ticket ID", 'say "hi"', "a,b")] == [
        "tickets",
        "createdAt",
        '"Ticket ID"',
        '"say ""hi"""',
        '"a,b"',
    ]


# --- secrets ----------------------------------------------------------------------------------


def test_repr_hides_db_password():
    s = settings_from_env({"TICKETS_DB_URL": PG_URL})
    assert s.db_url == PG_URL  # the value is kept, just never printed
    assert SECRET not in repr(s)
    assert SECRET not in str(s)
    assert SECRET not in repr(s.replace(device="cpu"))
    assert SECRET not in f"{s!r} {s}"


# --- taxonomy file ----------------------------------------------------------------------------


def _write(tmp_path, content: str) -> str:
    path = tmp_path / "taxonomy.json"
    path.write_text(content, encoding="utf-8")
    return str(path)


def test_taxonomy_file_good(tmp_path):
    data = {"billing": ["invoice is wrong", "refund please"], "login": ["cannot sign in"]}
    assert load_taxonomy_file(_write(tmp_path, json.dumps(data))) == data


def test_taxonomy_file_missing(tmp_path):
    missing = tmp_path / "nope.json"
    with pytest.raises(ConfigError, match="INFERENCE_TAXONOMY") as err:
        load_taxonomy_file(str(missing))
    assert "does not exist" in str(err.value)
    assert str(missing) in str(err.value)


@pytest.mark.parametrize("content", ["", "{", '{"billing": ["x"],}', "not json at all"])
def test_taxonomy_file_bad_json(tmp_path, content):
    with pytest.raises(ConfigError, match="INFERENCE_TAXONOMY.*not valid JSON"):
        load_taxonomy_file(_write(tmp_path, content))


@pytest.mark.parametrize("data", [{}, {"billing": ["x"]}, [["billing", ["x"]], ["login", ["y"]]], "billing", 3])
def test_taxonomy_file_too_few_labels_or_not_an_object(tmp_path, data):
    with pytest.raises(ConfigError, match="at least two labels"):
        load_taxonomy_file(_write(tmp_path, json.dumps(data)))


@pytest.mark.parametrize("label", ["Billing Issues", "billing-issue", "9lives", "", "a;drop"])
def test_taxonomy_file_bad_label(tmp_path, label):
    data = {"login": ["cannot sign in"], label: ["something"]}
    with pytest.raises(ConfigError, match="taxonomy label") as err:
        load_taxonomy_file(_write(tmp_path, json.dumps(data)))
    assert repr(label) in str(err.value)


@pytest.mark.parametrize("descriptions", [[], [""], ["   "], ["ok", ""], "a string", None, [1, 2], {"a": "b"}])
def test_taxonomy_file_empty_or_invalid_descriptions(tmp_path, descriptions):
    data = {"login": ["cannot sign in"], "billing": descriptions}
    with pytest.raises(ConfigError, match="'billing'.*non-empty"):
        load_taxonomy_file(_write(tmp_path, json.dumps(data)))


def test_taxonomy_label_with_trailing_newline_rejected(tmp_path):
    data = {"login": ["cannot sign in"], "billing\n": ["invoice is wrong"]}
    with pytest.raises(ConfigError, match="taxonomy label"):
        load_taxonomy_file(_write(tmp_path, json.dumps(data)))


# --- declared rules apply to values from code too ------------------------------------------------


@pytest.mark.parametrize("value", [1, "true", None])
def test_bool_setting_must_be_a_bool(value):
    with pytest.raises(ConfigError, match="INFERENCE_COMPILE"):
        Settings(compile=value)


@pytest.mark.parametrize(("raw", "expected"), [("yes", True), (" ON ", True), ("0", False), ("off", False)])
def test_bool_words(raw, expected):
    assert settings_from_env({"INFERENCE_COMPILE": raw}).compile is expected


def test_heads_from_code_are_normalised_like_the_environment():
    assert Settings(heads=["Summary", "embedding", "summary"]).heads == ("embedding", "summary")
    assert settings_from_env({"INFERENCE_HEADS": " summary ,embedding"}).heads == ("embedding", "summary")
    with pytest.raises(ConfigError, match="INFERENCE_HEADS"):
        Settings(heads=("embedding", "sentiment"))


def test_cache_dir_set_but_empty_means_off():
    assert settings_from_env({"INFERENCE_CACHE_DIR": ""}).cache_dir == ""
    assert settings_from_env({}).cache_dir == Settings().cache_dir != ""
