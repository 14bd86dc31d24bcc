"""A real distributed Airflow for the service tests, run the way the reference deployment
(docker-compose.yml) runs it: separate scheduler, dag-processor, API server and triggerer processes, the
CeleryExecutor with a Redis broker the session started itself (tests/support/redis.py), results and metadata
in a fresh PostgreSQL database, and two Celery workers under different names: `cpu-worker` on the `default`
queue and `gpu-worker` on the GPU queue (routing.GPU_QUEUE), as a CPU node and a GPU node would. All on
127.0.0.1, every port picked free: two sessions on one machine never meet (own databases, AIRFLOW_HOME,
broker, API and log-server ports, worker names). Workers report their names through [core]
hostname_callable, so the metadata DB records which one ran each task instance (task_instance.hostname).

What `running_airflow` sets up before the components start (they read their environment at start):
- a fresh metadata database and a fresh tickets database (dropped at the end; databases of earlier sessions
  whose pytest is gone are dropped too);
- a snapshot of inference/, dags/ and plugins/ that Airflow runs (PYTHONPATH, dags and plugins folders),
  as the Docker image bakes the library: the working tree is edited all the time, and a task that imports
  newer code than its run was planned with fails (ModelChanged);
- the simple auth manager with a known user and password; the pool `gpu` (1 slot);
- airflow_local_settings.py: a cluster policy that gives the task instances of runs whose ID starts with
  NO_RETRY_PREFIX no retries (the DAG's retries=2, a minute apart, would make a test of a killed task wait
  minutes for its alert), and a preload of torch and transformers in the Celery workers (see LOCAL_SETTINGS).

Teardown kills every process group it started and every process that still carries this session's
AIRFLOW_HOME in its environment (task runners make process groups of their own), also when the session was
interrupted (SIGINT, SIGTERM, atexit).
"""

from __future__ import annotations

import atexit
import contextlib
import datetime as dt
import importlib.util
import json
import os
import secrets
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from inference.bench.scratchdb import create_database, drop_database, unique_name
from tests.support import ROOT
from tests.support.ports import free_port

BIN = Path(sys.executable).parent  # the venv's bin: `airflow`, and `python` for the CLI
DAG_ID = "ticket_batch_inference"
USER, PASSWORD = "operator", "op-" + secrets.token_urlsafe(9)
COMPONENTS = ("scheduler", "dag-processor", "api-server", "triggerer")
# Celery workers: name -> (queue, concurrency). The GPU queue and pool are the routing defaults.
WORKERS = {"cpu-worker": ("default", 4), "gpu-worker": ("gpu", 1)}
# Environment of each worker beyond the deployment's: the GPU node commits infer_shard's chunks in a writer
# process (INFERENCE_WRITER=process, as the sizing guide suggests for GPU nodes), so the service tests run that
# mode under a real Celery worker and task supervisor; every in-process DAG test runs the default thread.
WORKER_ENV = {"gpu-worker": {"INFERENCE_WRITER": "process"}}
NO_RETRY_PREFIX = "noretry__"
CHUNK_SIZE = 16  # INFERENCE_CHUNK_SIZE for the whole session: infer_shard commits every 16 tickets


