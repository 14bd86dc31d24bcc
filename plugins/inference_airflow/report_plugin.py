"""The run report in the Airflow UI (an Airflow 3 plugin).

- A **Run report** tab on every run of `ticket_batch_inference` (an external view, destination `dag_run`): the
  report `python -m inference report RUN_ID --format html` prints, served by this plugin's FastAPI app inside
  the api-server at `inference-report/runs/<run_id>` (also `?format=json|md|text`). Static HTML with inline SVG
  charts, no script: it shows inside the UI's sandboxed iframe.
- An **Inference reports** page in the navigation: the recent runs, each linking to its report.
- The **run note**, which the UI shows at a glance: the window when a run starts (runs triggered with
  `logical_date: null` have no data interval to show), its summary when it ends (a listener in the scheduler,
  from finish_run's return value; a note someone wrote by hand is left alone).

Reading the report needs the same right as reading the DAG's runs (the auth manager decides). The app reads
the tickets database through the connection `tickets_db` (else TICKETS_DB_URL), like the tasks. IDs, counts,
timings and category labels only: no ticket text reaches the page.

Imports of the library and of the api-server's security happen inside the functions: every Airflow component
(and every task process) loads this file.
"""

from __future__ import annotations

import logging

from airflow.listeners import hookimpl
from airflow.plugins_manager import AirflowPlugin
from fastapi import FastAPI, HTTPException, Query, Request
from fastapi.responses import HTMLResponse, JSONResponse, PlainTextResponse

log = logging.getLogger(__name__)

DAG_ID = "ticket_batch_inference"
URL_PREFIX = "/inference-report"
NOTE_LIMIT = 1000  # Airflow's dag_run_note.content


# --- the report pages ---------------------------------------------------------------------------------------


async def require_run_access(request: Request) -> None:
    """The caller may read this DAG's runs (the UI's session cookie or a bearer token, as for the REST API)."""
    from airflow.api_fastapi.auth.managers.models.resource_details import DagAccessEntity
    from airflow.api_fastapi.core_api.security import get_user, requires_access_dag
    from fastapi.security import HTTPAuthorizationCredentials
    from starlette.concurrency import run_in_threadpool

    bearer = None
    scheme, _, token = (request.headers.get("authorization") or "").partition(" ")
    if scheme.lower() == "bearer" and token:
        bearer = HTTPAuthorizationCredentials(scheme="Bearer", credentials=token)
    user = await get_user(request, _oauth_token=None, bearer_credentials=bearer)
    check = requires_access_dag("GET", DagAccessEntity.RUN, param_dag_id=DAG_ID)
    await run_in_threadpool(check, request, user)


def _settings():
    from inference_airflow.tasks import settings

    return settings()


def _report(run_id: str | None) -> dict:
    import sqlalchemy as sa

    from inference.report import build
    from inference.store.db import check_connection, make_engine

    settings = _settings()
    engine = make_engine(settings.db_url, poolclass=sa.pool.NullPool)
    try:
        check_connection(engine)
        return build(
            engine, run_id, price_per_device_hour=settings.device_hour_price, max_batch_size=settings.max_batch_size
        )
    finally:
        engine.dispose()


def _recent(limit: int) -> list[dict]:
    import sqlalchemy as sa

    from inference.store import runs
    from inference.store.db import make_engine

    engine = make_engine(_settings().db_url, poolclass=sa.pool.NullPool)
    try:
        if not sa.inspect(engine).has_table("inference_runs"):
            return []
        with engine.connect() as conn:
            return [runs.as_dict(r) for r in runs.recent_runs(conn, limit)]
    finally:
        engine.dispose()


def _page(title: str, body: str) -> str:
    from html import escape

    from inference.report.pages import CSS

    return (
        f"<!doctype html><html lang='en'><head><meta charset='utf-8'><title>{escape(title)}</title>"
        f"<style>{CSS}</style></head><body>{body}</body></html>"
    )


