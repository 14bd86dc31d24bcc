"""The reference deployment (docker-compose.yml), the code and .env.example agree.

Docker cannot run here, so this reads the compose file the way Compose does as far as it matters: YAML anchors
and merge keys (PyYAML resolves them like Compose), then `${VAR}` / `${VAR:-default}` / `${VAR-default}` /
`${VAR:?message}` interpolation and `$$` escapes; where a Compose CLI is installed (`docker compose` or
`docker-compose`; `config` needs no engine), the required secrets are also checked with it. The code side is never copied: the variables the library and the Airflow adapters
read, with their defaults, are their declarations (inference.settings_spec.variables()); a scan of the source's
string literals checks that nothing reads an undeclared INFERENCE_* / TICKETS_* variable; the queue, pool and
connection id come from importing the modules that define them.
"""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import importlib.util
import os
import re
import shlex
from pathlib import Path
from unittest import mock
from urllib.parse import urlsplit

import pytest
import yaml

from inference import config, settings_spec

ROOT = Path(__file__).resolve().parents[2]
COMPOSE_FILE = ROOT / "docker-compose.yml"
ENV_EXAMPLE = ROOT / ".env.example"
PLUGIN_DIR = ROOT / "plugins" / "inference_airflow"
ROUTING_FILE = PLUGIN_DIR / "routing.py"
CONNECTION_FILE = PLUGIN_DIR / "connection.py"
CONFIG_FILE = ROOT / "inference" / "config.py"
DECLARED = {spec.name: spec for spec in settings_spec.variables()}
DAG_FILE = ROOT / "dags" / "ticket_batch_inference.py"

LONG_RUNNING = (
    "airflow-apiserver",
    "airflow-scheduler",
    "airflow-dag-processor",
    "airflow-triggerer",
    "airflow-worker",
    "airflow-worker-gpu",
)
AIRFLOW_SERVICES = (*LONG_RUNNING, "airflow-init", "airflow-cli")
WORKERS = ("airflow-worker", "airflow-worker-gpu")
CPU_WORKER, GPU_WORKER = WORKERS

CODE_VAR = re.compile(r"(?:INFERENCE|TICKETS)_[A-Z0-9_]+")
NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

# Variables the code reads that are deliberately not passed to every Airflow container: where they are set instead.
ONLY_IN = {
    # Tasks read the tickets database from the Airflow connection (AIRFLOW_CONN_TICKETS_DB); the library's own
    # CLI (`python -m inference ...`) does not read Airflow connections, so only airflow-cli gets the URL.
    "TICKETS_DB_URL": ("airflow-cli",),
}

# Where the compose default of a code variable differs from the code's default on purpose.
INTENDED_DEFAULT_DIFFERENCES = {
    # The GPU worker must fail loudly instead of silently running on CPU when it sees no GPU.
    (GPU_WORKER, "INFERENCE_DEVICE"),
    # The library leaves the Deadline Alert off (`airflow dags test` cannot run a DAG with a deadline);
    # the deployment switches it on.
    *((service, "INFERENCE_RUN_DEADLINE_MINUTES") for service in AIRFLOW_SERVICES),
    # The CLI container talks to the bundled PostgreSQL, not to the library's demo SQLite file.
    ("airflow-cli", "TICKETS_DB_URL"),
}

# Secrets: no default anywhere in the compose file (`${VAR:?how to generate it}`), an empty line in .env.example.
SECRETS = (
    "POSTGRES_PASSWORD",
    "AIRFLOW_ADMIN_PASSWORD",
    "AIRFLOW_FERNET_KEY",
    "AIRFLOW_JWT_SECRET",
    "AIRFLOW_API_SECRET_KEY",
    "TICKETS_DB_PASSWORD",
)
SECRET_LIKE = re.compile(r"PASSWORD|SECRET|FERNET|_TOKEN$|_KEY$")
# What the tests that are not about secrets put in .env for them (valid for airflow-init's check).
SECRET_VALUES = {
    "POSTGRES_PASSWORD": "0f1e2d3c4b5a69788796a5b4",
    "AIRFLOW_ADMIN_PASSWORD": "5b4a69788796a5b4",
    "AIRFLOW_FERNET_KEY": "ZmRlZmF1bHRfZmVybmV0X2tleV9mb3JfdGhlX3Rlc3Q=",
    "AIRFLOW_JWT_SECRET": "9c" * 16,
    "AIRFLOW_API_SECRET_KEY": "7d" * 16,
    "TICKETS_DB_PASSWORD": "a5b4c3d2e1f00f1e2d3c4b5a",
}

