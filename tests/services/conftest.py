"""A real distributed Airflow, run the way the reference deployment (docker-compose.yml) runs it: separate
scheduler, dag-processor, API server and triggerer processes, the CeleryExecutor with the Redis broker on
127.0.0.1:6379 (keys prefixed per session), results and metadata in a fresh PostgreSQL database, and two
Celery workers under different names: `cpu-worker` on the `default` queue and `gpu-worker` on the GPU
queue (routing.GPU_QUEUE), as a CPU node and a GPU node would. Once per session, all on 127.0.0.1.
Workers report their names through [core] hostname_callable, so the metadata DB records which one ran
each task instance (task_instance.hostname).

What the session sets up before the components start (they read their environment at start):
- a fresh metadata database and a fresh tickets database (CREATE DATABASE via pg_admin_url, dropped at the
  end; databases of earlier sessions whose pytest is gone are dropped too); tickets seeded with the CLI
  (`python -m inference --db URL seed ...`) for fixed past dates;
- a snapshot of inference/, dags/ and plugins/ that Airflow runs (PYTHONPATH, dags and plugins folders),
  as the Docker image bakes the library: the working tree is edited all the time, and a task that imports
  newer code than its run was planned with fails (ModelChanged);
- alert receivers (aiosmtpd; one HTTP server for the JSON webhook and the Slack incoming webhook) and the
  connections and INFERENCE_ALERT_* variables that point every channel at them;
- the simple auth manager with a known user and password; the pool `gpu` (1 slot);
- airflow_local_settings.py: a cluster policy that gives the task instances of runs whose ID starts with
  NO_RETRY_PREFIX no retries (the DAG's retries=2, a minute apart, would make a test of a killed task wait
  minutes for its alert), and a preload of torch and transformers in the scheduler (see LOCAL_SETTINGS).

Runs that a test only waits for are triggered together as soon as Airflow is up (PRELAUNCHED scenarios) and
tests that start their own runs go first, so the runs overlap: on two cores a run takes ~40 s or more.

Teardown kills every process group the session started and every process that still carries this
session's AIRFLOW_HOME in its environment (task runners make process groups of their own), also when a
test failed or the session was interrupted (SIGINT, SIGTERM); component and task logs are attached to the
report of a failing test.
"""

from __future__ import annotations

import atexit
import datetime as dt
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent  # the venv's bin: `airflow`, and `python` for the CLI
DAG_ID = "ticket_batch_inference"
USER, PASSWORD = "operator", "op-" + secrets.token_urlsafe(9)
COMPONENTS = ("scheduler", "dag-processor", "api-server", "triggerer")
# Celery workers: name -> (queue, concurrency). The GPU queue and pool are the routing defaults.
WORKERS = {"cpu-worker": ("default", 4), "gpu-worker": ("gpu", 1)}
NO_RETRY_PREFIX = "noretry__"
CHUNK_SIZE = 16  # INFERENCE_CHUNK_SIZE for the whole session: infer_shard commits every 16 tickets
ALERT_TO = "oncall@example.test"
TEXT_CANARY = "CANARYTEXT9f3e"

# Tests use fixed past dates (the DAG starts 2026-01-01) and seed their own tickets with the CLI. Unpausing
# the DAG creates one scheduled run for the latest complete interval (yesterday): the tests seed nothing near
# it and ignore that run.

LOCAL_SETTINGS = f'''
"""Test-only Airflow local settings (see tests/services/conftest.py)."""

import sys


def task_instance_mutation_hook(task_instance, dag_run=None):
    """Cluster policy: task instances of runs named {NO_RETRY_PREFIX}* get no retries."""
    if str(getattr(task_instance, "run_id", "") or "").startswith("{NO_RETRY_PREFIX}"):
        task_instance.max_tries = 0


if sys.argv[1:3] == ["celery", "worker"]:
    # Preload the heavy third-party modules in the Celery workers: their pool processes, and the task
    # processes they fork, start from the worker's main process, so each task skips ~3 s of imports on
    # this 2-core machine. The library itself is still imported per task.
    import numpy, psycopg2, sqlalchemy, tokenizers, torch  # noqa: E401, F401
    from transformers import AutoModel, AutoTokenizer  # noqa: F401
'''


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# --- alert receivers -------------------------------------------------------------------------------------


@dataclass
class Received:
    channel: str  # email, slack, webhook
    body: bytes
    meta: dict = field(default_factory=dict)

    def text(self) -> str:
        return self.body.decode("utf-8", "replace")


