from __future__ import annotations
import json, time


def test_probe(airflow, artifacts_dir):
    for conf in ({"limit": -1}, {"limit": "ten"}, {"surprise": 1}, {"window_start": "x' OR 1=1"}, {"window_start": "2026-06-10", "window_end": "2026-06-01"}, {"reprocess": "yes"}):
        r = airflow.api("POST", "/api/v2/dags/ticket_batch_inference/dagRuns", json={"logical_date": None, "conf": conf, "dag_run_id": "probe__" + str(time.time())})
        print("CONF", conf, r.status_code, r.text[:600])
    for to in ("2026-06-03", "2026-06-03T02:00:00+00:00", "2026-06-04"):
        p = airflow.cli("backfill", "create", "--dag-id", "ticket_batch_inference", "--from-date", "2026-06-01", "--to-date", to, "--dry-run", check=False)
        print("BACKFILL", to, p.returncode, p.stdout[-1500:], p.stderr[-500:])
    from playwright.sync_api import sync_playwright
    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path="/usr/bin/chromium", args=["--headless","--no-sandbox","--disable-gpu","--disable-quic","--no-first-run","--disable-background-networking","--disable-component-update","--disable-sync"])
        page = b.new_page(viewport={"width": 1400, "height": 1000})
        page.goto(airflow.base_url + "/")
        page.wait_for_timeout(3000)
        page.screenshot(path=str(artifacts_dir / "1.png"))
        print("URL1", page.url)
        print(page.content()[:3000])
        b.close()
    print("ART", artifacts_dir)
    time.sleep(60)
    print(json.dumps([ (r["dag_run_id"], r["state"]) for r in airflow.api("GET", "/api/v2/dags/ticket_batch_inference/dagRuns").json()["dag_runs"]]))
