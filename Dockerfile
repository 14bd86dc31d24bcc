# Airflow image with the `inference` library installed; used by every Airflow service in docker-compose.yml.
#
# The DAG (./dags) and the Airflow adapters (./plugins) are mounted at run time, but the library itself is
# baked in: rebuild (`docker compose build`) after changing anything under inference/ or pyproject.toml.
#
# torch from PyPI on linux/x86_64 is a CUDA build (it pulls the nvidia-* runtime wheels, several GB), which is
# what the GPU workers need; the CPU services run the same image and simply see no GPU. The host's NVIDIA
# driver must be new enough for the CUDA version of the torch wheel that pip resolves.
FROM apache/airflow:3.3.2-python3.11

USER airflow
WORKDIR /tmp/ticket-batch-inference

# Only what the package build needs. README.md* is optional (pyproject names it; the wildcard lets the
# build go on without it).
COPY --chown=airflow:0 pyproject.toml README.md* ./
COPY --chown=airflow:0 inference/ ./inference/

# Pinning apache-airflow to the image's own version keeps pip from up- or downgrading Airflow while it
# resolves the project's dependencies (the pattern the official image documents for extending it).
RUN pip install --no-cache-dir "apache-airflow==${AIRFLOW_VERSION}" . \
    && python -c "from inference.config import settings_from_env; from inference.modelinfo import check_model_dir; check_model_dir(settings_from_env({}).model_dir)" \
    && rm -rf /tmp/ticket-batch-inference

WORKDIR /opt/airflow