class Receivers:
    """aiosmtpd for e-mail; one HTTP server for the JSON webhook (/webhook) and Slack (/slack/...)."""

    def __init__(self):
        self.messages: list[Received] = []
        self.lock = threading.Lock()
        self.smtp_port = _free_port()
        self._smtp = None
        self._http = None

    def add(self, msg: Received) -> None:
        with self.lock:
            self.messages.append(msg)

    def all(self, channel: str | None = None) -> list[Received]:
        with self.lock:
            return [m for m in self.messages if channel in (None, m.channel)]

    def start(self) -> None:
        from aiosmtpd.controller import Controller

        receivers = self

        class SmtpHandler:
            async def handle_DATA(self, server, session, envelope):  # noqa: N802 - aiosmtpd's name
                receivers.add(
                    Received(
                        "email",
                        envelope.original_content or envelope.content,
                        {"from": envelope.mail_from, "to": list(envelope.rcpt_tos)},
                    )
                )
                return "250 Message accepted for delivery"

        self._smtp = Controller(SmtpHandler(), hostname="127.0.0.1", port=self.smtp_port)
        self._smtp.start()

        class HttpHandler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 - http.server's name
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                channel = "slack" if self.path.startswith("/slack/") else "webhook"
                receivers.add(Received(channel, body, {"path": self.path, "type": self.headers.get("Content-Type")}))
                self.send_response(200)
                self.send_header("Content-Type", "text/plain")
                self.end_headers()
                self.wfile.write(b"ok")  # what Slack answers

            def log_message(self, *args):
                pass

        self._http = ThreadingHTTPServer(("127.0.0.1", 0), HttpHandler)
        threading.Thread(target=self._http.serve_forever, daemon=True).start()
        self.http_port = self._http.server_port

    def stop(self) -> None:
        if self._http is not None:
            self._http.shutdown()
            self._http.server_close()
        if self._smtp is not None:
            self._smtp.stop()

    def env(self) -> dict[str, str]:
        """What Airflow needs to send alerts to these receivers (all three channels)."""
        smtp = {
            "conn_type": "smtp",
            "host": "127.0.0.1",
            "port": self.smtp_port,
            "extra": {
                "disable_tls": True,
                "disable_ssl": True,
                "from_email": "airflow@example.test",
                "timeout": 10,
                "retry_limit": 0,
            },
        }
        slack = {
            "conn_type": "slackwebhook",
            "host": f"http://127.0.0.1:{self.http_port}/slack",
            "password": "T0TEST/B0TEST/xxxxxxxxxxxxxxxxxxxxxxxx",
        }
        return {
            "INFERENCE_ALERT_CHANNELS": "email,slack,webhook",
            "INFERENCE_ALERT_EMAIL_TO": ALERT_TO,
            "INFERENCE_ALERT_WEBHOOK_URL": f"http://127.0.0.1:{self.http_port}/webhook",
            "AIRFLOW_CONN_SMTP_DEFAULT": json.dumps(smtp),
            "AIRFLOW_CONN_SLACK_WEBHOOK_DEFAULT": json.dumps(slack),
        }


@pytest.fixture(scope="session")
def receivers():
    r = Receivers()
    r.start()
    yield r
    r.stop()


# --- the Airflow service ---------------------------------------------------------------------------------


WORKER_IDENTITY = '''
"""Test-only [core] hostname_callable: the Celery worker's name (SVC_WORKER_NAME), else the host name."""

import os
import socket


def hostname():
    return os.environ.get("SVC_WORKER_NAME") or socket.getfqdn()
'''


class AirflowError(AssertionError):
    pass


