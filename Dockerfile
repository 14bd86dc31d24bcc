# Airflow image with the `inference` library installed; used by every Airflow service in docker-compose.yml.
#
# The DAG (./dags) and the Airflow adapters (./plugins) are mounted at run time, but the library itself is
# baked in: rebuild (`docker compose build`) after changing anything under inference/ or pyproject.toml.
#
# Pinned the way CI is (Makefile, `make install`): torch first, alone, from TORCH_SPEC (constraints.txt leaves
# torch out), then the project with `-c constraints.txt`, so the image runs the versions the tests ran. The
# base image's Airflow and Python are the ones constraints.txt was made with (tests/deploy/test_dockerfile.py).
#
# torch from PyPI on linux/x86_64 is a CUDA build (it pulls the nvidia-* runtime wheels, several GB), which is
# what the GPU workers need; the CPU services run the same image and simply see no GPU. The host's NVIDIA
# driver must be new enough for the CUDA version of that wheel. Another build:
#   docker compose build --build-arg TORCH_SPEC="torch==<version>"
FROM apache/airflow:3.3.2-python3.11

# The Makefile's default (the torch version CI tests).
ARG TORCH_SPEC=torch==2.13.0

USER airflow
WORKDIR /tmp/ticket-batch-inference

# Only what the package build needs, and the constraints. README.md* is optional (pyproject names it; the
# wildcard lets the build go on without it).
COPY --chown=airflow:0 pyproject.toml constraints.txt README.md* ./
COPY --chown=airflow:0 inference/ ./inference/

# Naming apache-airflow at the image's own version as well keeps pip from up- or downgrading Airflow (the
# pattern the official image documents for extending it); constraints.txt pins the same version, so a base
# image that does not match it fails here instead of running untested. `[celery]`: the Celery provider and
# Redis client of this deployment, at the tested versions too.
RUN pip install --no-cache-dir "${TORCH_SPEC}" \
    && pip install --no-cache-dir -c constraints.txt "apache-airflow==${AIRFLOW_VERSION}" ".[celery]" \
    && python -c "from inference.config import settings_from_env; from inference.modelinfo import check_model_dir; check_model_dir(settings_from_env({}).model_dir)" \
    && ticket-inference --help > /dev/null \
    && rm -rf /tmp/ticket-batch-inference

WORKDIR /opt/airflow
