"""Alerts from a real Airflow: a run that fails for real, and a task killed with SIGKILL, reach on-call by
e-mail (aiosmtpd), Slack (incoming-webhook connection pointed at a local receiver) and the JSON webhook,
with the fields on-call needs and no ticket text."""

from __future__ import annotations

import datetime as dt
import email
import email.policy
import html
import json
import os
import signal
import time

import pytest

DAG = "ticket_batch_inference"
FIELDS = ("dag_id", "run_id", "task_id", "map_index", "try_number", "error_class", "log_url")


def _alerts(receivers, run_id: str) -> dict[str, list]:
    """The run's alerts per channel: webhook payloads (dicts), Slack texts, e-mails (subject, to, text)."""
    out: dict[str, list] = {"webhook": [], "slack": [], "email": []}
    for m in receivers.all("webhook"):
        payload = json.loads(m.body)
        if payload.get("run_id") == run_id:
            out["webhook"].append(payload)
    for m in receivers.all("slack"):
        text = json.loads(m.body)["text"]
        if f"run_id: {run_id}\n" in text + "\n":
            out["slack"].append(text)
    for m in receivers.all("email"):
        msg = email.message_from_bytes(m.body, policy=email.policy.default)
        parts = [p.get_content() for p in msg.walk() if p.get_content_type() in ("text/plain", "text/html")]
        text = html.unescape("\n".join(parts))
        if f"run_id: {run_id}\n" in text:
            out["email"].append((str(msg["Subject"]), m.meta["to"], text))
    return out


def _wait_alerts(receivers, run_id: str, task_id: str, timeout: float = 30) -> dict[str, list]:
    """Callbacks run when the task ends, so the alerts are normally in before the run is marked failed."""
    deadline = time.monotonic() + timeout
    while True:
        got = _alerts(receivers, run_id)
        if all(any(f"task_id: {task_id}\n" in _text(x) for x in got[c]) for c in ("slack", "email")) and any(
            p["task_id"] == task_id for p in got["webhook"]
        ):
            return got
        if time.monotonic() > deadline:
            return got
        time.sleep(0.5)


def _decoded(m) -> str:
    """A received message as text: e-mail parts decoded (base64 or quoted-printable would hide a leak)."""
    if m.channel != "email":
        return m.text()
    msg = email.message_from_bytes(m.body, policy=email.policy.default)
    parts = [str(msg["Subject"])] + [p.get_content() for p in msg.walk() if p.get_content_maintype() == "text"]
    return "\n".join(parts)


def _text(item) -> str:
    return item[2] if isinstance(item, tuple) else item


def _check_channels(airflow, got: dict, run_id: str, task_id: str, error_class: str) -> dict:
    """Exactly one alert per channel for the task, each naming what on-call needs. Returns the JSON one."""
    hooks = [p for p in got["webhook"] if p["task_id"] == task_id]
    assert len(hooks) == 1, f"webhook: {got['webhook']}"
    payload = hooks[0]
    assert payload["dag_id"] == DAG and payload["run_id"] == run_id and payload["task_id"] == task_id
    assert payload["map_index"] == -1 and payload["try_number"] == 1 and payload["error_class"] == error_class
    log_url = payload["log_url"]
    assert log_url.startswith(airflow.base_url + f"/dags/{DAG}/runs/{run_id}/tasks/{task_id}"), log_url
    expected_lines = [f"{k}: {payload[k]}" for k in FIELDS]

    slack = [t for t in got["slack"] if f"task_id: {task_id}\n" in t]
    assert len(slack) == 1, f"slack: {got['slack']}"
    for line in expected_lines:
        assert line in slack[0].splitlines(), f"{line!r} not in the Slack message:\n{slack[0]}"

    mails = [m for m in got["email"] if f"task_id: {task_id}\n" in m[2]]
    assert len(mails) == 1, f"email: {got['email']}"
    subject, to, text = mails[0]
    assert subject == f"[airflow] {DAG} {task_id} failed ({error_class})"
    assert to == ["oncall@example.test"]
    for line in expected_lines:
        assert line in text.splitlines(), f"{line!r} not in the e-mail:\n{text}"
    return payload


def test_failed_run_alerts_every_channel_with_ids_and_no_ticket_text(airflow, alert_scenario, receivers, view):
    run_id, bad = alert_scenario.run_id, alert_scenario.ticket_ids
    final = airflow.wait_run(run_id)
    assert final["state"] == "failed", airflow.task_states(run_id)
    states = airflow.task_states(run_id)
    assert states["plan_run"] == states["infer_shard[0]"] == states["load_results"] == "success", states
    assert states["retry_failed"] == "success" and states["finish_run"] == "failed", states

    # Rewritten while each attempt ran: never written with text that is no longer the ticket's; dead-lettered.
    failures = view.failures(run_id)
    assert sorted(f.ticket_id for f in failures) == sorted(bad)
    assert {(f.error_class, f.status) for f in failures} == {("stale_input", "dead_letter")}
    assert not view.results(bad)
    row = view.run_row(run_id)
    assert (row.status, row.backlog, row.failed, row.succeeded) == ("failed", 40, 5, 35)
    assert "failure rate" in row.error

    got = _wait_alerts(receivers, run_id, "finish_run")
    payload = _check_channels(airflow, got, run_id, "finish_run", "RunFailed")
    assert payload["run_summary"]["failed"] == 5 and payload["run_summary"]["backlog"] == 40
    assert "failure rate" in payload["run_summary"]["error"]
    assert len(got["webhook"]) == 1, f"one alert for the run, from finish_run only: {got['webhook']}"
    assert payload["why"] and payload["remedy"] and payload["window_start"].startswith(ALERT_DAY_TEXT)

    canary = alert_scenario.extra["canary"]
    assert view.ticket_text_contains(canary) == 40, "the canary is in every ticket of the run"
    everything = receivers.all()
    assert everything, "no alerts received at all"
    leaked = [f"{m.channel} {m.meta}" for m in everything if canary.encode() in m.body or canary in _decoded(m)]
    assert not leaked, f"ticket text reached alert messages: {leaked}"
    assert canary not in airflow.task_logs(run_id), "ticket text reached the task logs"
    assert not any(canary in (f.message or "") for f in failures)


