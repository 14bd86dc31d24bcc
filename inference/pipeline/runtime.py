"""What every step needs: settings, a checked database engine, the source and the model version."""

from __future__ import annotations

import logging
from functools import cached_property

import sqlalchemy as sa

from inference.config import Settings
from inference.modelinfo import check_model_dir, model_version
from inference.store.db import check_connection, make_engine
from inference.store.migrate import VERSION_TABLE
from inference.store.privileges import check_privileges
from inference.store.schema import OUR_TABLES, create_schema
from inference.store.source import Source

log = logging.getLogger("inference")


class Runtime:
    """Checks the model directory and the database before any step reads or writes anything."""

    def __init__(self, settings: Settings, *, create: bool = False):
        self.settings = settings
        self.planning = create  # plan: the source's shape is checked when it is first used (Source.check)
        check_model_dir(settings.model_dir)
        self.engine: sa.Engine = make_engine(settings.db_url)
        try:
            check_connection(self.engine)
            check_privileges(self.engine, settings.source, OUR_TABLES, read_only=(VERSION_TABLE,))
            if create:  # plan: everything that can be checked is, before its first write
                from inference.preflight import check_before_first_write

                check_before_first_write(settings, self)
                create_schema(self.engine)
        except BaseException:
            self.engine.dispose()
            raise

    @cached_property
    def source(self) -> Source:
        if self.planning:  # an outdated schema is refused first, as ever (read-only)
            from inference.store.migrate import state

            schema = state(self.engine)
            if not schema.empty and (problem := schema.problem()) is not None:
                raise problem
        source = Source(self.engine, self.settings.source)
        if self.planning:  # refuses a source that cannot be read by instant and by key, naming the column
            source.check()
        return source

    @cached_property
    def model_version(self) -> str:
        return model_version(self.settings)

    def close(self) -> None:
        self.engine.dispose()

    def __enter__(self) -> Runtime:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