# .env.example lines `# VAR=value` that show an example rather than the library's default.
EXAMPLE_VALUES = {
    "INFERENCE_MODEL": "the default is the bundled model's directory, which depends on the installation",
    "INFERENCE_TAXONOMY": "the default (the built-in categories) has no file to name",
    "INFERENCE_SUMMARY_MODEL": "the default is no model; the line shows what a value looks like",
    "INFERENCE_MAX_BATCH_TOKENS": "the default depends on the device (1024 on CPU, calibrated on CUDA)",
    "INFERENCE_ALERT_CHANNELS": "the default is no channel; the line shows what a value looks like",
    "INFERENCE_ALERT_EMAIL_TO": "the default is no recipient; likewise",
    "INFERENCE_ALERT_EMAIL_FROM": "the default is the SMTP connection's sender; likewise",
}


# --------------------------------------------------------------------------------------------------------------
# Compose interpolation
# --------------------------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Ref:
    name: str
    op: str  # "", ":-", "-", ":?" or "?"
    default: str  # raw text after the operator (may hold nested references); for ":?" / "?" the error message


class MissingRequired(Exception):
    """What Compose refuses to start with: `${VAR:?message}` while VAR is unset or empty (`?`: unset)."""

    def __init__(self, name: str, message: str):
        super().__init__(f"required variable {name} is missing a value: {message}")
        self.name, self.message = name, message


def _closing(text: str, start: int) -> int:
    """Index of the `}` that closes the `{` at `start`."""
    depth = 0
    for i in range(start, len(text)):
        if text[i] == "{":
            depth += 1
        elif text[i] == "}":
            depth -= 1
            if depth == 0:
                return i
    raise AssertionError(f"unclosed ${{ in {text!r}")


def interpolate(text: str, env: dict[str, str], refs: list[Ref] | None = None, *, strict: bool = True) -> str:
    """Compose's interpolation of one string; `refs` collects the references it evaluates. A required variable
    that is missing raises MissingRequired (`strict`), or reads as empty (to collect references)."""
    refs = [] if refs is None else refs
    out: list[str] = []
    i = 0
    while i < len(text):
        if text[i] != "$":
            out.append(text[i])
            i += 1
            continue
        nxt = text[i + 1 : i + 2]
        if nxt == "$":
            out.append("$")
            i += 2
        elif nxt == "{":
            end = _closing(text, i + 1)
            body = text[i + 2 : end]
            m = NAME.match(body)
            assert m, f"bad interpolation ${{{body}}} in {text!r}"
            name, rest = m.group(), body[m.end() :]
            value = env.get(name)
            if rest == "":
                refs.append(Ref(name, "", ""))
                out.append(value or "")
            elif rest.startswith(":-"):
                refs.append(Ref(name, ":-", rest[2:]))
                out.append(value if value else interpolate(rest[2:], env, refs, strict=strict))
            elif rest.startswith("-"):
                refs.append(Ref(name, "-", rest[1:]))
                out.append(value if value is not None else interpolate(rest[1:], env, refs, strict=strict))
            elif rest.startswith((":?", "?")):
                op = rest[: rest.index("?") + 1]
                message = rest[len(op) :]
                assert "$" not in message, f"a message of ${{{body}}} holds a reference"
                refs.append(Ref(name, op, message))
                if (not value if op == ":?" else value is None) and strict:
                    raise MissingRequired(name, message)
                out.append(value or "")
            else:
                raise AssertionError(f"interpolation ${{{body}}} is not supported by this test")
            i = end + 1
        else:
            m = NAME.match(text, i + 1)
            assert m, f"a lone $ in {text!r}: write $$ for a literal dollar"
            refs.append(Ref(m.group(), "", ""))
            out.append(env.get(m.group()) or "")
            i = m.end()
    return "".join(out)


def resolve(value, env: dict[str, str]):
    if isinstance(value, str):
        return interpolate(value, {**SECRET_VALUES, **env})
    if isinstance(value, list):
        return [resolve(v, env) for v in value]
    if isinstance(value, dict):
        return {k: resolve(v, env) for k, v in value.items()}
    return value


def references(value) -> list[Ref]:
    """Every `${...}` in a value, nested defaults included (evaluated with nothing set, so defaults are read)."""
    refs: list[Ref] = []
    if isinstance(value, str):
        interpolate(value, {}, refs, strict=False)
    elif isinstance(value, list):
        for v in value:
            refs += references(v)
    elif isinstance(value, dict):
        for v in value.values():
            refs += references(v)
    return refs


def strip_defaults(text: str) -> str:
    """`postgresql://${USER:-tickets}@...` -> `postgresql://${USER}@...` (how .env.example writes defaults)."""
    out, i = [], 0
    while i < len(text):
        if text.startswith("$$", i):
            out.append("$$")
            i += 2
        elif text.startswith("${", i):
            end = _closing(text, i + 1)
            out.append("${" + NAME.match(text, i + 2).group() + "}")
            i = end + 1
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


# --------------------------------------------------------------------------------------------------------------
# Reading the three sides
# --------------------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def compose() -> dict:
    with COMPOSE_FILE.open(encoding="utf-8") as fh:
        return yaml.safe_load(fh)


