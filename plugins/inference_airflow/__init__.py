"""Airflow adapters for the `inference` library: connection lookup and the task bodies' glue."""
