"""Wall time of each step invocation (inference_steps), for the run report and `status`.

`@timed_step("load_results")` on a step `fn(settings, run_id, ...)` records the invocation as running when it
starts and closes the row when it returns or raises. Recording is best effort: a database that cannot take
the row (not created yet, unreachable) never changes what the step itself does; it costs a warning.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from inference.errors import InferenceError

log = logging.getLogger("inference")
F = TypeVar("F", bound=Callable)


def timed_step(step: str, shard_arg: int | None = None) -> Callable[[F], F]:
    """`shard_arg`: the position of the shard argument (infer_shard), else the step is not per shard."""

    def decorate(fn: F) -> F:
        @functools.wraps(fn)
        def wrapper(settings, run_id: str, *args, **kwargs):
            shard = -1
            if shard_arg is not None:
                shard = kwargs["shard"] if "shard" in kwargs else args[shard_arg - 2]
            timer = StepTimer(settings.db_url, run_id, step, int(shard))
            try:
                result = fn(settings, run_id, *args, **kwargs)
            except BaseException as exc:
                timer.finish(exc)
                raise
            timer.finish(None)
            return result

        return wrapper  # type: ignore[return-value]

    return decorate


class StepTimer:
    def __init__(self, db_url: str, run_id: str, step: str, shard: int):
        from inference.store.db import utcnow

        self.db_url, self.run_id, self.step, self.shard = db_url, run_id, step, shard
        self.started_at = utcnow()
        self._write(self._start)

    def _start(self, conn) -> None:
        from inference.store import metrics

        metrics.start_step(conn, self.run_id, self.step, self.shard, self.started_at)

    def finish(self, exc: BaseException | None) -> None:
        from inference.store import metrics
        from inference.store.db import utcnow

        finished_at = utcnow()
        status = metrics.STEP_SUCCEEDED if exc is None else metrics.STEP_FAILED
        self._write(
            lambda conn: metrics.finish_step(
                conn,
                run_id=self.run_id,
                step=self.step,
                shard=self.shard,
                started_at=self.started_at,
                finished_at=finished_at,
                status=status,
                error=_describe(exc),
            )
        )

    def _write(self, action):
        import sqlalchemy as sa

        from inference.store.db import make_engine, writing

        url = sa.make_url(self.db_url)
        if url.get_backend_name() == "sqlite" and not (url.database and Path(url.database).is_file()):
            return None  # never create the database file: a step refused at its start checks writes nothing
        try:
            engine = make_engine(self.db_url, poolclass=sa.pool.NullPool)
        except Exception:  # noqa: BLE001 - best effort, see the module doc
            return None
        try:
            if not sa.inspect(engine).has_table("inference_steps"):
                return None  # the first plan creates the tables; its end is recorded once they exist
            with writing(engine) as conn:
                return action(conn)
        except Exception as exc:  # noqa: BLE001 - best effort
            log.warning("could not record the %s step of run %s (%s)", self.step, self.run_id, type(exc).__name__)
            return None
        finally:
            engine.dispose()


def _describe(exc: BaseException | None) -> str | None:
    """The error's class; our own errors' messages too (they never carry ticket text or parameters)."""
    if exc is None:
        return None
    if isinstance(exc, InferenceError):
        return f"{type(exc).__name__}: {exc}"
    return type(exc).__name__