def create_app() -> FastAPI:
    from fastapi import Depends

    app = FastAPI(title="Ticket inference: run reports", dependencies=[Depends(require_run_access)])

    @app.get("/", response_class=HTMLResponse)
    def index(limit: int = Query(30, ge=1, le=500)) -> str:
        """The recent runs, newest first, each linking to its report."""
        from html import escape
        from urllib.parse import quote

        rows = []
        for r in _recent(limit):
            href = "runs/" + quote(r["run_id"], safe="")
            rows.append(
                f"<tr><td><a href='{escape(href)}'>{escape(r['run_id'])}</a></td><td>{escape(r['status'])}</td>"
                f"<td>{escape((r['window_start'] or '')[:16])}</td><td>{r['backlog']:,}</td>"
                f"<td>{r['succeeded']:,}</td><td>{r['failed']:,}</td><td>{r['skipped']:,}</td></tr>"
            )
        table = (
            "<table><thead><tr><th>run</th><th>status</th><th>window start</th><th>backlog</th><th>succeeded</th>"
            "<th>failed</th><th>skipped</th></tr></thead><tbody>" + "".join(rows) + "</tbody></table>"
            if rows
            else "<p class='note'>no run yet</p>"
        )
        return _page("Inference run reports", f"<h1>Inference run reports</h1>{table}")

    @app.get("/runs/{run_id:path}")
    def run_report(
        run_id: str,
        dag_id: str = Query(DAG_ID),
        format: str = Query("html", pattern="^(html|json|md|text)$"),  # noqa: A002 - the CLI's flag name
    ):
        """The report of one run, as the CLI prints it."""
        from html import escape

        from inference.errors import InferenceError, RunNotFound
        from inference.report import render

        if dag_id != DAG_ID:
            return HTMLResponse(
                _page("No report", f"<p class='note'>Run reports exist for {escape(DAG_ID)} runs only.</p>")
            )
        try:
            report = _report(run_id)
        except RunNotFound as exc:
            if format != "html":
                raise HTTPException(status_code=404, detail=str(exc)) from None
            body = f"<h1>No report yet</h1><p class='note'>{escape(str(exc))}: plan_run has not recorded it yet.</p>"
            return HTMLResponse(_page("No report", body), status_code=404)
        except InferenceError as exc:  # the database is unreachable, the schema outdated, ...: say what to fix
            raise HTTPException(status_code=503, detail=f"{type(exc).__name__}: {exc}") from None
        if format == "json":
            return JSONResponse(report)
        text = render(report, format)
        return HTMLResponse(text) if format == "html" else PlainTextResponse(text)

    return app


# --- the run note -------------------------------------------------------------------------------------------


def note_at_start(dag_run) -> str | None:
    """The window the run will process (the data interval, the last complete night, or the params' range)."""
    from inference.options import parse_options
    from inference_airflow import tasks

    window = tasks.window(
        {
            "data_interval_start": dag_run.data_interval_start,
            "data_interval_end": dag_run.data_interval_end,
            "dag_run": dag_run,
        }
    )
    try:
        window = parse_options(dict(dag_run.conf or {})).window(window)
    except Exception:  # noqa: BLE001 - plan_run refuses bad params itself; the note just shows the default
        pass
    return f"**Window** {_when(window.start)} .. {_when(window.end)} UTC · running"


def note_at_end(summary: dict | None, state: str, failed_tasks: list[str], undelivered: list[str] = ()) -> str:
    """The run's summary in a few lines of Markdown (at most NOTE_LIMIT characters). `undelivered`: alerts of
    the run that a channel could not deliver (alerts.py records them), shown first: nobody else will say so."""
    warning = [f"**alert NOT delivered**: {', '.join(undelivered[:4])}"] if undelivered else []
    if not summary:
        tasks = ", ".join(failed_tasks[:8]) or "-"
        line = f"**{state}** · failed tasks: {tasks} · see the **Run report** tab and the tasks' logs"
        return "  \n".join([*warning, line])[:NOTE_LIMIT]

    def n(key: str) -> str:
        value = summary.get(key)
        return "-" if value is None else f"{value:,}"

    lines = [
        *warning,
        f"**{summary.get('status', state)}** · window {_when(summary.get('window_start'))} .. "
        f"{_when(summary.get('window_end'))} UTC",
        f"{n('backlog')} tickets: {n('succeeded')} succeeded, {n('failed')} failed, {n('skipped')} skipped",
    ]
    efficiency = summary.get("padding_efficiency")
    lines.append(
        f"{n('tickets_per_second')} tickets/s, {n('tokens_per_second')} tokens/s while the model ran"
        + ("" if efficiency is None else f" · padding {efficiency:.1%}")
    )
    cost = summary.get("cost_per_1000_tickets")
    lines.append(f"{n('device_seconds')} device-seconds" + ("" if cost is None else f" · {cost:.4f} per 1,000 tickets"))
    if summary.get("error"):
        lines.append(f"error: {summary['error']}")
    lines.append("Full report: the **Run report** tab")
    return "  \n".join(lines)[:NOTE_LIMIT]


def _when(value) -> str:
    if value is None:
        return "-"
    text = value if isinstance(value, str) else value.isoformat()
    return text.replace("T", " ")[:16]


