"""The image is pinned the way CI is, and the console entry point is the CLI.

CI installs with the Makefile: torch alone from TORCH_SPEC, then the project with `-c constraints.txt`
(constraints.txt is `pip freeze` of that environment, torch left out). The Dockerfile must do the same, from a
base image whose Airflow and Python are the ones constraints.txt was frozen with. No docker engine is needed:
the Dockerfile and the Makefile are read as text (continuation lines joined, build args and make variables
resolved from their own defaults).
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "Dockerfile"
MAKEFILE = ROOT / "Makefile"
CONSTRAINTS = ROOT / "constraints.txt"
SCRIPT = "ticket-inference"


def instructions(path: Path) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of a Dockerfile, continuation lines joined, comments dropped."""
    out, pending = [], ""
    for line in path.read_text(encoding="utf-8").splitlines():
        if not pending and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        text = (pending + line).strip()
        pending = ""
        keyword, _, rest = text.partition(" ")
        out.append((keyword.upper(), rest.strip()))
    return out


def pip_installs(commands: list[str]) -> list[list[str]]:
    """The arguments after `pip install` of every pip install in these shell commands (quotes respected; simple
    commands split at ;, &&, || and |)."""
    found = []
    for command in commands:
        lexer = shlex.shlex(command, posix=True, punctuation_chars=";&|")
        lexer.whitespace_split = True
        simple: list[list[str]] = [[]]
        for token in lexer:
            if token and set(token) <= set(";&|"):
                simple.append([])
            else:
                simple[-1].append(token)
        for argv in simple:
            for k, word in enumerate(argv):
                runs_pip = k >= 1 and (Path(argv[k - 1]).name in ("pip", "pip3") or argv[k - 2 : k] == ["-m", "pip"])
                if word == "install" and runs_pip:
                    found.append(argv[k + 1 :])
                    break
    return found


def constraint_files(args: list[str]) -> list[str]:
    files = []
    for i, arg in enumerate(args):
        if arg in ("-c", "--constraint") and i + 1 < len(args):
            files.append(args[i + 1])
        elif arg.startswith("--constraint="):
            files.append(arg.split("=", 1)[1])
    return files


def targets(args: list[str]) -> list[str]:
    """What an install installs: its arguments that are not options or option values."""
    out, skip = [], False
    for arg in args:
        if skip:
            skip = False
        elif arg in ("-c", "--constraint", "-r", "--requirement", "-i", "--index-url", "--extra-index-url"):
            skip = True
        elif arg == "-e":
            continue
        elif not arg.startswith("-"):
            out.append(arg)
    return out


def makefile_default(name: str) -> str:
    m = re.search(rf"^{name}\s*\?=\s*(.+)$", MAKEFILE.read_text(encoding="utf-8"), re.M)
    assert m, f"Makefile has no `{name} ?= ...`"
    return m.group(1).strip()


def makefile_installs() -> list[list[str]]:
    text = MAKEFILE.read_text(encoding="utf-8").replace("\\\n", " ")  # continuation lines joined
    recipe = [line.strip() for line in text.splitlines() if line.startswith("\t")]
    lines = [line.replace("$(TORCH_SPEC)", "${TORCH_SPEC}").replace("$(PY)", "python") for line in recipe]
    return pip_installs(lines)


def docker_installs() -> list[list[str]]:
    return pip_installs([rest for keyword, rest in instructions(DOCKERFILE) if keyword == "RUN"])


def is_project(target: str) -> bool:
    return target == "." or target.startswith((".[", "./", "'.[", '".['))


def constraint_pins() -> dict[str, str]:
    pins = {}
    for line in CONSTRAINTS.read_text(encoding="utf-8").splitlines():
        m = re.fullmatch(r"([A-Za-z0-9_.-]+)==([^\s;]+)", line.strip())
        if m:
            pins[m.group(1).lower().replace("_", "-")] = m.group(2)
    return pins


# --------------------------------------------------------------------------------------------------------------


def test_the_reading_of_the_makefile_finds_ci_pinned():
    """The reference: CI's install carries the constraints and installs torch on its own."""
    installs = makefile_installs()
    project = [args for args in installs if any(is_project(t) for t in targets(args))]
    assert project and all(constraint_files(args) == ["constraints.txt"] for args in project), installs
    assert ["${TORCH_SPEC}"] in [targets(args) for args in installs], installs


