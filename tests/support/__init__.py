"""Test machinery shared by the test folders (and nothing else): servers the session finds or starts
(PostgreSQL, Redis, a whole Airflow), views of the run tables, a cuttable TCP proxy, fault helpers.

Import it as `tests.support.<module>`; the conftest files only turn it into fixtures.
"""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# One line per server the session found or started (PostgreSQL, Redis), printed at the end of its report.
PROVISIONED: list[str] = []