class _UniqueKeyLoader(yaml.SafeLoader):
    """PyYAML keeps the last of two equal keys; Compose refuses the file. Merge keys (<<) are not duplicates."""

    def construct_mapping(self, node, deep=False):
        keys = [self.construct_object(k, deep=deep) for k, _ in node.value if k.tag != "tag:yaml.org,2002:merge"]
        duplicates = sorted({str(k) for k in keys if keys.count(k) > 1})
        if duplicates:
            raise yaml.constructor.ConstructorError(None, None, f"duplicate keys {duplicates}", node.start_mark)
        return super().construct_mapping(node, deep=deep)


def test_compose_file_has_no_duplicate_keys():
    with COMPOSE_FILE.open(encoding="utf-8") as fh:
        yaml.load(fh, Loader=_UniqueKeyLoader)  # a SafeLoader subclass


def service(compose: dict, name: str) -> dict:
    assert name in compose["services"], f"docker-compose.yml has no service {name}"
    return compose["services"][name]


def raw_env(compose: dict, name: str) -> dict:
    env = service(compose, name).get("environment") or {}
    assert isinstance(env, dict), f"{name}: environment must be a mapping (the anchors merge mappings only)"
    return env


def container_env(compose: dict, name: str, host_env: dict[str, str] | None = None) -> dict[str, str]:
    """What the container's environment holds when .env sets the secrets and `host_env` (nothing else: every
    default)."""
    env = {**SECRET_VALUES, **(host_env or {})}
    return {k: interpolate(str(v), env) for k, v in raw_env(compose, name).items()}


def queues_of(compose: dict, name: str, host_env: dict[str, str]) -> list[str] | None:
    command = service(compose, name).get("command")
    if isinstance(command, str):
        argv = shlex.split(interpolate(command, {**SECRET_VALUES, **host_env}))
    else:
        argv = resolve(command, host_env)
    for i, arg in enumerate(argv):
        if arg in ("--queues", "-q"):
            return argv[i + 1].split(",")
        if arg.startswith("--queues="):
            return arg.split("=", 1)[1].split(",")
    return None


def _source_files() -> list[Path]:
    return [*sorted((ROOT / "inference").rglob("*.py")), *sorted(PLUGIN_DIR.glob("*.py")), DAG_FILE]


def _constants(tree: ast.AST) -> set[str]:
    return {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)}


def vars_in(path: Path) -> set[str]:
    """INFERENCE_* / TICKETS_* names written as whole string literals (what the code looks up)."""
    return {s for s in _constants(ast.parse(path.read_text(encoding="utf-8"))) if CODE_VAR.fullmatch(s)}


def code_vars() -> set[str]:
    """The variables the library and the Airflow adapters read: their declarations."""
    return set(DECLARED)


def read_vars() -> set[str]:
    """INFERENCE_* / TICKETS_* names written as whole string literals anywhere in the code (what it could look up)."""
    return set().union(*(vars_in(p) for p in _source_files()))


def declared_defaults() -> dict[str, str]:
    """Each declared default as the environment would spell it, where it is a plain value (not computed)."""
    return {
        name: spec.text(spec.default)
        for name, spec in DECLARED.items()
        if spec.shown is None and spec.default not in (None, (), "")
    }


def empty_is_meaningful() -> set[str]:
    """Variables where set-but-empty is not the same as unset (e.g. "off")."""
    return {name for name, spec in DECLARED.items() if spec.blank_is_value}


@contextlib.contextmanager
def process_env(env: dict[str, str]):
    with mock.patch.dict(os.environ):
        for name in [n for n in os.environ if CODE_VAR.fullmatch(n)]:
            del os.environ[name]
        os.environ.update(env)
        yield


