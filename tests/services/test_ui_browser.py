"""The Airflow UI in headless Chromium (Playwright, Debian's chromium): log in with the simple auth manager,
open the DAG, fill the trigger form (the params' JSON-schema form), trigger, and see the run succeed."""

from __future__ import annotations

import datetime as dt
import shutil
import time
from pathlib import Path

import pytest

DAG = "ticket_batch_inference"
DAY = dt.date(2026, 6, 15)
CHROMIUM = Path(shutil.which("chromium") or "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def _playwright():
    if not CHROMIUM.exists():
        pytest.fail(
            "The browser test drives Debian's chromium and found none on PATH: `apt-get install chromium` as root "
            "(.ci/run does it; Playwright never downloads a browser here).",
            pytrace=False,
        )
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.fail(
            "the browser test needs Playwright's Python package: pip install playwright==1.65.2 "
            "(no `playwright install`: the test drives Debian's chromium)"
        )
    return sync_playwright


def test_trigger_form_in_the_ui_runs_the_dag_with_the_changed_params(airflow, seed, view, run_id_for, artifacts_dir):
    sync_playwright = _playwright()
    seed(20, 1, DAY, 2001)
    run_id = run_id_for("ui__")
    user, password = airflow.login_user
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.set_default_timeout(30_000)
        try:
            page.goto(f"{airflow.base_url}/dags/{DAG}")
            page.get_by_label("Username").fill(user)
            page.get_by_label("Password").fill(password)
            page.get_by_role("button", name="Sign in").click()
            page.wait_for_url(f"**/dags/{DAG}**")

            page.get_by_test_id("trigger-dag-button").click()
            page.locator("#element_window_start").fill(DAY.isoformat())
            page.locator("#element_window_end").fill(DAY.isoformat())
            limit_input = page.locator('[id="number-input:element_limit:inc"]').get_attribute("aria-controls")
            page.locator(f'[id="{limit_input}"]').fill("5")
            page.locator('[id$=":trigger:advancedOptions"]').click()
            page.locator('input[name="dagRunId"]').fill(run_id)
            page.get_by_test_id("trigger-dag-submit").click()

            deadline = time.monotonic() + 30
            while airflow.api("GET", f"/api/v2/dags/{DAG}/dagRuns/{run_id}").status_code != 200:
                assert time.monotonic() < deadline, "the form did not create the run"
                time.sleep(0.5)
            page.goto("about:blank")  # the DAG page refreshes itself every few seconds: idle while waiting
            final = airflow.wait_run(run_id)
            assert final["state"] == "success", airflow.task_states(run_id)

            page.goto(f"{airflow.base_url}/dags/{DAG}/runs/{run_id}")
            page.get_by_text(run_id).first.wait_for()
            page.get_by_text("success", exact=False).first.wait_for()
            page.screenshot(path=str(artifacts_dir / "ui-run-succeeded.png"), full_page=True)
        except BaseException:
            shot = artifacts_dir / f"ui-failure-{int(time.time())}.png"
            page.screenshot(path=str(shot), full_page=True)
            print(f"\n[ui] screenshot of the page at the failure: {shot}")
            raise
        finally:
            browser.close()

    run = airflow.run(run_id)
    assert run["triggered_by"] == "ui" and run["triggering_user_name"] == user
    conf = run["conf"]
    assert (conf["window_start"], conf["window_end"], conf["limit"]) == (DAY.isoformat(), DAY.isoformat(), 5), conf
    row = view.run_row(run_id)
    assert (row.status, row.backlog, row.succeeded) == ("succeeded", 5, 5)
    results = [r for r in view.results() if r.run_id == run_id]
    assert sorted(r.ticket_id for r in results) == ["2001", "2002", "2003", "2004", "2005"], "the lowest 5 IDs"


def test_the_run_report_tab_shows_the_report_of_a_finished_run(airflow, rest_scenario, view, artifacts_dir):
    """The report plugin in the real UI: a finished run's "Run report" tab (an external view in an iframe, served
    by the plugin's FastAPI app in the api-server) shows the report, and its numbers are the run tables'; the run
    note (written by the plugin's listener in the scheduler) sums the run up."""
    sync_playwright = _playwright()
    run_id = rest_scenario.run_id
    final = airflow.wait_run(run_id)
    assert final["state"] == "success", airflow.task_states(run_id)
    row = view.run_row(run_id)
    note = airflow.run(run_id)["note"] or ""
    assert note.startswith("**succeeded** · window 2026-06-10 02:00 .. 2026-06-11 02:00 UTC"), note
    assert f"{row.backlog:,} tickets: {row.succeeded:,} succeeded" in note, note

    user, password = airflow.login_user
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True)
        page = browser.new_page(viewport={"width": 1400, "height": 1600})
        page.set_default_timeout(30_000)
        try:
            page.goto(f"{airflow.base_url}/dags/{DAG}/runs/{run_id}")
            page.get_by_label("Username").fill(user)
            page.get_by_label("Password").fill(password)
            page.get_by_role("button", name="Sign in").click()
            page.wait_for_url(f"**/dags/{DAG}/runs/**")
            page.get_by_text("Run report", exact=True).first.click()  # the plugin's tab on the run
            report = page.frame_locator("iframe[title='Run report']")
            report.get_by_test_id("report-title").wait_for()
            assert report.get_by_test_id("report-title").inner_text() == f"Run report {run_id}"
            text = report.locator("body").inner_text()
            page.screenshot(path=str(artifacts_dir / "ui-run-report.png"), full_page=True)
        except BaseException:
            shot = artifacts_dir / f"ui-report-failure-{int(time.time())}.png"
            page.screenshot(path=str(shot), full_page=True)
            print(f"\n[ui] screenshot of the page at the failure: {shot}")
            raise
        finally:
            browser.close()
    for line in ("Tickets by state", "Wall time per step", "Achieved batch sizes", "Throughput per chunk"):
        assert line in text, line
    assert f"succeeded\t{row.succeeded:,}" in text or f"succeeded {row.succeeded:,}" in text, text[:2000]
    assert "infer_shard" in text and "padding efficiency" in text