LOCAL_SETTINGS = f'''
"""Test-only Airflow local settings (see tests/support/airflow_services.py)."""

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
            # 120 s: with two sessions' Airflows on two busy cores, the first trigger (the API server
            # loading the serialized DAG) was seen taking over 30 s.
            self._client = httpx.Client(base_url=self.base_url, timeout=120)
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

    def seed(self, tickets: int, days: int, last: dt.date, start_id: int) -> None:
        """`python -m inference --db URL seed ...` into the tickets database, as an operator would."""
        proc = seed_process(self.tickets_url, self.code, tickets, days, last, start_id)
        out, _ = proc.communicate(timeout=120)
        if proc.returncode != 0:
            raise AirflowError(f"seed failed:\n{out}")


def seed_process(url: str, code: Path, tickets: int, days: int, last: dt.date, start_id: int) -> subprocess.Popen:
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


def snapshot_code(dest: Path) -> Path:
    """The library, DAG and plugins as of the session's start, as an image bakes them: others edit the working
    tree all the time, and a task importing newer code than its run was planned with fails (ModelChanged)."""
    import shutil

    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for name in ("inference", "dags", "plugins"):
        shutil.copytree(ROOT / name, dest / name, ignore=ignore)
    return dest


def drop_stale_databases(admin_url: str) -> None:
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
            drop_database(admin_url, name)


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


def wait_ready(svc: AirflowService, timeout: float, phases: list) -> None:
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


def unique_run_id(prefix: str) -> str:
    return f"{prefix}{dt.datetime.now(dt.UTC):%Y%m%dT%H%M%S}_{uuid.uuid4().hex[:6]}"


def _environment(home: Path, code: Path, port: int, meta_url: str, tickets_url: str, broker_url: str, suffix: str):
    import sqlalchemy as sa

    t = sa.make_url(tickets_url)
    passwords = home / "passwords.json"
    passwords.write_text(json.dumps({USER: PASSWORD}))
    base = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "INFERENCE_", "TICKETS_"))}
    return {
        **base,
        "PATH": f"{BIN}{os.pathsep}{base.get('PATH', '')}",
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__EXECUTOR": "CeleryExecutor",
        "AIRFLOW__CORE__PARALLELISM": "4",
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": meta_url,
        "AIRFLOW__CELERY__BROKER_URL": broker_url,
        # The broker is the session's own; the key prefix keeps that true even on a shared Redis.
        "AIRFLOW__CELERY_BROKER_TRANSPORT_OPTIONS__GLOBAL_KEYPREFIX": f"svc_{suffix}:",
        "AIRFLOW__CELERY_BROKER_TRANSPORT_OPTIONS__VISIBILITY_TIMEOUT": "86400",
        "AIRFLOW__CELERY__RESULT_BACKEND": "db+" + meta_url,
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
        # The log servers' default fixed ports (8793, 8794) would collide with another session's.
        "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": str(free_port()),
        "AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT": str(free_port()),
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
    }


@contextlib.contextmanager
def running_airflow(
    admin_url: str,
    broker_url: str,
    home: Path,
    *,
    extra_env: dict[str, str] | None = None,
    setup: Callable[[AirflowService], Callable[[], None]] | None = None,
) -> Iterator[AirflowService]:
    """The running Airflow for the block: API logged in, DAG parsed and unpaused; torn down afterwards.

    `setup(svc)` is called once the databases and the code snapshot exist, before `airflow db migrate`
    (seeding can overlap the migration); what it returns is called once the components are started, before
    waiting for them to be healthy."""
    if importlib.util.find_spec("asyncpg") is None:
        raise AirflowError(
            "Airflow 3 on a PostgreSQL metadata database needs the asyncpg driver (its async engine), which the "
            "project's airflow extra does not pull in: pip install asyncpg (or apache-airflow[postgres])"
        )
    import sqlalchemy as sa

    started = time.monotonic()
    drop_stale_databases(admin_url)
    meta_db = unique_name("svc_airflow")
    suffix = meta_db.removeprefix("svc_airflow_")
    tickets_db = f"svc_tickets_{suffix}"
    meta_url = create_database(admin_url, meta_db)
    dbs = [meta_db]
    svc = None
    up = False
    try:
        tickets_url = create_database(admin_url, tickets_db)
        dbs.append(tickets_db)
        (home / "config").mkdir()
        (home / "config" / "airflow_local_settings.py").write_text(LOCAL_SETTINGS)
        code = snapshot_code(home / "code")
        (code / "svc_worker_identity.py").write_text(WORKER_IDENTITY)
        port = free_port()
        meta_sa_url = sa.make_url(meta_url).set(drivername="postgresql+psycopg2").render_as_string(hide_password=False)
        env = _environment(home, code, port, meta_sa_url, tickets_url, broker_url, suffix) | (extra_env or {})
        svc = AirflowService(home=home, env=env, port=port, tickets_url=tickets_url, meta_url=meta_sa_url, code=code)
        _ACTIVE.append(svc)

        phases = [("databases", time.monotonic())]
        finish_setup = setup(svc) if setup is not None else None
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
            svc.start(
                name,
                *args,
                "--celery-hostname",
                f"{name}@{suffix}",
                env={"SVC_WORKER_NAME": name, **WORKER_ENV.get(name, {})},
            )
        svc.cli("pools", "set", "gpu", "1", "GPU slots for model tasks")
        phases.append(("pool", time.monotonic()))
        if finish_setup is not None:
            finish_setup()
            phases.append(("setup", time.monotonic()))
        wait_ready(svc, timeout=180, phases=phases)
        if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:  # `kill <pytest>` still tears Airflow down
            signal.signal(signal.SIGTERM, _sigterm_to_interrupt)
        steps = ", ".join(f"{name} {t - started:.1f}s" for name, t in phases)
        print(f"\n[services] Airflow up at {svc.base_url} (home {home}, broker {broker_url}): {steps}")
        up = True
        yield svc
    except BaseException:
        if svc is not None and not up:
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
            drop_database(admin_url, name)