KILL_DAY, KILL_TICKETS = dt.date(2026, 6, 25), 64
ALERT_DAY_TEXT = "2026-06-20"  # the alert scenario's window (tests/services/scenarios.py)


def _task_runner(ti_id: str):
    """The forked task-runner process of a task instance (Airflow titles it `airflow worker -- <ti id>`)."""
    import psutil

    for proc in psutil.process_iter(["cmdline"]):
        cmdline = " ".join(proc.info["cmdline"] or [])
        if cmdline.strip() == f"airflow worker -- {ti_id}":
            return proc
    return None


def test_sigkilled_shard_still_alerts_through_finish_run(airflow, seed, receivers, view, run_id_for):
    """SIGKILL leaves no chance for the killed task's own callback. The alert must still come: the task is
    marked failed, finish_run (trigger rule all_done) finds tickets without a final state and fails the
    run's reconciliation, and its failure alerts. The run has no retries (NO_RETRY_PREFIX): with the DAG's
    retries=2 the kill would be retried a minute later and resume where it stopped (no alert, by design)."""
    seed(KILL_TICKETS, 1, KILL_DAY, 4001)
    run_id = run_id_for(airflow.no_retry_prefix + "kill__")
    day = KILL_DAY.isoformat()
    airflow.trigger({"window_start": day, "window_end": day, "shards": 1, "max_batch_tokens": 256}, run_id=run_id)

    deadline, killed, staged_at_kill = time.monotonic() + 400, None, 0
    while killed is None:
        ti = next((t for t in airflow.task_instances(run_id) if t["task_id"] == "infer_shard"), None)
        if ti is not None and ti["state"] in ("success", "failed", "upstream_failed", "skipped"):
            pytest.fail(f"infer_shard ended ({ti['state']}) before it could be killed: seed more tickets")
        if ti is not None and ti["state"] == "running":
            counts = view.item_counts(run_id)  # infer_shard loads each chunk as it commits: succeeded
            staged = counts.get("staged", 0) + counts.get("succeeded", 0)
            proc = _task_runner(ti["id"]) if staged >= airflow.chunk_size else None
            if proc is not None:
                os.kill(proc.pid, signal.SIGKILL)
                killed, staged_at_kill = proc.pid, staged
        assert time.monotonic() < deadline, f"infer_shard never got to kill: {airflow.task_states(run_id)}"
        time.sleep(0.5)

    final = airflow.wait_run(run_id)
    assert final["state"] == "failed"
    tis = {(t["task_id"], t["map_index"]): t for t in airflow.task_instances(run_id)}
    shard = tis[("infer_shard", 0)]
    assert (shard["state"], shard["try_number"]) == ("failed", 1), shard
    assert tis[("load_results", -1)]["state"] == "success", "what the killed shard had committed is loaded"
    assert tis[("finish_run", -1)]["state"] == "failed"

    items = view.items(run_id)
    succeeded = [t for t, (status, _, _) in items.items() if status == "succeeded"]
    unfinished = [t for t, (status, _, _) in items.items() if status in ("planned", "staged")]
    assert len(items) == KILL_TICKETS and len(succeeded) >= staged_at_kill and unfinished
    assert len(succeeded) + len(unfinished) == KILL_TICKETS
    assert sorted(r.ticket_id for r in view.results(items)) == sorted(succeeded)
    row = view.run_row(run_id)
    assert row.status == "failed" and f"{len(unfinished)} of {KILL_TICKETS} tickets have no final state" in row.error

    got = _wait_alerts(receivers, run_id, "finish_run")
    payload = _check_channels(airflow, got, run_id, "finish_run", "RunFailed")
    assert payload["run_summary"]["backlog"] == KILL_TICKETS and payload["run_summary"]["succeeded"] == len(succeeded)
    shard_alerts = [p for p in got["webhook"] if p["task_id"] == "infer_shard"]
    print(f"\n[kill] pid {killed} killed with {staged_at_kill} staged; infer_shard's own alerts: {shard_alerts}")
    # The killed shard could not alert: finish_run's alert names it, says why and what to do.
    assert payload["killed_tasks"] == ["infer_shard[0]"], payload
    assert "without an error of its own" in payload["why"] and "infer_shard[0]" in payload["why"]
    assert "max_batch_tokens" in payload["remedy"] and "clear infer_shard[0]" in payload["remedy"]
    assert payload["run_summary"]["unfinished_shards"] == {"0": len(unfinished)}
    assert (payload["window_start"], payload["window_end"]) == (
        f"{day}T02:00:00+00:00",
        f"{KILL_DAY + dt.timedelta(days=1)}T02:00:00+00:00",
    )
