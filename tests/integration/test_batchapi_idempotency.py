"""Submitting and collecting are repeatable: crashes at every step between "record" and "call", lost
answers, two copies at once, a cut download. Checked against what the local provider saw and billed."""

from __future__ import annotations

import threading

import pytest
import sqlalchemy as sa

from inference.batchapi import BatchApiRejected, BatchApiUnavailable, BatchClient, collect_run, submit_run
from inference.batchapi.collect import abandon_parts, cancel_overdue
from inference.pipeline import finish_run, load_results
from inference.store.batch_tables import inference_batches
from tests.support.batch_night import RUN, expected_summary, item_states, local_client, night, setup_run, stored
from tests.support.openai_server import Behaviour, OpenAIServer


class Crash(BaseException):
    """Stands for the process dying: not an Exception, so nothing on the way catches it."""


class CrashingClient(BatchClient):
    """The real client, dying right after one chosen call succeeded (before its result is recorded)."""

    def __init__(self, client: BatchClient, after: str):
        super().__init__(client._client)
        self.after = after

    def upload(self, path):
        file_id = super().upload(path)
        if self.after == "upload":
            raise Crash
        return file_id

    def create(self, *args, **kwargs):
        info = super().create(*args, **kwargs)
        if self.after == "create":
            raise Crash
        return info


@pytest.fixture
def server():
    with OpenAIServer() as srv:
        yield srv


@pytest.fixture
def client(server):
    c = local_client(server)
    yield c
    c.close()


def parts(engine) -> list[sa.Row]:
    with engine.connect() as conn:
        return list(conn.execute(sa.select(inference_batches).order_by(inference_batches.c.part)))


@pytest.mark.parametrize("after", ["upload", "create"])
def test_a_crash_after_a_provider_call_resumes_without_paying_twice(sqlite_engine, server, client, after):
    settings, ctx, texts = setup_run(sqlite_engine, 7, max_requests=3)
    with pytest.raises(Crash):
        submit_run(ctx, CrashingClient(client, after), RUN)
    first = "prepared" if after == "upload" else "uploaded"  # each step recorded before the next call
    assert [p.state for p in parts(sqlite_engine)] == [first, "prepared", "prepared"]

    refs = submit_run(ctx, client, RUN)  # the task's retry, in a fresh process

    assert server.creates == 3 and len({r.batch_id for r in refs}) == 3
    assert {b["input_file_id"] for b in server.batches.values()} == {p.input_file_id for p in parts(sqlite_engine)}
    night(settings, ctx, client)
    assert finish_run(settings, RUN)["succeeded"] == 7


def test_a_create_whose_answer_was_lost_is_found_by_its_marker(sqlite_engine, server, client):
    settings, ctx, _ = setup_run(sqlite_engine, 4)
    server.faults.lose_create_answers = 1  # created at the provider, then the connection dropped

    (ref,) = submit_run(ctx, client, RUN)

    assert server.creates == 1 and ref.batch_id in server.batches
    (batch,) = server.batches.values()
    assert batch["metadata"]["inference_marker"] == parts(sqlite_engine)[0].marker


def test_a_restarted_task_waits_for_the_same_batches(sqlite_engine, server, client):
    server.behaviour = Behaviour(polls=4)
    settings, ctx, _ = setup_run(sqlite_engine, 5, max_requests=2)
    first = submit_run(ctx, client, RUN)
    assert not collect_run(ctx, client, RUN).done  # still running when the worker dies

    again = submit_run(ctx, client, RUN)  # the retried task

    assert [r.as_dict() for r in again] == [r.as_dict() for r in first] and server.creates == 3
    night(settings, ctx, client)
    assert finish_run(settings, RUN)["succeeded"] == 5 and server.creates == 3


def test_two_copies_of_the_submit_task_at_once_submit_each_part_once(pg_engine, server):
    settings, ctx, _ = setup_run(pg_engine, 40, max_requests=7)
    errors = []

    def copy():
        c = local_client(server)
        try:
            submit_run(ctx, c, RUN)
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
        finally:
            c.close()

    threads = [threading.Thread(target=copy) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)

    assert not errors
    rows = parts(pg_engine)
    assert len(rows) == 6 and sum(p.request_count for p in rows) == 40
    assert server.creates == 6 and {p.provider_batch_id for p in rows} == set(server.batches)