@dataclass
class AirflowService:
    home: Path
    env: dict[str, str]
    port: int
    tickets_url: str  # SQLAlchemy URL of the tickets database
    meta_url: str = ""  # SQLAlchemy URL of the metadata database
    workers: dict = field(default_factory=lambda: dict(WORKERS))  # Celery worker name -> (queue, concurrency)
    procs: dict[str, subprocess.Popen] = field(default_factory=dict)
    token: str = ""
    test_runs: list[str] = field(default_factory=list)  # runs the current test touched: logs on failure
    no_retry_prefix: str = NO_RETRY_PREFIX
    login_user: tuple[str, str] = (USER, PASSWORD)
    code: Path | None = None  # the snapshot of inference/, dags/ and plugins/ that Airflow runs
    _client: object = None
    chunk_size: int = CHUNK_SIZE

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    # processes

    def start(self, name: str, *args: str, env: dict[str, str] | None = None) -> None:
        out = open(self.home / f"{name}.log", "ab")  # noqa: SIM115 - closed with the process
        self.procs[name] = subprocess.Popen(
            [str(BIN / "airflow"), *args],
            env={**self.env, **(env or {})},
            cwd=self.home,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group (and session), killed as a whole
        )
        out.close()

    def check_alive(self) -> None:
        for name, proc in self.procs.items():
            if proc.poll() is not None:
                raise AirflowError(f"airflow {name} exited with {proc.returncode}\n{self.log_tail(name)}")

    def cli(self, *args: str, timeout: float = 120, check: bool = True) -> subprocess.CompletedProcess:
        proc = subprocess.run(
            [str(BIN / "airflow"), *args],
            env=self.env,
            cwd=self.home,
            capture_output=True,
            text=True,
            timeout=timeout,
            start_new_session=True,
        )
        if check and proc.returncode != 0:
            raise AirflowError(
                f"airflow {' '.join(args)} exited {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
            )
        return proc

    def cli_background(self, *args: str) -> subprocess.Popen:
        """An `airflow` CLI command left running; the caller collects it (communicate) and checks it."""
        return subprocess.Popen(
            [str(BIN / "airflow"), *args],
            env=self.env,
            cwd=self.home,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )

    def log_tail(self, name: str, chars: int = 4000) -> str:
        path = self.home / f"{name}.log"
        if not path.exists():
            return f"({path} does not exist)"
        text = path.read_text("utf-8", "replace")
        return f"--- {path} (last {chars} chars) ---\n{text[-chars:]}"

    def task_log_files(self, run_id: str, task_id: str | None = None) -> list[Path]:
        pattern = f"dag_id={DAG_ID}/run_id={run_id}/task_id={task_id or '*'}/**/*.log"
        return sorted((self.home / "logs").glob(pattern))

    def task_logs(self, run_id: str, task_id: str | None = None) -> str:
        """The whole text of the run's task log files (every try, every map index)."""
        return "\n".join(p.read_text("utf-8", "replace") for p in self.task_log_files(run_id, task_id))

    def task_log_tails(self, run_id: str, chars: int = 3000) -> str:
        parts = []
        for path in self.task_log_files(run_id):
            text = path.read_text("utf-8", "replace")
            parts.append(f"--- {path.relative_to(self.home)} ---\n{text[-chars:]}")
        return "\n".join(parts) or f"(no task logs for run {run_id})"

    def report(self) -> str:
        parts = [self.log_tail(name) for name in (*COMPONENTS, *WORKERS)]
        parts += [self.task_log_tails(run_id) for run_id in dict.fromkeys(self.test_runs)]
        return "\n".join(parts)

    # REST API

    def api(self, method: str, path: str, *, auth: bool = True, **kwargs):
        import httpx

        if self._client is None:  # one keep-alive client: polling stays cheap on two cores
            self._client = httpx.Client(base_url=self.base_url, timeout=30)
        headers = dict(kwargs.pop("headers", None) or {})
        if auth:
            headers["Authorization"] = f"Bearer {self.token}"
        return self._client.request(method, path, headers=headers, **kwargs)

    def login(self) -> str:
        r = self.api("POST", "/auth/token", auth=False, json={"username": USER, "password": PASSWORD})
        if r.status_code != 201:
            raise AirflowError(f"POST /auth/token answered {r.status_code}: {r.text}")
        self.token = r.json()["access_token"]
        return self.token

    def trigger(self, conf: dict, *, run_id: str | None = None, logical_date: str | None = None) -> dict:
        """POST a manual run; returns the JSON of the created run (asserts 200)."""
        body = {"logical_date": logical_date, "conf": conf}
        if run_id:
            body["dag_run_id"] = run_id
        r = self.api("POST", f"/api/v2/dags/{DAG_ID}/dagRuns", json=body)
        assert r.status_code == 200, f"trigger answered {r.status_code}: {r.text}"
        run = r.json()
        self.test_runs.append(run["dag_run_id"])
        return run

    def run(self, run_id: str) -> dict:
        r = self.api("GET", f"/api/v2/dags/{DAG_ID}/dagRuns/{run_id}")
        assert r.status_code == 200, f"GET run {run_id}: {r.status_code} {r.text}"
        return r.json()

    def wait_run(self, run_id: str, timeout: float = 300, states=("success", "failed")) -> dict:
        self.test_runs.append(run_id)
        deadline = time.monotonic() + timeout
        while True:
            run = self.run(run_id)
            if run["state"] in states:
                return run
            self.check_alive()
            if time.monotonic() > deadline:
                raise AirflowError(
                    f"run {run_id} is still {run['state']} after {timeout:.0f}s; tasks: {self.task_states(run_id)}"
                )
            time.sleep(2)

    def task_instances(self, run_id: str) -> list[dict]:
        r = self.api("GET", f"/api/v2/dags/{DAG_ID}/dagRuns/{run_id}/taskInstances", params={"limit": 1000})
        assert r.status_code == 200, r.text
        return r.json()["task_instances"]

    def task_states(self, run_id: str) -> dict[str, str | None]:
        out = {}
        for ti in self.task_instances(run_id):
            key = ti["task_id"] if ti["map_index"] in (-1, None) else f"{ti['task_id']}[{ti['map_index']}]"
            out[key] = ti["state"]
        return out

    # tickets database

    def engine(self):
        from inference.store.db import make_engine

        return make_engine(self.tickets_url)


