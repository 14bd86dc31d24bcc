"""Nightly batch inference over a ticket backlog: a plain library (no Airflow imports here)."""

__version__ = "0.1.0"
