"""The same night on the team's own GPU box: `batch-file export`, an offline batch runner that reads the
OpenAI batch format (here: a stand-in writing vLLM `run-batch`'s output format), `batch-file import`.
No network at all: every socket connect fails during these tests."""

from __future__ import annotations

import json
import socket
import stat
import uuid
from pathlib import Path

import pytest
import sqlalchemy as sa

from inference.cli import main
from inference.store.schema import ticket_failures, ticket_results
from tests.support.batch_night import expected_summary, seed
from tests.support.openai_server import fake_summary
from tests.support.tickets import DAY2


@pytest.fixture
def offline(monkeypatch, sqlite_engine):
    def refuse(*args, **kwargs):
        raise AssertionError("the offline path opened a network connection")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setenv("INFERENCE_HEADS", "summary")
    return sqlite_engine


def cli(engine, capsys, *argv) -> tuple[int, dict]:
    code = main(["--db", engine.url.render_as_string(hide_password=False), "batch-file", *argv])
    out = capsys.readouterr().out.strip().splitlines()
    return code, json.loads(out[-1]) if out else {}


def vllm_run_batch(request_file, result_file, fail: set[str] = frozenset()) -> None:
    """What `vllm run-batch -i REQUESTS -o RESULTS` writes: one line per request, in input order, errors in
    the same file (status_code 400, no body, `error` a string)."""
    with request_file.open() as fh, result_file.open("w") as out:
        for line in fh:
            request = json.loads(line)
            ticket = request["custom_id"].split(":")[1]
            result = {"id": f"vllm-{uuid.uuid4().hex}", "custom_id": request["custom_id"], "error": None}
            if ticket in fail:
                result["response"] = {"status_code": 400, "request_id": f"vllm-batch-{uuid.uuid4().hex}", "body": None}
                result["error"] = "This model's maximum context length is exceeded."
            else:
                user = request["body"]["messages"][-1]["content"]
                body = {
                    "id": f"chatcmpl-{uuid.uuid4().hex}",
                    "object": "chat.completion",
                    "model": request["body"]["model"],
                    "choices": [
                        {
                            "index": 0,
                            "message": {"role": "assistant", "content": fake_summary(user)},
                            "finish_reason": "stop",
                        }
                    ],
                    "usage": {"prompt_tokens": 30, "completion_tokens": 8, "total_tokens": 38},
                }
                result["response"] = {"status_code": 200, "request_id": f"vllm-batch-{uuid.uuid4().hex}", "body": body}
            out.write(json.dumps(result) + "\n")


def test_an_offline_night_with_a_retry_round(offline, capsys, tmp_path):
    texts = seed(offline, 9)
    code, exported = cli(
        offline,
        capsys,
        "export",
        "--date",
        DAY2.isoformat(),
        "--out",
        str(tmp_path / "r1"),
        "--model",
        "local-llm",
        "--max-requests",
        "4",
    )
    assert code == 0 and len(exported["files"]) == 3  # 9 requests, 4 per file
    run_id = exported["run_id"]
    for path in map(Path, exported["files"]):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600  # ticket text: owner only
        vllm_run_batch(path, path.with_suffix(".out.jsonl"), fail={"4"})
    results = sorted(tmp_path.glob("r1/*.out.jsonl"), reverse=True)  # order does not matter

    code, imported = cli(offline, capsys, "import", "--run-id", run_id, *map(str, results))
    assert code == 0 and (imported["replies"], imported["failed"]) == (8, 1)
    assert imported["load"]["written"] == 8
    with offline.connect() as conn:
        failure = conn.execute(sa.select(ticket_failures)).one()
    assert (failure.ticket_id, failure.error_class, failure.status) == ("4", "batch_request_error", "pending")
    assert "context" not in failure.message  # the runner's words are not kept

    code, again = cli(
        offline, capsys, "export", "--run-id", run_id, "--out", str(tmp_path / "r2"), "--model", "local-llm"
    )
    (retry_file,) = map(Path, again["files"])
    assert [json.loads(x)["custom_id"].split(":")[1] for x in retry_file.read_text().splitlines()] == ["4"]
    vllm_run_batch(retry_file, tmp_path / "r2.out.jsonl")
    code, done = cli(offline, capsys, "import", "--run-id", run_id, str(tmp_path / "r2.out.jsonl"), "--finish")

    assert code == 0 and done["finish"]["status"] == "succeeded" and done["finish"]["succeeded"] == 9
    with offline.connect() as conn:
        stored = {r.ticket_id: r.summary for r in conn.execute(sa.select(ticket_results))}
    assert stored == {t: expected_summary(*v) for t, v in texts.items()}


def test_an_import_missing_lines_fails_those_requests_and_ignores_foreign_lines(offline, capsys, tmp_path):
    seed(offline, 3)
    _, exported = cli(offline, capsys, "export", "--date", DAY2.isoformat(), "--out", str(tmp_path), "--model", "m")
    (path,) = map(Path, exported["files"])
    vllm_run_batch(path, tmp_path / "out.jsonl")
    lines = (tmp_path / "out.jsonl").read_text().splitlines()
    foreign = json.loads(lines[0])
    foreign["custom_id"] = foreign["custom_id"].replace(":1:", ":99:")
    (tmp_path / "out.jsonl").write_text("\n".join([lines[0], lines[0], json.dumps(foreign), "garbage{"]) + "\n")

    _, imported = cli(offline, capsys, "import", "--run-id", exported["run_id"], str(tmp_path / "out.jsonl"))

    assert (imported["replies"], imported["failed"], imported["missing"]) == (1, 2, 2)
    assert (imported["duplicates"], imported["unknown"], imported["malformed"]) == (1, 1, 1)
    _, twice = cli(offline, capsys, "import", "--run-id", exported["run_id"], str(tmp_path / "out.jsonl"))
    assert twice["parts"] == [] and twice["replies"] == 0  # an imported part is closed


def test_export_writes_what_the_request_rows_say(offline, tmp_path, capsys):
    """A part exported twice (a lost file) is written again from the same members with their current text."""
    seed(offline, 2)
    _, first = cli(offline, capsys, "export", "--date", DAY2.isoformat(), "--out", str(tmp_path / "a"), "--model", "m")
    _, second = cli(
        offline, capsys, "export", "--run-id", first["run_id"], "--out", str(tmp_path / "b"), "--model", "m"
    )
    a, b = (Path(x[0]).read_bytes() for x in (first["files"], second["files"]))
    assert a == b and b.count(b"\n") == 2