def _create_database(admin_url: str, name: str) -> str:
    import sqlalchemy as sa

    admin = sa.create_engine(admin_url, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
    finally:
        admin.dispose()
    return sa.make_url(admin_url).set(database=name).render_as_string(hide_password=False)


def _drop_database(admin_url: str, name: str) -> None:
    import sqlalchemy as sa

    admin = sa.create_engine(admin_url, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    finally:
        admin.dispose()


def _snapshot_code(dest: Path) -> Path:
    """The library, DAG and plugins as of the session's start, as an image bakes them: others edit the working
    tree all the time, and a task importing newer code than its run was planned with fails (ModelChanged)."""
    import shutil

    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for name in ("inference", "dags", "plugins"):
        shutil.copytree(ROOT / name, dest / name, ignore=ignore)
    return dest


def _drop_stale_databases(admin_url: str) -> None:
    """Databases of earlier sessions whose pytest process is gone (killed before its teardown)."""
    import psutil
    import sqlalchemy as sa

    admin = sa.create_engine(admin_url, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            names = conn.scalars(sa.text("SELECT datname FROM pg_database WHERE datname LIKE 'svc\\_%'")).all()
    finally:
        admin.dispose()
    for name in names:
        parts = name.split("_")
        if len(parts) == 4 and parts[2].isdigit() and not psutil.pid_exists(int(parts[2])):
            _drop_database(admin_url, name)


def _sigterm_to_interrupt(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")


def _ours(proc, home: str) -> bool:
    try:
        return proc.environ().get("AIRFLOW_HOME") == home
    except Exception:  # noqa: BLE001 - gone, zombie or not readable
        return False


def kill_everything(svc: AirflowService) -> list[str]:
    """SIGTERM then SIGKILL to every process group started, and to every process that still has this
    session's AIRFLOW_HOME (task runners and their supervisors set up process groups of their own).
    Returns a description of what had to be killed after the grace period."""
    import psutil

    home = str(svc.home)
    groups = set()
    for proc in svc.procs.values():
        groups.add(proc.pid)  # start_new_session: pgid == pid
        try:
            for child in psutil.Process(proc.pid).children(recursive=True):
                groups.add(os.getpgid(child.pid))
        except (psutil.Error, ProcessLookupError):
            pass
    for pgid in groups:
        try:
            os.killpg(pgid, signal.SIGTERM)
        except (ProcessLookupError, PermissionError):
            pass
    deadline = time.monotonic() + 20
    for proc in svc.procs.values():
        try:
            proc.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            pass
    leftovers = []
    for _ in range(3):
        for pgid in groups:
            try:
                os.killpg(pgid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        strays = [p for p in psutil.process_iter(["pid", "name"]) if p.pid != os.getpid() and _ours(p, home)]
        if not strays:
            break
        for p in strays:
            leftovers.append(f"{p.pid} {' '.join(p.cmdline()[:4]) if p.is_running() else p.info['name']}")
            try:
                p.kill()
            except psutil.Error:
                pass
        psutil.wait_procs(strays, timeout=5)
    for proc in svc.procs.values():
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)
    return leftovers


@pytest.fixture(scope="session")
def airflow(pg_admin_url, receivers, tmp_path_factory):
    """The running Airflow: API logged in, DAG parsed and unpaused, tickets seeded. Torn down at the end."""
    import importlib.util

    import sqlalchemy as sa

    if importlib.util.find_spec("asyncpg") is None:
        pytest.fail(
            "Airflow 3 on a PostgreSQL metadata database needs the asyncpg driver (its async engine), which the "
            "project's airflow extra does not pull in: pip install asyncpg (or apache-airflow[postgres])"
        )
    started = time.monotonic()
    _drop_stale_databases(pg_admin_url)
    home = tmp_path_factory.mktemp("airflow-home")
    suffix = f"{os.getpid()}_{uuid.uuid4().hex[:8]}"
    meta_db, tickets_db = f"svc_airflow_{suffix}", f"svc_tickets_{suffix}"
    meta_url = _create_database(pg_admin_url, meta_db)
    dbs = [meta_db]
    svc = None
    try:
        tickets_url = _create_database(pg_admin_url, tickets_db)
        dbs.append(tickets_db)
        t = sa.make_url(tickets_url)
        (home / "config").mkdir()
        (home / "config" / "airflow_local_settings.py").write_text(LOCAL_SETTINGS)
        passwords = home / "passwords.json"
        passwords.write_text(json.dumps({USER: PASSWORD}))
        code = _snapshot_code(home / "code")
        (code / "svc_worker_identity.py").write_text(WORKER_IDENTITY)
        port = _free_port()
        meta_sa_url = sa.make_url(meta_url).set(drivername="postgresql+psycopg2").render_as_string(hide_password=False)
        base = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "INFERENCE_", "TICKETS_"))}
        env = {
            **base,
            "PATH": f"{BIN}{os.pathsep}{base.get('PATH', '')}",
            "AIRFLOW_HOME": str(home),
            "AIRFLOW__CORE__EXECUTOR": "CeleryExecutor",
            "AIRFLOW__CORE__PARALLELISM": "4",
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": meta_sa_url,
            "AIRFLOW__CELERY__BROKER_URL": "redis://127.0.0.1:6379/0",
            # Keys of this session only: another session's workers on the same Redis never take our tasks.
            "AIRFLOW__CELERY_BROKER_TRANSPORT_OPTIONS__GLOBAL_KEYPREFIX": f"svc_{suffix}:",
            "AIRFLOW__CELERY_BROKER_TRANSPORT_OPTIONS__VISIBILITY_TIMEOUT": "86400",
            "AIRFLOW__CELERY__RESULT_BACKEND": "db+" + meta_sa_url,
            "AIRFLOW__CELERY__SYNC_PARALLELISM": "1",
            "AIRFLOW__CORE__HOSTNAME_CALLABLE": "svc_worker_identity.hostname",
            "AIRFLOW__OPERATORS__DEFAULT_QUEUE": "default",
            "PYTHONPATH": str(code),  # before the editable install of the library: the snapshot's inference/
            "AIRFLOW__CORE__DAGS_FOLDER": str(code / "dags"),
            "AIRFLOW__CORE__PLUGINS_FOLDER": str(code / "plugins"),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__AUTH_MANAGER": "airflow.api_fastapi.auth.managers.simple.simple_auth_manager.SimpleAuthManager",
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": f"{USER}:admin",
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(passwords),
            "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"http://127.0.0.1:{port}/execution/",
            "AIRFLOW__API__BASE_URL": f"http://127.0.0.1:{port}",
            "AIRFLOW__API__HOST": "127.0.0.1",
            "AIRFLOW__API__PORT": str(port),
            "AIRFLOW__API__WORKERS": "1",
            "AIRFLOW__API__SECRET_KEY": secrets.token_hex(16),
            "AIRFLOW__API_AUTH__JWT_SECRET": secrets.token_hex(32),
            "AIRFLOW__SCHEDULER__ENABLE_HEALTH_CHECK": "False",
            # Parsed once at start; re-parsing every 30 s would only cost CPU (and pick up edits mid-session).
            "AIRFLOW__DAG_PROCESSOR__MIN_FILE_PROCESS_INTERVAL": "600",
            "AIRFLOW__DAG_PROCESSOR__PARSING_PROCESSES": "1",
            "AIRFLOW__LOGGING__LOGGING_LEVEL": "INFO",
            "AIRFLOW_CONN_TICKETS_DB": f"postgresql://{t.username}@{t.host}:{t.port}/{t.database}",
            # Not the tickets DB: proves the connection is what the tasks use.
            "TICKETS_DB_URL": "postgresql+psycopg2://nobody@127.0.0.1:1/not-this-one",
            "INFERENCE_DEVICE": "cpu",
            "INFERENCE_CHUNK_SIZE": str(CHUNK_SIZE),
            # Zero-shot category head: with the bundled few-shot examples every model task first embeds
            # them (~20 s of CPU here), and these tests are about orchestration, not about categories.
            "INFERENCE_FEWSHOT": "none",
            "TOKENIZERS_PARALLELISM": "false",
            **receivers.env(),
        }
        svc = AirflowService(home=home, env=env, port=port, tickets_url=tickets_url, meta_url=meta_sa_url, code=code)
        _ACTIVE.append(svc)

        phases = [("databases", time.monotonic())]
        seeding = {name: _seed_process(tickets_url, code, *args) for name, args in EARLY_SEEDS.items()}
        migrate = subprocess.run(
            [str(BIN / "airflow"), "db", "migrate"], env=env, cwd=home, capture_output=True, text=True, timeout=300
        )
        if migrate.returncode != 0:
            raise AirflowError(f"airflow db migrate failed:\n{migrate.stdout[-3000:]}\n{migrate.stderr[-3000:]}")
        phases.append(("migrate", time.monotonic()))
        for name in COMPONENTS:
            args = ["api-server", "--port", str(port), "--host", "127.0.0.1", "--workers", "1"]
            svc.start(name, *(args if name == "api-server" else [name]))
        for name, (queue, concurrency) in WORKERS.items():
            # --skip-serve-logs: both workers share this host (the log server port) and this log folder.
            args = ["celery", "worker", "--queues", queue, "--concurrency", str(concurrency), "--skip-serve-logs"]
            svc.start(name, *args, "--celery-hostname", f"{name}@{suffix}", env={"SVC_WORKER_NAME": name})
        svc.cli("pools", "set", "gpu", "1", "GPU slots for model tasks")
        phases.append(("pool", time.monotonic()))
        for name, proc in seeding.items():
            out, _ = proc.communicate(timeout=120)
            if proc.returncode != 0:
                raise AirflowError(f"seeding the {name} tickets failed:\n{out}")
        _prepare_alert_tickets(tickets_url)
        phases.append(("seeds", time.monotonic()))
        _wait_ready(svc, timeout=180, phases=phases)
        previous_sigterm = signal.getsignal(signal.SIGTERM)
        if previous_sigterm is signal.SIG_DFL:  # `kill <pytest>` still tears Airflow down (finalizers run)
            signal.signal(signal.SIGTERM, _sigterm_to_interrupt)
        steps = ", ".join(f"{name} {t - started:.1f}s" for name, t in phases)
        print(f"\n[services] Airflow up at {svc.base_url} (home {home}): {steps}")
        yield svc
    except BaseException:
        if svc is not None:
            print("\n[services] Airflow did not come up:\n" + svc.report())
        raise
    finally:
        if svc is not None:
            if svc._client is not None:
                svc._client.close()
            leftovers = kill_everything(svc)
            if svc in _ACTIVE:
                _ACTIVE.remove(svc)
            if leftovers:
                print(f"\n[services] processes still alive after SIGTERM + 20 s, killed: {leftovers}")
        for name in dbs:
            _drop_database(pg_admin_url, name)


def _wait_ready(svc: AirflowService, timeout: float, phases: list) -> None:
    import httpx

    deadline = time.monotonic() + timeout
    health: dict = {}
    while True:  # every component reports healthy
        svc.check_alive()
        try:
            r = httpx.get(svc.base_url + "/api/v2/monitor/health", timeout=5)
            health = r.json() if r.status_code == 200 else {"status_code": r.status_code}
        except httpx.HTTPError as exc:
            health = {"error": type(exc).__name__}
        parts = ("metadatabase", "scheduler", "triggerer", "dag_processor")
        if all((health.get(p) or {}).get("status") == "healthy" for p in parts):
            break
        if time.monotonic() > deadline:
            raise AirflowError(f"Airflow not healthy after {timeout:.0f}s: {health}")
        time.sleep(0.5)
    phases.append(("healthy", time.monotonic()))
    svc.login()
    while True:  # the DAG is parsed (or failed to import: say why at once)
        r = svc.api("GET", f"/api/v2/dags/{DAG_ID}")
        if r.status_code == 200:
            break
        errors = svc.api("GET", "/api/v2/importErrors").json().get("import_errors") or []
        if errors:
            raise AirflowError(f"the DAG folder has import errors: {json.dumps(errors)[:3000]}")
        if time.monotonic() > deadline:
            raise AirflowError(f"DAG {DAG_ID} not parsed after {timeout:.0f}s: {r.status_code} {r.text}")
        time.sleep(0.5)
    phases.append(("parsed", time.monotonic()))
    waiting = set(WORKERS)
    while waiting:  # each Celery worker is connected to the broker and consuming its queue
        svc.check_alive()
        waiting = {n for n in waiting if "ready." not in (svc.home / f"{n}.log").read_text("utf-8", "replace")}
        if waiting and time.monotonic() > deadline:
            raise AirflowError(f"Celery workers {sorted(waiting)} not ready after {timeout:.0f}s")
        time.sleep(0.5)
    phases.append(("workers", time.monotonic()))
    r = svc.api("PATCH", f"/api/v2/dags/{DAG_ID}", params={"update_mask": "is_paused"}, json={"is_paused": False})
    assert r.status_code == 200 and r.json()["is_paused"] is False, f"unpause: {r.status_code} {r.text}"


_ACTIVE: list[AirflowService] = []


@atexit.register
def _kill_on_exit() -> None:  # an interrupted session still leaves nothing behind
    for svc in list(_ACTIVE):
        kill_everything(svc)


def pytest_collection_modifyitems(session, config, items):
    """Tests that start their own runs (they seed in the test) go first, so that their runs queue up for the
    pool `gpu` alongside the prelaunched scenarios instead of after them; the others only wait and check."""
    here = Path(__file__).parent
    mine = [i for i in items if Path(str(i.path)).parent == here]
    if not mine:
        return
    first = [i for i in mine if "seed" in getattr(i, "fixturenames", ())]
    rest = [i for i in mine if i not in first]
    ordered = iter(first + rest)
    items[:] = [next(ordered) if Path(str(i.path)).parent == here else i for i in items]


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    svc = item.funcargs.get("airflow") if hasattr(item, "funcargs") else None
    if rep.failed and isinstance(svc, AirflowService):
        rep.sections.append(("Airflow logs (tails)", svc.report()))


@pytest.fixture(autouse=True)
def _runs_of_this_test(request):
    svc = request.getfixturevalue("airflow") if "airflow" in request.fixturenames else None
    if svc is not None:
        svc.test_runs.clear()
    yield


@pytest.fixture
def seed(airflow):
    """`python -m inference --db URL seed --tickets N --days K --date D --start-id I`, as an operator would."""

    def run(tickets: int, days: int, last: dt.date, start_id: int) -> None:
        _seed(airflow, tickets, days, last, start_id)

    return run


@pytest.fixture
def tickets_engine(airflow):
    engine = airflow.engine()
    yield engine
    engine.dispose()


def unique_run_id(prefix: str) -> str:
    return f"{prefix}{dt.datetime.now(dt.UTC):%Y%m%dT%H%M%S}_{uuid.uuid4().hex[:6]}"


@pytest.fixture
def run_id_for():
    return unique_run_id


@pytest.fixture(scope="session")
def artifacts_dir(tmp_path_factory):
    """Screenshots (pytest keeps the last three sessions' temporary directories)."""
    return tmp_path_factory.mktemp("artifacts")


class TicketsView:
    """Plain reads of the tickets database (the source and our tables)."""

    def __init__(self, engine):
        self.engine = engine

    def window_tickets(self, start: dt.datetime, end: dt.datetime) -> dict[str, tuple[str | None, str | None]]:
        """ticket_id -> (subject, body) of the tickets created or updated in [start, end), as the source reads."""
        import sqlalchemy as sa

        from inference.store.schema import tickets as t

        c = t.c
        in_window = sa.or_(
            sa.and_(c.created_at >= start, c.created_at < end), sa.and_(c.updated_at >= start, c.updated_at < end)
        )
        with self.engine.connect() as conn:
            return {str(r.ticket_id): (r.subject, r.body) for r in conn.execute(sa.select(t).where(in_window))}

    def non_empty(self, rows: dict[str, tuple[str | None, str | None]]) -> set[str]:
        return {tid for tid, (subject, body) in rows.items() if (subject or "").strip() or (body or "").strip()}

    def results(self, ticket_ids=None) -> list:
        import sqlalchemy as sa

        from inference.store.schema import ticket_results as r

        stmt = sa.select(r.c.ticket_id, r.c.run_id, r.c.updated_at, r.c.content_hash, r.c.model_version)
        if ticket_ids is not None:
            stmt = stmt.where(r.c.ticket_id.in_(sorted(ticket_ids)))
        with self.engine.connect() as conn:
            return list(conn.execute(stmt))

    def run_row(self, run_id: str):
        import sqlalchemy as sa

        from inference.store.schema import inference_runs as r

        with self.engine.connect() as conn:
            return conn.execute(sa.select(r).where(r.c.run_id == run_id)).first()

    def runs(self, run_ids) -> dict:
        import sqlalchemy as sa

        from inference.store.schema import inference_runs as r

        with self.engine.connect() as conn:
            return {row.run_id: row for row in conn.execute(sa.select(r).where(r.c.run_id.in_(sorted(run_ids))))}

    def items(self, run_id: str) -> dict[str, tuple[str, str | None, int]]:
        """ticket_id -> (status, reason, attempts)"""
        import sqlalchemy as sa

        from inference.store.schema import inference_run_items as i

        with self.engine.connect() as conn:
            rows = conn.execute(
                sa.select(i.c.ticket_id, i.c.status, i.c.reason, i.c.attempts).where(i.c.run_id == run_id)
            )
            return {r.ticket_id: (r.status, r.reason, r.attempts) for r in rows}

    def ticket_text_contains(self, needle: str) -> int:
        import sqlalchemy as sa

        from inference.store.schema import tickets as t

        with self.engine.connect() as conn:
            stmt = sa.select(sa.func.count()).where(sa.or_(t.c.subject.contains(needle), t.c.body.contains(needle)))
            return conn.scalar(stmt)

    def item_counts(self, run_id: str) -> dict[str, int]:
        import sqlalchemy as sa

        from inference.store.schema import inference_run_items as i

        stmt = sa.select(i.c.status, sa.func.count()).where(i.c.run_id == run_id).group_by(i.c.status)
        with self.engine.connect() as conn:
            return dict(conn.execute(stmt).all())

    def failures(self, run_id: str) -> list:
        import sqlalchemy as sa

        from inference.store.schema import ticket_failures as f

        with self.engine.connect() as conn:
            return list(conn.execute(sa.select(f).where(f.c.run_id == run_id)))


@pytest.fixture
def view(tickets_engine):
    return TicketsView(tickets_engine)


# --- scenarios started as soon as Airflow is up ---------------------------------------------------------
#
# On two cores a DAG run takes ~40 s, most of it task processes starting up. Runs that a test only has to
# wait for are triggered together right after Airflow comes up (for the selected tests only), so they run
# side by side while earlier tests work; each test then waits for its own run and checks it.


@dataclass
class Scenario:
    day: dt.date | None = None
    days: tuple[dt.date, ...] = ()
    run_id: str = ""
    run_ids: list[str] = field(default_factory=list)
    ticket_ids: list[str] = field(default_factory=list)
    extra: dict = field(default_factory=dict)


def _seed_process(url: str, code: Path, tickets: int, days: int, last: dt.date, start_id: int) -> subprocess.Popen:
    """`python -m inference --db URL seed ...`, as an operator seeds a demo backlog."""
    args = ["--tickets", str(tickets), "--days", str(days), "--date", last.isoformat(), "--start-id", str(start_id)]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("INFERENCE_", "TICKETS_"))}
    return subprocess.Popen(
        [str(BIN / "python"), "-m", "inference", "--db", url, "seed", *args],
        cwd=code,
        env={**env, "PYTHONPATH": str(code)},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def _seed(svc: AirflowService, tickets: int, days: int, last: dt.date, start_id: int) -> None:
    proc = _seed_process(svc.tickets_url, svc.code, tickets, days, last, start_id)
    out, _ = proc.communicate(timeout=120)
    if proc.returncode != 0:
        raise AirflowError(f"seed failed:\n{out}")


REST_DAY, ALERT_DAY = dt.date(2026, 6, 10), dt.date(2026, 6, 20)
BACKFILL_DAYS = (dt.date(2026, 6, 1), dt.date(2026, 6, 2), dt.date(2026, 6, 3))
# The prelaunched scenarios' tickets: seeded while `airflow db migrate` runs. (tickets, days, last date, first ID)
EARLY_SEEDS = {
    "backfill": (60, 3, BACKFILL_DAYS[-1], 1),
    "rest": (20, 1, REST_DAY, 1001),
    "alert": (40, 1, ALERT_DAY, 3001),
}


ALERT_TAMPERED = ("3003", "3011", "3019", "3027", "3035")


def _prepare_alert_tickets(url: str) -> None:
    """The alert scenario's data, set up before any task runs (DDL on inference_staging would wait for the
    locks of running tasks): the canary in the text of tickets 3001..3040, and the trigger that corrupts
    the staged outputs of ALERT_TAMPERED."""
    import sqlalchemy as sa

    engine = sa.create_engine(url)
    try:
        with engine.begin() as conn:
            conn.execute(
                sa.text(
                    "UPDATE tickets SET subject = :c || ' ' || coalesce(subject, ''), "
                    "body = coalesce(body, '') || ' ' || :c WHERE ticket_id BETWEEN 3001 AND 3040"
                ),
                {"c": TEXT_CANARY},
            )
            conn.execute(sa.text("CREATE TABLE svc_tamper (ticket_id text PRIMARY KEY)"))
            conn.execute(sa.text("INSERT INTO svc_tamper VALUES " + ", ".join(f"('{t}')" for t in ALERT_TAMPERED)))
            conn.execute(
                sa.text(
                    """
                    CREATE FUNCTION svc_tamper_staged() RETURNS trigger LANGUAGE plpgsql AS $$
                    BEGIN
                        IF EXISTS (SELECT 1 FROM svc_tamper WHERE ticket_id = NEW.ticket_id) THEN
                            NEW.category := 'tampered';
                        END IF;
                        RETURN NEW;
                    END $$;
                    CREATE TRIGGER svc_tamper_staged BEFORE INSERT OR UPDATE ON inference_staging
                        FOR EACH ROW EXECUTE FUNCTION svc_tamper_staged();
                    """
                )
            )
    finally:
        engine.dispose()


@pytest.fixture(scope="session")
def rest_scenario(airflow) -> Scenario:
    """30 tickets on 2026-06-10; a run triggered through the REST API for exactly that window."""
    day = REST_DAY
    run = airflow.trigger(
        {"window_start": day.isoformat(), "window_end": day.isoformat(), "reprocess": False},
        run_id=unique_run_id("rest__"),
    )
    return Scenario(day=day, run_id=run["dag_run_id"], extra={"created": run})


@pytest.fixture(scope="session")
def unknown_option_scenario(airflow) -> Scenario:
    """A run whose conf carries a key the params do not define: the REST API accepts it, plan must not.
    No retries for this run (NO_RETRY_PREFIX): see test_invalid_params for why that matters."""
    run = airflow.trigger({"surprise": 1}, run_id=unique_run_id(NO_RETRY_PREFIX + "unknown__"))
    return Scenario(run_id=run["dag_run_id"], extra={"created": run})


@pytest.fixture(scope="session")
def alert_scenario(airflow) -> Scenario:
    """40 tickets on 2026-06-20, all carrying TEXT_CANARY in their text. A PostgreSQL trigger corrupts the
    staged category of five of them (as a broken storage layer or a bad model build would), so the real
    validation in load_results rejects them on every attempt, they are dead-lettered, and finish_run fails
    the run for its failure rate (5/40 > 5%): the task-level alert fires on every channel."""
    day = ALERT_DAY
    run = airflow.trigger(
        {"window_start": day.isoformat(), "window_end": day.isoformat()}, run_id=unique_run_id("alert__")
    )
    return Scenario(day=day, run_id=run["dag_run_id"], ticket_ids=list(ALERT_TAMPERED), extra={"canary": TEXT_CANARY})


@pytest.fixture(scope="session")
def backfill_scenario(airflow) -> Scenario:
    """60 tickets over 2026-06-01..03; `airflow backfill create` for those three logical dates."""
    # Logical dates are the windows' starts, D 02:00: `--to-date 2026-06-03` (midnight) would stop at 06-02.
    dates = [
        "--from-date",
        BACKFILL_DAYS[0].isoformat(),
        "--to-date",
        f"{BACKFILL_DAYS[-1].isoformat()}T02:00:00+00:00",
    ]
    common = ["backfill", "create", "--dag-id", DAG_ID, *dates]
    # One run at a time: a ticket created before a cutoff and edited after it is in two windows; the later
    # run must see it done (concurrent runs would both compute it, see test_backfill).
    # In the background: the CLI takes a while on two busy cores, and nothing else has to wait for it.
    cli = airflow.cli_background(*common, "--reprocess-behavior", "none", "--max-active-runs", "1")
    return Scenario(days=BACKFILL_DAYS, extra={"dates": dates, "cli": cli})


PRELAUNCHED = ("alert_scenario", "rest_scenario", "unknown_option_scenario", "backfill_scenario")


@pytest.fixture(scope="session", autouse=True)
def _prelaunch(request):
    """Starts the scenarios the selected tests use, all at once, before the first test runs."""
    wanted = {name for item in request.session.items for name in getattr(item, "fixturenames", ())}
    took = []
    for name in PRELAUNCHED:
        if name in wanted:
            started = time.monotonic()
            request.getfixturevalue(name)
            took.append(f"{name} {time.monotonic() - started:.1f}s")
    print(f"\n[services] scenarios started: {', '.join(took)}")
