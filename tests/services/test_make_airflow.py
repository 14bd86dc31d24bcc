"""`make airflow` (scripts/airflow-local.sh) for real: `airflow standalone` comes up, the env file it writes lets
a fresh shell run the README's airflow CLI commands against it, and SIGTERM stops every process it started."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from tests.support import ROOT
from tests.support.ports import free_port


def _ours(home: Path) -> list[str]:
    """Processes (other than this one) whose environment carries this AIRFLOW_HOME."""
    needle = f"AIRFLOW_HOME={home}".encode()
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            if needle in (proc / "environ").read_bytes().split(b"\0"):
                cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ")[:80].decode("utf-8", "replace")
                found.append(f"{proc.name} {cmdline}")
        except OSError:
            continue
    return found


def _clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "INFERENCE_", "TICKETS_"))}
    return {**env, **extra}


@pytest.mark.slow
def test_make_airflow_serves_prints_its_cli_environment_and_stops_everything_on_sigterm(tmp_path):
    home, port = tmp_path / "airflow-home", free_port()
    log = open(tmp_path / "airflow-local.log", "wb")  # noqa: SIM115 - closed below
    env = _clean_env(
        AIRFLOW_LOCAL_HOME=str(home), AIRFLOW_PORT=str(port), TICKETS_LOCAL_FILE=str(tmp_path / "tickets.db")
    )
    script = subprocess.Popen(
        ["bash", str(ROOT / "scripts" / "airflow-local.sh")],
        env=env,
        cwd=tmp_path,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        deadline, health = time.monotonic() + 420, {}
        while time.monotonic() < deadline:
            assert script.poll() is None, (tmp_path / "airflow-local.log").read_text()[-3000:]
            try:
                health = httpx.get(f"http://127.0.0.1:{port}/api/v2/monitor/health", timeout=5).json()
            except (httpx.HTTPError, ValueError):
                health = {}
            if all((health.get(p) or {}).get("status") == "healthy" for p in ("metadatabase", "scheduler")):
                break
            time.sleep(2)
        else:
            pytest.fail(f"standalone not healthy: {health}\n{(tmp_path / 'airflow-local.log').read_text()[-3000:]}")
        printed = (tmp_path / "airflow-local.log").read_text()
        assert f"source {home}/env.sh" in printed

        # A fresh shell with nothing but the env file: the README's CLI commands reach this Airflow.
        cli = subprocess.run(
            ["bash", "-c", f"source {home}/env.sh && airflow dags list -o plain"],
            env=_clean_env(),
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert cli.returncode == 0 and "ticket_batch_inference" in cli.stdout, cli.stdout + cli.stderr
        assert "migration" not in (cli.stdout + cli.stderr).lower()
        assert _ours(home), "the standalone components carry the AIRFLOW_HOME"

        script.send_signal(signal.SIGTERM)  # only the script, as a service manager or a terminal closing would
        script.wait(timeout=120)
        time.sleep(2)
        assert _ours(home) == [], f"left running after SIGTERM: {_ours(home)}"
    finally:
        if script.poll() is None:
            os.killpg(script.pid, signal.SIGKILL)
        for line in _ours(home):
            os.kill(int(line.split()[0]), signal.SIGKILL)
        log.close()
