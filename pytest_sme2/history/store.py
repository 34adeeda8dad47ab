"""The history store: a database URL (a SQLite path or ``sqlite:///...``, or
``postgresql://...``) behind SQLAlchemy. Many writers at once lose nothing: a session is one
transaction, and its content hash is unique, so a repeated import or a retried CI job adds it
once. Every failure to use the store is one :class:`HistoryError` line."""

from __future__ import annotations

import time
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING

from pytest_sme2.history import HistoryError, require
from pytest_sme2.history.records import SessionPoints

if TYPE_CHECKING:
    import pandas as pd
    from sqlalchemy.engine import Engine

DEFAULT_STORE = "sme2-history.sqlite"
SQLITE_BUSY_TIMEOUT_S = 60.0      # parallel writers (xdist, CI jobs) wait for each other


def engine_url(url: str) -> str:
    """The SQLAlchemy URL for what a user gives: a path means SQLite; ``postgresql://`` uses
    psycopg 3 (SQLAlchemy's own default driver for it is psycopg2)."""
    if url.startswith(("postgresql://", "postgres://")):
        return "postgresql+psycopg://" + url.split("://", 1)[1]
    if "://" in url:
        return url
    return f"sqlite:///{Path(url).expanduser().resolve()}"


def describe(url: str) -> str:
    """The URL without its password, for messages."""
    require("sqlalchemy")
    from sqlalchemy.engine import make_url  # sqlalchemy: an optional extra ([history])

    return make_url(engine_url(url)).render_as_string(hide_password=True)


class HistoryStore:
    """One open store. ``record`` adds a session; ``frame`` reads every point as a DataFrame."""

    def __init__(self, url: str) -> None:
        require("sqlalchemy")
        from sqlalchemy import create_engine  # sqlalchemy: an optional extra ([history])

        from pytest_sme2.history import schema  # sqlalchemy: an optional extra ([history])

        self.schema = schema    # the tables, read by every method (sqlalchemy's)
        self.url = url
        full = engine_url(url)
        if full.startswith("postgresql"):
            require("psycopg")
            args = {"connect_timeout": 10}
        else:
            args = {"timeout": SQLITE_BUSY_TIMEOUT_S}
            Path(full.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
        self.engine: Engine = create_engine(full, connect_args=args, pool_pre_ping=True)
        self._guard("open", self._prepare)

    def _guard(self, what: str, fn, *args):
        from sqlalchemy.exc import (  # sqlalchemy: an optional extra ([history])
            DBAPIError, SQLAlchemyError)

        try:
            return fn(*args)
        except HistoryError:
            raise
        except DBAPIError as e:
            reason = str(e.orig).strip().splitlines()[0] if e.orig else type(e).__name__
            raise HistoryError(f"history store {describe(self.url)}: cannot {what}: "
                               f"{reason}") from None
        except SQLAlchemyError as e:
            raise HistoryError(f"history store {describe(self.url)}: cannot {what}: "
                               f"{str(e).splitlines()[0]}") from None

    def _prepare(self) -> None:
        from sqlalchemy.exc import (  # sqlalchemy: an optional extra ([history])
            IntegrityError, OperationalError, ProgrammingError)

        schema = self.schema

        for attempt in range(3):   # two writers creating the tables at once: one wins
            try:
                schema.metadata.create_all(self.engine, checkfirst=True)
                break
            except (IntegrityError, ProgrammingError, OperationalError):
                if attempt == 2:
                    raise
                time.sleep(0.2 * (attempt + 1))
        with self.engine.begin() as conn:
            row = conn.execute(schema.meta.select().where(schema.meta.c.name == "schema_version")
                               ).first()
            if row is None:
                try:
                    with conn.begin_nested():
                        conn.execute(schema.meta.insert().values(
                            name="schema_version", value=str(schema.SCHEMA_VERSION)))
                except IntegrityError:
                    pass   # another writer stamped it first
                return
            found = int(row.value)
        if found > schema.SCHEMA_VERSION:
            raise HistoryError(
                f"history store {describe(self.url)} has schema version {found}, newer than "
                f"this pytest-sme2 reads ({schema.SCHEMA_VERSION}): upgrade pytest-sme2; "
                f"nothing was written")
        if found < schema.SCHEMA_VERSION:
            self._migrate(found)

    def _migrate(self, found: int) -> None:
        from sqlalchemy import text  # sqlalchemy: an optional extra ([history])

        schema = self.schema

        with self.engine.begin() as conn:
            for version in range(found + 1, schema.SCHEMA_VERSION + 1):
                for statement in schema.MIGRATIONS.get(version, ()):
                    conn.execute(text(statement))
            conn.execute(schema.meta.update().where(schema.meta.c.name == "schema_version")
                         .values(value=str(schema.SCHEMA_VERSION)))

    def record(self, sp: SessionPoints) -> bool:
        """Add one session and its points in one transaction; False when it was already
        there (same content)."""
        return self._guard("record the session", self._record, sp)

    def _record(self, sp: SessionPoints) -> bool:
        from sqlalchemy.exc import IntegrityError  # sqlalchemy: an optional extra ([history])

        schema = self.schema

        try:
            with self.engine.begin() as conn:
                session_id = conn.execute(schema.sessions.insert().values(
                    **asdict(sp.session))).inserted_primary_key[0]
                if sp.points:
                    conn.execute(schema.points.insert(),
                                 [{**asdict(p), "session_id": session_id} for p in sp.points])
        except IntegrityError:
            if self._has(sp.session.uid):
                return False
            raise
        return True

    def _has(self, uid: str) -> bool:
        from sqlalchemy import select  # sqlalchemy: an optional extra ([history])

        schema = self.schema

        with self.engine.connect() as conn:
            return conn.execute(select(schema.sessions.c.id).where(
                schema.sessions.c.uid == uid)).first() is not None

    def frame(self) -> pd.DataFrame:
        """Every point with its session's identity, one row each (see ``series.COLUMNS``)."""
        return self._guard("read", self._frame)

    def _frame(self) -> pd.DataFrame:
        import pandas as pd  # pandas: only a read of the points needs it
        from sqlalchemy import select  # sqlalchemy: an optional extra ([history])

        from pytest_sme2.history.series import COLUMNS  # pandas: only a read of the points needs it

        s, p = self.schema.sessions, self.schema.points
        query = select(p, s.c.uid, s.c.commit_sha, s.c.branch, s.c.time, s.c.ci_run, s.c.host,
                       s.c.versions).join(s, p.c.session_id == s.c.id)
        with self.engine.connect() as conn:
            rows = conn.execute(query).mappings().all()
        return pd.DataFrame([dict(r) for r in rows], columns=COLUMNS)

    def close(self) -> None:
        self.engine.dispose()


def open_store(url: str | None) -> HistoryStore:
    return HistoryStore(url or DEFAULT_STORE)