def _ours_to_write(dag_run) -> bool:
    """Only for this DAG, and never over a note a person wrote (ours have no user)."""
    if dag_run.dag_id != DAG_ID:
        return False
    note = dag_run.dag_run_note
    return note is None or note.user_id is None


def _finish_summary(dag_run) -> dict | None:
    from airflow.models.xcom import XComModel
    from sqlalchemy.orm import object_session

    session = object_session(dag_run)
    if session is None:
        return None
    query = XComModel.get_many(
        run_id=dag_run.run_id, key="return_value", task_ids="finish_run", dag_ids=dag_run.dag_id, limit=1
    )
    row = session.scalars(query).first()
    value = XComModel.deserialize_value(row) if row is not None else None
    return value if isinstance(value, dict) else None


def _undelivered(dag_run) -> list[str]:
    """Alerts of this run that a channel could not deliver: `email (SSLError) for load_results`."""
    from airflow.models.xcom import XComModel
    from sqlalchemy.orm import object_session

    from inference_airflow.alerts import ALERT_KEY

    session = object_session(dag_run)
    if session is None:
        return []
    out = []
    for row in session.scalars(XComModel.get_many(run_id=dag_run.run_id, key=ALERT_KEY, dag_ids=dag_run.dag_id)):
        record = XComModel.deserialize_value(row)
        where = row.task_id if row.map_index < 0 else f"{row.task_id}[{row.map_index}]"
        for failure in (record or {}).get("failed") or [] if isinstance(record, dict) else []:
            out.append(f"{failure.get('channel')} ({failure.get('error_class')}) for {where}")
    return out


class RunNotes:
    """Listener: the run note at start (the window) and at the end (the summary).

    In the scheduler the run is bound to the scheduler's session and the note joins its transaction (a session of
    our own would wait on the scheduler's lock on the run's row). A run no session holds (`airflow dags test`)
    is written through a session of our own."""

    @hookimpl
    def on_dag_run_running(self, dag_run, msg: str) -> None:
        self._write(dag_run, note_at_start)

    @hookimpl
    def on_dag_run_success(self, dag_run, msg: str) -> None:
        self._write(dag_run, lambda run: note_at_end(_finish_summary(run), "succeeded", [], _undelivered(run)))

    @hookimpl
    def on_dag_run_failed(self, dag_run, msg: str) -> None:
        def note(run) -> str:
            from sqlalchemy.orm import object_session

            tis = run.get_task_instances(state=["failed", "upstream_failed"], session=object_session(run))
            failed = [ti.task_id if ti.map_index < 0 else f"{ti.task_id}[{ti.map_index}]" for ti in tis]
            return note_at_end(_finish_summary(run), "failed", failed, _undelivered(run))

        self._write(dag_run, note)

    @staticmethod
    def _write(dag_run, make) -> None:
        try:
            if getattr(dag_run, "dag_id", None) != DAG_ID:
                return
            if _session_of(dag_run) is not None or not hasattr(dag_run, "_sa_instance_state"):
                if _ours_to_write(dag_run):
                    dag_run.note = make(dag_run)
                return
            import sqlalchemy as sa
            from airflow.models.dagrun import DagRun
            from airflow.utils.session import create_session

            with create_session() as session:
                run = session.scalar(
                    sa.select(DagRun).where(DagRun.dag_id == dag_run.dag_id, DagRun.run_id == dag_run.run_id)
                )
                if run is not None and _ours_to_write(run):
                    run.note = make(run)
        except Exception:  # noqa: BLE001 - a note must never disturb the scheduler
            log.warning("could not write the run note of %s", getattr(dag_run, "run_id", "?"), exc_info=True)


def _session_of(obj):
    from sqlalchemy.orm import object_session

    try:
        return object_session(obj)
    except Exception:  # noqa: BLE001 - not a mapped object (tests pass plain objects)
        return None


class InferenceReportPlugin(AirflowPlugin):
    name = "inference_report"
    fastapi_apps = [{"app": create_app(), "url_prefix": URL_PREFIX, "name": "Ticket inference run reports"}]
    external_views = [
        {
            "name": "Run report",
            "href": URL_PREFIX.lstrip("/") + "/runs/{RUN_ID}?dag_id={DAG_ID}",
            "destination": "dag_run",
            "url_route": "inference-run-report",
        },
        {
            "name": "Inference reports",
            "href": URL_PREFIX.lstrip("/") + "/",
            "destination": "nav",
            "category": "browse",
            "url_route": "inference-reports",
        },
    ]
    listeners = [RunNotes()]