def load_module(path: Path, env: dict[str, str] | None = None):
    """A fresh copy of a module, imported with only `env` among the INFERENCE_* / TICKETS_* variables."""
    with process_env(env or {}):
        spec = importlib.util.spec_from_file_location(f"_compose_test_{path.stem}", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    return module


def routing_constants(env: dict[str, str]) -> dict:
    return {k: v for k, v in vars(load_module(ROUTING_FILE, env)).items() if k.isupper()}


@dataclasses.dataclass
class EnvLine:
    value: str
    commented: bool
    doc: str  # the comment lines right above, joined


def env_example() -> dict[str, EnvLine]:
    lines: dict[str, EnvLine] = {}
    block: list[str] = []
    for raw in ENV_EXAMPLE.read_text(encoding="utf-8").splitlines():
        m = re.fullmatch(r"(# )?([A-Z][A-Z0-9_]*)=(.*)", raw.strip())
        if m:
            assert m.group(2) not in lines, f".env.example documents {m.group(2)} twice"
            lines[m.group(2)] = EnvLine(m.group(3), bool(m.group(1)), " ".join(block))
            block = []
        elif raw.startswith("#"):
            block.append(raw.lstrip("#").strip())
        else:
            block = []
    return lines


def compose_refs(compose: dict) -> dict[str, list[Ref]]:
    out: dict[str, list[Ref]] = {}
    for ref in references(compose):
        out.setdefault(ref.name, []).append(ref)
    return out


# --------------------------------------------------------------------------------------------------------------
# 1. Services, image, executor, start order
# --------------------------------------------------------------------------------------------------------------


def test_the_services_exist(compose):
    missing = {"postgres", "redis", *AIRFLOW_SERVICES} - set(compose["services"])
    assert not missing, f"docker-compose.yml lacks services {sorted(missing)}"


def test_every_airflow_service_runs_the_same_image(compose):
    first = service(compose, AIRFLOW_SERVICES[0])
    assert first.get("image") and first.get("build"), "the Airflow services need an image name and a build"
    build = first["build"]
    assert (ROOT / build["context"] / build.get("dockerfile", "Dockerfile")).is_file()
    for name in AIRFLOW_SERVICES:
        s = service(compose, name)
        assert (s.get("image"), s.get("build")) == (first["image"], build), f"{name} runs another image"


def test_environment_values_are_strings(compose):
    """Compose rejects unquoted booleans in `environment`, and numbers are better quoted too."""
    for name in AIRFLOW_SERVICES:
        bad = {k: v for k, v in raw_env(compose, name).items() if not isinstance(v, str)}
        assert not bad, f"{name}: quote these environment values: {bad}"


def test_celery_executor_with_redis_broker_and_postgres(compose):
    for name in AIRFLOW_SERVICES:
        env = container_env(compose, name)
        assert env.get("AIRFLOW__CORE__EXECUTOR") == "CeleryExecutor", name
        broker = urlsplit(env.get("AIRFLOW__CELERY__BROKER_URL", ""))
        assert broker.scheme == "redis", f"{name}: the Celery broker must be redis, got {broker.geturl()!r}"
        assert service(compose, broker.hostname)["image"].startswith("redis"), name
        for key in ("AIRFLOW__DATABASE__SQL_ALCHEMY_CONN", "AIRFLOW__CELERY__RESULT_BACKEND"):
            host = urlsplit(env.get(key, "")).hostname
            assert host and service(compose, host)["image"].startswith("postgres"), f"{name}: {key}"


def _depends_on(compose: dict, name: str) -> dict:
    deps = service(compose, name).get("depends_on") or {}
    assert isinstance(deps, dict), f"{name}: depends_on must be a mapping with conditions"
    return {k: (v or {}).get("condition") for k, v in deps.items()}


def test_start_order(compose):
    for backing in ("postgres", "redis"):
        assert service(compose, backing).get("healthcheck"), f"{backing} needs a healthcheck to be waited for"
    assert service(compose, "airflow-apiserver").get("healthcheck")
    for name in AIRFLOW_SERVICES:
        deps = _depends_on(compose, name)
        for backing in ("postgres", "redis"):
            assert deps.get(backing) == "service_healthy", f"{name} must wait for {backing} to be healthy"
    for name in LONG_RUNNING:
        assert _depends_on(compose, name).get("airflow-init") == "service_completed_successfully", (
            f"{name} must wait for airflow-init (migrations, pool) to complete"
        )
    for name in WORKERS:
        assert _depends_on(compose, name).get("airflow-apiserver") == "service_healthy", (
            f"{name} runs tasks through the API server's Execution API: wait for it to be healthy"
        )
    assert "airflow-init" not in _depends_on(compose, "airflow-init")


# --------------------------------------------------------------------------------------------------------------
# 2-4. Queues, pool, GPU
# --------------------------------------------------------------------------------------------------------------

CUSTOM = {"INFERENCE_GPU_QUEUE": "gpu-a100", "INFERENCE_GPU_POOL": "a100"}


@pytest.mark.parametrize("host_env", [{}, CUSTOM], ids=["defaults", "custom"])
def test_gpu_worker_consumes_the_queue_model_tasks_go_to(compose, host_env):
    routing = load_module(ROUTING_FILE, host_env)
    assert queues_of(compose, GPU_WORKER, host_env) == [routing.GPU_QUEUE], (
        f"{GPU_WORKER} must consume exactly the queue the DAG sends model tasks to ({routing.GPU_QUEUE!r})"
    )
    for name in AIRFLOW_SERVICES:  # the DAG is parsed (queue chosen) by the dag-processor, run by the workers
        assert container_env(compose, name, host_env).get("INFERENCE_GPU_QUEUE") == routing.GPU_QUEUE, name


def test_cpu_worker_consumes_the_default_queue(compose):
    defaults = {container_env(compose, name).get("AIRFLOW__OPERATORS__DEFAULT_QUEUE") for name in AIRFLOW_SERVICES}
    assert len(defaults) == 1 and None not in defaults, f"one AIRFLOW__OPERATORS__DEFAULT_QUEUE for all: {defaults}"
    (default_queue,) = defaults
    cpu_queues = queues_of(compose, CPU_WORKER, {}) or []
    gpu_queue = load_module(ROUTING_FILE).GPU_QUEUE
    assert default_queue in cpu_queues, f"{CPU_WORKER} must consume the default queue {default_queue!r}"
    assert gpu_queue not in cpu_queues, f"{CPU_WORKER} must not take model tasks (queue {gpu_queue!r})"
    assert default_queue != gpu_queue, "the default queue and the GPU queue must differ"


def test_dag_sends_only_model_tasks_to_the_gpu_queue():
    """Every `queue` / `pool` the DAG sets is routing's; tasks without one run on the default queue."""
    expected = {"queue": "GPU_QUEUE", "pool": "GPU_POOL"}
    seen = {"queue": 0, "pool": 0}
    for node in ast.walk(ast.parse(DAG_FILE.read_text(encoding="utf-8"))):
        pairs = []
        if isinstance(node, ast.keyword) and node.arg in expected:
            pairs.append((node.arg, node.value))
        elif isinstance(node, ast.Dict):
            pairs += [(k.value, v) for k, v in zip(node.keys, node.values, strict=True) if _is_key(k, expected)]
        for key, value in pairs:
            seen[key] += 1
            ok = isinstance(value, ast.Attribute) and value.attr == expected[key]
            assert ok and getattr(value.value, "id", None) == "routing", (
                f"the DAG sets {key}={ast.unparse(value)}; expected routing.{expected[key]}"
            )
    assert seen["queue"] and seen["pool"], "the DAG no longer sends model tasks to routing's queue and pool"


def _is_key(node, keys) -> bool:
    return isinstance(node, ast.Constant) and node.value in keys


@pytest.mark.parametrize("host_env", [{}, CUSTOM], ids=["defaults", "custom"])
def test_init_creates_the_pool_model_tasks_use(compose, host_env):
    routing = load_module(ROUTING_FILE, host_env)
    command = service(compose, "airflow-init")["command"]
    script = interpolate(command if isinstance(command, str) else "\n".join(command), {**SECRET_VALUES, **host_env})
    commands = [shlex.split(line) for line in script.splitlines() if "pools set" in line]
    created = [argv[argv.index("set") :] for argv in commands]
    assert created, "airflow-init does not run `airflow pools set`"
    assert [argv[1] for argv in created] == [routing.GPU_POOL], f"pool created {created}; DAG uses {routing.GPU_POOL}"
    assert int(created[0][2]) >= 1, "the pool needs at least one slot"
    for name in AIRFLOW_SERVICES:
        assert container_env(compose, name, host_env).get("INFERENCE_GPU_POOL") == routing.GPU_POOL, name


def test_gpu_worker_reserves_nvidia_gpus_and_uses_cuda(compose):
    devices = service(compose, GPU_WORKER).get("deploy", {}).get("resources", {}).get("reservations", {})
    devices = devices.get("devices") or []
    assert any(d.get("driver") == "nvidia" and "gpu" in (d.get("capabilities") or []) for d in devices), (
        f"{GPU_WORKER} must reserve NVIDIA devices with capabilities [gpu], got {devices}"
    )
    assert container_env(compose, GPU_WORKER)["INFERENCE_DEVICE"] == "cuda"
    assert "cuda" in config.DEVICES
    for name in AIRFLOW_SERVICES:
        if name != GPU_WORKER:
            assert not service(compose, name).get("deploy"), f"{name} reserves devices it does not use"
            assert container_env(compose, name)["INFERENCE_DEVICE"] != "cuda", f"{name} has no GPU"


# --------------------------------------------------------------------------------------------------------------
# 5. Environment: code <-> compose <-> .env.example
# --------------------------------------------------------------------------------------------------------------


def test_code_variables_are_found():
    """The declarations hold the library's, the source's, routing's and the alerts' variables (guards the
    lists the other tests rely on), and the scan of the source sees the declarations."""
    found = code_vars()
    assert set(config.SOURCE_ENV.values()) | {"TICKETS_DB_URL", "INFERENCE_MODEL"} <= found
    assert {"INFERENCE_GPU_QUEUE", "INFERENCE_GPU_POOL", "INFERENCE_TASK_RETRIES"} <= found
    assert any(v.startswith("INFERENCE_ALERT_") for v in found)
    assert vars_in(CONFIG_FILE) >= set(config.SOURCE_ENV.values()) | {"TICKETS_DB_URL", "INFERENCE_MODEL"}
    assert set(ONLY_IN) <= found, f"stale ONLY_IN entries: {set(ONLY_IN) - found}"


def test_the_code_reads_only_declared_variables():
    """A variable read without a declaration would escape .env.example, compose and README alike."""
    undeclared = sorted(read_vars() - code_vars())
    assert not undeclared, (
        f"declare these with env(...) in inference/config.py or inference/settings_deploy.py: {undeclared}"
    )


def test_every_variable_the_code_reads_reaches_the_airflow_containers(compose):
    missing, hard_coded, misplaced = [], [], []
    for var in sorted(code_vars()):
        where = ONLY_IN.get(var, AIRFLOW_SERVICES)
        for name in AIRFLOW_SERVICES:
            env = raw_env(compose, name)
            if name not in where:
                if var in env:
                    misplaced.append(f"{name}: {var}")
            elif var not in env:
                missing.append(f"{name}: {var}")
            elif var not in {r.name for r in references(env[var])}:
                hard_coded.append(f"{name}: {var}: {env[var]!r}")
    assert not missing, "pass these to the containers (x-inference-env / x-airflow-common): " + ", ".join(missing)
    assert not hard_coded, "write these as ${VAR:-default} so .env can set them: " + ", ".join(hard_coded)
    assert not misplaced, "these belong only where ONLY_IN says: " + ", ".join(misplaced)


@pytest.mark.parametrize("var", sorted(empty_is_meaningful()))
def test_variables_where_empty_is_not_unset(compose, var):
    """The code reads these with a non-empty default and treats "" differently (e.g. "off"): compose must
    default to a non-empty value and still pass an explicitly empty value through (`${VAR-default}`)."""
    for name in AIRFLOW_SERVICES:
        if var in raw_env(compose, name):
            assert container_env(compose, name)[var] != "", f"{name}: unset {var} would reach the code as ''"
            assert container_env(compose, name, {var: ""})[var] == "", f"{name}: {var}= in .env is not passed on"


def test_compose_defaults_are_the_code_defaults(compose):
    code = declared_defaults()
    assert code.get("INFERENCE_GPU_QUEUE") == load_module(ROUTING_FILE).GPU_QUEUE  # routing reads the declaration
    wrong = []
    for name in AIRFLOW_SERVICES:
        for var, value in container_env(compose, name).items():
            if value and var in code and value != code[var] and (name, var) not in INTENDED_DEFAULT_DIFFERENCES:
                wrong.append(f"{name}: {var}={value} (code default {code[var]})")
    assert not wrong, "compose defaults that differ from the code's: " + ", ".join(wrong)


@pytest.mark.parametrize("name", AIRFLOW_SERVICES)
def test_compose_defaults_are_valid_settings(compose, name):
    env = container_env(compose, name)
    settings = config.settings_from_env(env)
    assert settings.device == env["INFERENCE_DEVICE"]
    routing = routing_constants({k: v for k, v in env.items() if CODE_VAR.fullmatch(k)})
    assert routing["GPU_QUEUE"] == env["INFERENCE_GPU_QUEUE"]


def test_connection_id_matches_the_code(compose):
    conn_id = load_module(CONNECTION_FILE).CONN_ID
    key = f"AIRFLOW_CONN_{conn_id.upper()}"
    for name in AIRFLOW_SERVICES:
        conns = {k for k in raw_env(compose, name) if k.startswith("AIRFLOW_CONN_")}
        assert conns == {key}, f"{name}: connections {sorted(conns)}; the code reads {conn_id!r} ({key})"
    host_env = {"TICKETS_DB_USER": "u1", "TICKETS_DB_PASSWORD": "p1"}
    uri = urlsplit(container_env(compose, "airflow-cli", host_env)[key])
    assert uri.scheme in ("postgres", "postgresql") and (uri.username, uri.password) == ("u1", "p1")
    assert service(compose, uri.hostname)["image"].startswith("postgres")
    assert container_env(compose, "postgres", host_env)["TICKETS_DB_USER"] == "u1"
    # airflow-cli's TICKETS_DB_URL is the same database as the connection by default
    url = urlsplit(container_env(compose, "airflow-cli", host_env)["TICKETS_DB_URL"])
    assert (url.username, url.password, url.hostname, url.port, url.path) == (
        uri.username,
        uri.password,
        uri.hostname,
        uri.port,
        uri.path,
    )


def test_every_compose_variable_is_documented(compose):
    documented = env_example()
    missing = sorted(set(compose_refs(compose)) - set(documented))
    assert not missing, f"document these in .env.example: {missing}"


def test_every_code_variable_is_documented():
    missing = sorted(code_vars() - set(env_example()))
    assert not missing, f"document these in .env.example: {missing}"


def test_every_documented_variable_is_used(compose):
    unused = sorted(set(env_example()) - set(compose_refs(compose)) - code_vars())
    assert not unused, f".env.example documents variables nothing reads: {unused}"


# --------------------------------------------------------------------------------------------------------------
# 6. Defaults written in .env.example
# --------------------------------------------------------------------------------------------------------------


def _compose_defaults(refs: list[Ref]) -> set[str]:
    return {strip_defaults(r.default) for r in refs if r.op in (":-", "-") and r.default}


def _states_default(line: EnvLine, default: str) -> bool:
    if line.commented and line.value == default:
        return True
    phrase = r"\b(?:Default|defaults(?: it)? to):?\s+" + re.escape(default) + r"(?=[\s.,;)]|$)"
    return re.search(phrase, line.doc) is not None


def test_env_example_states_the_compose_defaults(compose):
    documented = env_example()
    wrong = []
    for var, refs in sorted(compose_refs(compose).items()):
        for default in sorted(_compose_defaults(refs)):
            if var in documented and not _states_default(documented[var], default):
                wrong.append(f"{var} (compose default {default!r})")
    assert not wrong, ".env.example does not state these compose defaults: " + ", ".join(wrong)


def test_commented_values_are_the_compose_defaults(compose):
    refs = compose_refs(compose)
    wrong = []
    for var, line in env_example().items():
        literal = {d for d in _compose_defaults(refs.get(var, [])) if "$" not in d}
        if line.commented and literal and line.value not in literal:
            wrong.append(f"# {var}={line.value} (compose: {sorted(literal)})")
    assert not wrong, "commented-out lines in .env.example that are not the compose default: " + ", ".join(wrong)


def test_commented_values_are_the_library_defaults(compose):
    """`# VAR=value` lines of settings with no compose default show the declared default (or a valid example)."""
    refs = compose_refs(compose)
    documented = env_example()
    assert set(EXAMPLE_VALUES) <= {v for v, line in documented.items() if line.commented}, "stale EXAMPLE_VALUES"
    wrong = []
    for var, line in documented.items():
        if not line.commented or var not in DECLARED or _compose_defaults(refs.get(var, [])):
            continue
        spec = DECLARED[var]
        value = spec.read({var: line.value})  # an example must be valid too
        value = spec.default if value is dataclasses.MISSING else spec.check(value)
        if var not in EXAMPLE_VALUES and value != spec.default:
            wrong.append(f"# {var}={line.value} (declared default {spec.default_text})")
    assert not wrong, "commented-out lines in .env.example that are not the library default: " + ", ".join(wrong)


def test_env_example_states_the_declared_defaults():
    """Every declared variable's line shows its default: `# VAR=default`, or `Default: ...` in its comment."""
    documented = env_example()
    wrong = [
        f"{var} (default {spec.default_text!r})"
        for var, spec in DECLARED.items()
        if var in documented and not _states_default(documented[var], spec.default_text)
    ]
    assert not wrong, ".env.example does not state these declared defaults: " + ", ".join(wrong)


# --------------------------------------------------------------------------------------------------------------
# 7. Secrets: required, never defaulted, refused as placeholders
# --------------------------------------------------------------------------------------------------------------

GENERATE = re.compile(r"generate it with `([^`]+)`")


def test_every_secret_is_required_with_the_command_that_generates_it(compose):
    refs = compose_refs(compose)
    for var in SECRETS:
        assert refs.get(var), f"docker-compose.yml no longer uses {var}: update SECRETS"
        for ref in refs[var]:
            assert ref.op == ":?", f"{var} must be written ${{{var}:?message}} everywhere, found op {ref.op!r}"
            assert var in ref.default, f"{var}: the message must name the variable: {ref.default!r}"
            assert GENERATE.search(ref.default), f"{var}: the message must say how to generate it: {ref.default!r}"


def test_no_other_secret_has_a_default(compose):
    """A new password or key in the compose file belongs in SECRETS (required), not behind a default."""
    secret_like = {var for var in compose_refs(compose) if SECRET_LIKE.search(var)}
    assert secret_like <= set(SECRETS), (
        f"required-variable syntax and SECRETS for: {sorted(secret_like - set(SECRETS))}"
    )
    for name, svc in compose["services"].items():
        for key, value in (svc.get("environment") or {}).items():
            if SECRET_LIKE.search(key) and not key.endswith("_FILE"):
                assert {r.name for r in references(value)} & set(SECRETS), f"{name}: {key} holds no secret of SECRETS"


@pytest.mark.parametrize("var", SECRETS)
@pytest.mark.parametrize("how", ["unset", "empty"])
def test_compose_refuses_to_start_without_each_secret(compose, var, how):
    env = {k: v for k, v in SECRET_VALUES.items() if k != var} | ({var: ""} if how == "empty" else {})
    with pytest.raises(MissingRequired) as caught:
        resolve_file(compose, env)
    assert caught.value.name == var
    assert f"set {var} in .env; generate it with `" in caught.value.message
    resolve_file(compose, SECRET_VALUES)  # and with every secret set, the file resolves


def resolve_file(compose: dict, env: dict[str, str]):
    """The whole file interpolated as Compose does (no SECRET_VALUES merged in)."""

    def walk(value):
        if isinstance(value, str):
            return interpolate(value, env)
        if isinstance(value, list):
            return [walk(v) for v in value]
        if isinstance(value, dict):
            return {k: walk(v) for k, v in value.items()}
        return value

    return walk(compose)


def test_env_example_leaves_every_secret_empty_with_its_generate_command(compose):
    documented = env_example()
    refs = compose_refs(compose)
    for var in SECRETS:
        line = documented.get(var)
        assert line is not None and not line.commented and line.value == "", (
            f".env.example must have an uncommented, empty `{var}=` line (got {line})"
        )
        command = GENERATE.search(refs[var][0].default).group(1)
        assert "Required" in line.doc and command in line.doc, f".env.example: say `{var}` is required and `{command}`"


def _compose_cli() -> list[str] | None:
    """`docker compose` (v2 plugin) or `docker-compose`, when installed: `config` needs no engine."""
    import shutil
    import subprocess

    if shutil.which("docker"):
        probe = subprocess.run(["docker", "compose", "version"], capture_output=True, text=True, timeout=60)
        if probe.returncode == 0:
            return ["docker", "compose"]
    return ["docker-compose"] if shutil.which("docker-compose") else None


@pytest.mark.parametrize("var", [None, *SECRETS])
def test_docker_compose_config_refuses_a_missing_secret(tmp_path, var):
    """The real Compose CLI: `config` with every secret set works; without one it fails naming how to fix it."""
    import subprocess

    cli = _compose_cli()
    if cli is None:
        pytest.skip("no Compose CLI here (docker compose / docker-compose); the YAML-level tests above cover it")
    env_file = tmp_path / "secrets.env"
    env_file.write_text("".join(f"{k}={v}\n" for k, v in SECRET_VALUES.items() if k != var), encoding="utf-8")
    environ = {k: v for k, v in os.environ.items() if not (k in SECRETS or k.startswith(("COMPOSE_", "DOCKER_")))}
    argv = [*cli, "--project-directory", str(ROOT), "-f", str(COMPOSE_FILE), "--env-file", str(env_file), "config"]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=120, env=environ, cwd=tmp_path)
    if var is None:
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert SECRET_VALUES["AIRFLOW_JWT_SECRET"] in proc.stdout
    else:
        assert proc.returncode != 0, f"compose config started without {var}"
        assert f"set {var} in .env; generate it with `" in proc.stderr, proc.stderr[-2000:]


