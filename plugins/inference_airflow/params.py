"""The trigger form: one Param per run option, derived from its declaration (inference.options.RunOptions).

JSON schema checks each param alone, in the UI and the REST API. The task checks again
(inference.options.parse_options), because `airflow dags trigger --conf` and API clients can send values
the form would have refused, and because rules that tie params together (an end date needs a start date,
no later than it, at most 366 days after) cannot be said in a Param's schema.
"""

from __future__ import annotations

from airflow.sdk import Param

from inference.options import OPTIONS

PARAMS = {
    name: Param(spec.default, title=spec.title, description=spec.help, **spec.json_schema())
    for name, spec in OPTIONS.items()
}
