"""The deferrable wait: BatchesEndedTrigger.run() against the local provider, through the real OpenAIHook
(API key and base URL from an Airflow connection) and the real async SDK."""

from __future__ import annotations

import asyncio
import json
import time

import pytest

from inference.batchapi import BatchClient
from inference_airflow.batch_trigger import BatchesEndedTrigger
from tests.support.openai_server import Behaviour, OpenAIServer

CONN = "openai_batch_test"


@pytest.fixture
def server(monkeypatch):
    with OpenAIServer() as srv:
        conn = {"conn_type": "openai", "host": srv.base_url, "password": srv.api_key}
        monkeypatch.setenv(f"AIRFLOW_CONN_{CONN.upper()}", json.dumps(conn))
        yield srv


def make_batches(server, n: int) -> list[str]:
    """n tiny batches created through the sync SDK, as the submit task would."""
    client = BatchClient.connect(server.api_key, server.base_url)
    line = {"custom_id": "t1:1:" + "a" * 64 + ":" + "b" * 16, "method": "POST", "url": "/v1/chat/completions"}
    line["body"] = {"model": "m", "messages": [{"role": "user", "content": "x"}]}
    ids = []
    for k in range(n):
        file_id = server.add_file(json.dumps(line).encode() + b"\n", "in.jsonl", "batch")["id"]
        ids.append(client.create(file_id, f"marker-{k}", "run", k).id)
    client.close()
    return ids


def events(trigger: BatchesEndedTrigger, timeout: float = 30) -> list[dict]:
    async def collect():
        return [e.payload async for e in trigger.run()]

    return asyncio.run(asyncio.wait_for(collect(), timeout))


def test_fires_once_every_batch_has_ended(server):
    server.behaviour = Behaviour(polls=3)
    ids = make_batches(server, 3)
    trigger = BatchesEndedTrigger("run-1", ids, time.time() + 60, conn_id=CONN, poll_seconds=0.01)

    (event,) = events(trigger)

    assert event["status"] == "ended" and event["pending"] == []
    assert event["batches"] == {i: "completed" for i in ids}
    assert set(event) == {"status", "run_id", "batches", "pending", "reason", "carry"}  # IDs, statuses, fixed text
    assert event["carry"] == {}


def test_a_restarted_triggerer_resumes_from_the_serialized_trigger_with_the_same_deadline(server):
    server.behaviour = Behaviour(polls=40)
    ids = make_batches(server, 2)
    deadline = time.time() + 60
    first = BatchesEndedTrigger("run-1", ids, deadline, conn_id=CONN, poll_seconds=0.01)

    def polls() -> int:
        return sum(1 for method, path in server.calls if method == "GET" and path.startswith("/v1/batches/"))

    async def interrupted():
        agen = first.run()
        task = asyncio.ensure_future(agen.__anext__())
        while polls() < 4:  # a few polls, then the triggerer stops (a restart, a redeploy)
            await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await agen.aclose()

    asyncio.run(interrupted())
    assert all(server.batches[i]["status"] == "in_progress" for i in ids)
    classpath, kwargs = first.serialize()
    assert classpath == "inference_airflow.batch_trigger.BatchesEndedTrigger"
    second = BatchesEndedTrigger(**json.loads(json.dumps(kwargs)))  # through the metadata DB, as JSON

    (event,) = events(second)

    assert second.deadline == deadline and event["status"] == "ended"
    assert server.creates == 2  # waiting never submits


def test_the_deadline_ends_the_wait_for_a_batch_that_never_ends(server):
    server.behaviour = Behaviour(never_end=True)
    ids = make_batches(server, 1)
    (event,) = events(BatchesEndedTrigger("run-1", ids, time.time() + 0.3, conn_id=CONN, poll_seconds=0.05))
    assert event["status"] == "deadline" and event["pending"] == ids


def test_transient_errors_are_retried_and_a_bad_key_is_not(server, monkeypatch):
    server.behaviour = Behaviour(polls=1)
    ids = make_batches(server, 1)
    server.faults.unavailable = 6  # more than the SDK's own two retries per poll
    (event,) = events(BatchesEndedTrigger("run-1", ids, time.time() + 60, conn_id=CONN, poll_seconds=0.01))
    assert event["status"] == "ended"

    bad = {"conn_type": "openai", "host": server.base_url, "password": "sk-wrong"}
    monkeypatch.setenv(f"AIRFLOW_CONN_{CONN.upper()}", json.dumps(bad))
    (event,) = events(BatchesEndedTrigger("run-1", ids, time.time() + 60, conn_id=CONN, poll_seconds=0.01))
    assert event["status"] == "error" and event["reason"] == "the provider answered HTTP 401"
    assert "sk-wrong" not in json.dumps(event)