# airflow-init's check of the secret values (placeholders of older .env files, short secrets, a bad Fernet key)


def _check_secrets_script(compose: dict) -> str:
    command = service(compose, "airflow-init")["command"]
    script = interpolate(command if isinstance(command, str) else "\n".join(command), SECRET_VALUES)
    m = re.search(r"<<'CHECK_SECRETS'\n(.*?)\nCHECK_SECRETS\n", script, re.S)
    assert m, "airflow-init no longer checks the secrets (python3 - <<'CHECK_SECRETS' ... CHECK_SECRETS)"
    return m.group(1)


def _run_check(compose: dict, host_env: dict[str, str]):
    import subprocess
    import sys

    env = {**os.environ, **container_env(compose, "airflow-init", host_env)}
    return subprocess.run(
        [sys.executable, "-"], input=_check_secrets_script(compose), capture_output=True, text=True, env=env, timeout=60
    )


def test_airflow_init_accepts_generated_secrets(compose):
    proc = _run_check(compose, {})
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize(
    ("var", "value", "says"),
    [
        ("POSTGRES_PASSWORD", "airflow", "is a placeholder"),
        ("AIRFLOW_ADMIN_PASSWORD", "admin", "is a placeholder"),
        ("TICKETS_DB_PASSWORD", "change-me", "is a placeholder"),
        ("AIRFLOW_JWT_SECRET", "change-me-jwt-secret", "is a placeholder"),
        ("AIRFLOW_API_SECRET_KEY", "Change-Me-API-secret-key-of-more-than-32", "is a placeholder"),
        ("AIRFLOW_ADMIN_PASSWORD", "hunter2", "is shorter than 12 characters"),
        ("AIRFLOW_JWT_SECRET", "0123456789abcdef", "is shorter than 32 characters"),
        ("AIRFLOW_FERNET_KEY", "not-a-fernet-key", "is not a Fernet key"),
    ],
)
def test_airflow_init_refuses_placeholder_secrets(compose, var, value, says):
    proc = _run_check(compose, {var: value})
    assert proc.returncode == 1
    assert f"ERROR: {var} {says}" in proc.stderr
    assert value not in proc.stderr.replace(var, "")  # names, never values


def test_airflow_init_checks_secrets_before_anything_else(compose):
    command = service(compose, "airflow-init")["command"]
    script = "\n".join(command) if isinstance(command, list) else command
    assert script.index("CHECK_SECRETS") < script.index("airflow db migrate") < script.index("pools set")
    for name in LONG_RUNNING:
        assert _depends_on(compose, name).get("airflow-init") == "service_completed_successfully", name