def test_every_pip_install_of_the_dockerfile_carries_the_constraints():
    installs = docker_installs()
    assert installs, "the Dockerfile installs nothing with pip"
    for args in installs:
        if targets(args) == ["${TORCH_SPEC}"]:
            continue  # torch alone, as the Makefile does: constraints.txt leaves torch out
        assert constraint_files(args) == ["constraints.txt"], f"pip install {' '.join(args)}: add -c constraints.txt"
    project = [args for args in installs if any(is_project(t) for t in targets(args))]
    assert len(project) == 1, f"the project must be installed once, with the constraints: {installs}"
    copied = " ".join(rest for keyword, rest in instructions(DOCKERFILE) if keyword == "COPY")
    assert "constraints.txt" in copied.split(), "the Dockerfile must COPY constraints.txt before installing"


def test_torch_comes_from_the_same_torch_spec_as_ci():
    installs = docker_installs()
    torch = [args for args in installs if targets(args) == ["${TORCH_SPEC}"]]
    assert len(torch) == 1, f"install torch alone from the TORCH_SPEC build arg, as the Makefile does: {installs}"
    assert installs.index(torch[0]) == 0, "torch first (the project's install must not pull another torch)"
    args = dict(rest.split("=", 1) for keyword, rest in instructions(DOCKERFILE) if keyword == "ARG" and "=" in rest)
    assert args.get("TORCH_SPEC") == makefile_default("TORCH_SPEC"), "ARG TORCH_SPEC must default to the Makefile's"
    assert "torch" not in constraint_pins(), "constraints.txt must leave torch to TORCH_SPEC"


def test_the_base_image_is_the_airflow_and_python_of_the_constraints():
    (image,) = [rest for keyword, rest in instructions(DOCKERFILE) if keyword == "FROM"]
    m = re.fullmatch(r"apache/airflow:([0-9.]+)-python([0-9.]+)", image)
    assert m, f"FROM {image}: expected apache/airflow:<version>-python<version>"
    pins = constraint_pins()
    assert m.group(1) == pins.get("apache-airflow"), f"FROM {image}, constraints.txt pins {pins.get('apache-airflow')}"
    # constraints.txt is frozen from the environment these tests run in
    assert m.group(2) == f"{sys.version_info.major}.{sys.version_info.minor}", f"FROM {image}"
    installs = docker_installs()
    assert any("apache-airflow==${AIRFLOW_VERSION}" in targets(args) for args in installs), (
        "name apache-airflow==${AIRFLOW_VERSION} so pip cannot move the image's Airflow"
    )


# --------------------------------------------------------------------------------------------------------------
# Console entry point
# --------------------------------------------------------------------------------------------------------------


def test_the_console_script_is_declared():
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["scripts"]
    assert scripts.get(SCRIPT) == "inference.cli:main"


def test_the_installed_console_script_is_the_cli(tmp_path):
    script = Path(sys.executable).with_name(SCRIPT)
    assert script.is_file(), f"{script} is missing: reinstall the project (make install, or pip install -e .)"
    proc = subprocess.run([str(script), "--help"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    module = subprocess.run([sys.executable, "-m", "inference", "--help"], capture_output=True, text=True, timeout=120)
    assert proc.stdout == module.stdout  # one parser, two names
    for command in ("seed", "run", "status"):
        assert command in proc.stdout
    # and it runs commands, not only help: a bad date is refused with the usage exit code
    bad = subprocess.run(
        [str(script), "--db", f"sqlite:///{tmp_path / 't.db'}", "run", "--date", "2026-13-01"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert bad.returncode == 2 and "date" in bad.stderr, bad.stderr


def test_every_data_file_the_package_reads_ships_in_a_non_editable_install():
    """The image installs the package without -e: a data file outside `package-data` would be missing there
    (the glossaries, the example tickets, the migrations' templates)."""
    import fnmatch

    patterns = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"][
        "package-data"
    ]["inference"]
    package = ROOT / "inference"
    data = [
        p.relative_to(package).as_posix()
        for p in package.rglob("*")
        if p.is_file() and p.suffix not in (".py", ".pyc") and "__pycache__" not in p.parts
    ]
    assert any(d.startswith("data/glossary/") for d in data)
    missing = [d for d in data if not any(fnmatch.fnmatch(d, pat) for pat in patterns)]
    assert not missing, f"add to [tool.setuptools.package-data] in pyproject.toml: {missing}"