def test_a_download_cut_mid_body_is_fetched_again_and_nothing_half_read_is_written(sqlite_engine, server, client):
    settings, ctx, texts = setup_run(sqlite_engine, 6)
    submit_run(ctx, client, RUN)
    server.faults.cut_downloads = 10  # every try of this collect is cut
    with pytest.raises(BatchApiUnavailable):
        while not collect_run(ctx, client, RUN).done:
            pass
    assert {st for st, _ in item_states(sqlite_engine).values()} == {"planned"}
    assert parts(sqlite_engine)[0].state == "submitted"

    server.faults.cut_downloads = 1  # one cut, then the retry inside the same collect gets it all
    while not collect_run(ctx, client, RUN).done:
        pass
    load_results(settings, RUN)
    results = stored(sqlite_engine)
    assert {t: r.summary for t, r in results.items()} == {t: expected_summary(*v) for t, v in texts.items()}


def test_collecting_twice_changes_nothing(sqlite_engine, server, client):
    settings, ctx, _ = setup_run(sqlite_engine, 3)
    submit_run(ctx, client, RUN)
    while not (first := collect_run(ctx, client, RUN)).done:
        pass
    before = item_states(sqlite_engine)
    again = collect_run(ctx, client, RUN)
    assert first.collected == [0] and again.collected == [] and item_states(sqlite_engine) == before


def test_an_overdue_batch_is_cancelled_and_its_finished_half_kept(sqlite_engine, server, client):
    server.behaviour = Behaviour(never_end=True, shuffle=False)
    settings, ctx, _ = setup_run(sqlite_engine, 6)
    submit_run(ctx, client, RUN)
    assert not collect_run(ctx, client, RUN).done

    assert cancel_overdue(ctx, client, RUN) == [0]
    while not collect_run(ctx, client, RUN).done:
        pass
    load_results(settings, RUN)

    states = item_states(sqlite_engine)
    assert sorted(st for st, _ in states.values()) == ["failed"] * 3 + ["succeeded"] * 3
    assert {r for st, r in states.values() if st == "failed"} == {"batch_expired"}


def test_batches_that_never_end_are_abandoned_and_dead_lettered_after_the_attempts(sqlite_engine, server, client):
    import datetime as dt

    server.behaviour = Behaviour(never_end=True)
    server.cancel = lambda batch_id: server.batches[batch_id]  # this provider ignores cancels too
    settings, ctx, _ = setup_run(sqlite_engine, 2, max_failure_rate=1.0, deadline_grace_seconds=60)
    clock = iter(dt.datetime(2030, 1, 1, tzinfo=dt.UTC) + dt.timedelta(days=k) for k in range(1000))

    from inference.batchapi import run_batches

    drive = run_batches(
        ctx, client, RUN, lambda: load_results(settings, RUN), sleep=lambda s: None, now=lambda: next(clock)
    )
    summary = finish_run(settings, RUN)

    assert drive.rounds == 3 and drive.abandoned == 3  # one part per round, each attempt counted
    assert summary["failed"] == 2 and summary["reasons"] == {"batch_expired": 2}
    assert abandon_parts(ctx, RUN, [0]) == 0  # an abandoned part stays closed


def test_a_wrong_api_key_is_a_permanent_error_that_does_not_echo_the_key(sqlite_engine, server):
    settings, ctx, _ = setup_run(sqlite_engine, 2)
    bad = BatchClient.connect("sk-not-the-key", server.base_url)
    with pytest.raises(BatchApiRejected) as caught:
        submit_run(ctx, bad, RUN)
    assert "HTTP 401" in str(caught.value) and "sk-not-the-key" not in str(caught.value)
    assert server.creates == 0


def test_a_provider_without_the_list_endpoint_still_gets_each_part_once(sqlite_engine, server, client):
    server.faults.no_list = True
    settings, ctx, _ = setup_run(sqlite_engine, 5, max_requests=2)
    refs = submit_run(ctx, client, RUN)
    assert len(refs) == 3 and server.creates == 3
    assert submit_run(ctx, client, RUN) == refs and server.creates == 3
