"""The PostgreSQL engine: a team's shared store in a database server, through psycopg 3 (the optional extra
``postgres``: imported only when a ``postgresql://`` store is opened).

The URL never holds a password (location.py refuses one); libpq reads it from ``$PGPASSWORD`` or a ``.pgpass``
file. Every write takes the store's advisory write lock first (dialect.py), so writers on many machines
take turns as SQLite's do on one, and readers are never blocked. A connection the server dropped (a restart,
a network cut) is opened again before the next statement that is not inside a write; a write cut short is
retried whole by the store (store.py), within the same budget as a lock held elsewhere."""
from __future__ import annotations

from typing import Any, Optional

from run_benchmarks.errors import UserError
from run_benchmarks.results.store.clock import WAIT_ENV
from run_benchmarks.results.store.connection import Connection, Result
from run_benchmarks.results.store.dialect import POSTGRES, WRITE_LOCK_KEY
from run_benchmarks.results.store.faults import StoreError, StoreUnavailable
from run_benchmarks.results.store.schema import add_missing_columns, check_version, create_schema

CONNECT_TIMEOUT_S = 10  # libpq's own bound on reaching a server that does not answer (its minimum is 2)
_LOCKED = ("55P03", "40001", "40P01")  # lock_not_available, serialization_failure, deadlock_detected
_GONE = ("57P01", "57P02", "57P03")  # the server shut down, crashed, or is starting: try again later
PASSWORD_FIX = ("give the password to libpq, never in the URL: export PGPASSWORD=..., or a line "
                "HOST:PORT:DATABASE:USER:PASSWORD in ~/.pgpass (chmod 600; or $PGPASSFILE)")


def _driver() -> Any:
    try:
        import psycopg
    except ImportError:
        raise UserError("a postgresql:// results store needs the psycopg driver, which is not installed",
                        "install accelbench's postgres extra: pip install 'accelbench[postgres]' (psycopg[binary])") \
            from None
    return psycopg


class Row:
    """A row readable by column name and by position, as SQLite's rows are."""

    __slots__ = ("_index", "_values")

    def __init__(self, index: dict, values: tuple):
        self._index, self._values = index, values

    def __getitem__(self, key: Any) -> Any:
        return self._values[self._index[key] if isinstance(key, str) else key]

    def keys(self) -> list[str]:
        return list(self._index)

    def __iter__(self):
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)


def _rows(cursor: Any):
    index = {column.name: i for i, column in enumerate(cursor.description or ())}
    return lambda values: Row(index, tuple(values))


class PostgresConnection(Connection):
    dialect = POSTGRES

    def __init__(self, url: str, wait_s: float):
        super().__init__()
        self.url = self.where = url
        self.wait_s = wait_s
        self.raw: Any = None
        self._connect()

    def _connect(self) -> None:
        psycopg = _driver()
        try:
            self.raw = psycopg.connect(self.url, autocommit=True, row_factory=_rows, application_name="accelbench",
                                       connect_timeout=max(2, min(CONNECT_TIMEOUT_S, int(self.wait_s) or 2)))
        except psycopg.Error as exc:
            raise self._error(exc) from exc

    def _live(self) -> Any:
        if self.raw is None or self.raw.closed:
            if self.in_transaction:  # a write's first statements went with the old connection: never go on
                raise StoreError(f"{self.where}: the connection was lost during a write", "unreachable")
            self._connect()
        return self.raw

    def _execute(self, sql: str, params: Optional[tuple]) -> Result:
        if sql == "ROLLBACK" and (self.raw is None or self.raw.closed):
            return Result([])  # the server ended the transaction with the connection
        cursor = self._live().execute(sql, params)
        return Result(cursor.fetchall() if cursor.description else [])

    def _begin(self, wait_s: float) -> None:
        raw = self._live()
        raw.execute("BEGIN")
        raw.execute(f"SET LOCAL lock_timeout = {max(1, int(wait_s * 1000))}")
        raw.execute("SELECT pg_advisory_xact_lock(%s)", (WRITE_LOCK_KEY,))

    def _error(self, exc: Exception) -> Optional[StoreError]:
        psycopg = _driver()
        if not isinstance(exc, psycopg.Error):
            return None
        state = getattr(exc, "sqlstate", None) or ""
        text = " ".join(str(exc).split()) or type(exc).__name__
        lost = self.raw is None or self.raw.closed
        if state in _LOCKED:
            kind = "locked"
        elif state.startswith("28") or "password" in text.lower():
            kind = "login"
        elif state == "53100":
            kind = "full"
        elif state == "3D000" or "does not exist" in text:
            kind = "other"
        elif state.startswith("08") or state in _GONE or (isinstance(exc, psycopg.OperationalError) and lost):
            kind = "unreachable"
        else:
            kind = "other"
        return StoreError(f"{self.where}: {text[:500]}", kind)

    def close(self) -> None:
        if self.raw is not None:
            self.raw.close()


def open_server(store: Any, reader: bool) -> PostgresConnection:
    """The store's connection; a writer makes the tables in an empty database, a reader never does."""
    url = str(store.location)
    try:
        conn = PostgresConnection(url, store.wait_s)
    except StoreError as exc:
        raise open_error(store, exc) from None
    try:
        if reader and not {"meta", "runs", "attempts"} <= conn.names():
            raise UserError(f"no results store at {url}: the database holds no accelbench tables",
                            f"run a case with --db {url} (it makes them), or copy a store in: accelbench store "
                            f"copy logs/results.db {url}")
        if not reader:
            create_schema(conn)
        check_version(conn, write=not reader)
        add_missing_columns(conn, write=not reader)
    except StoreError as exc:
        conn.close()
        raise open_error(store, exc) from None
    except BaseException:
        conn.close()
        raise
    return conn


def open_error(store: Any, exc: StoreError) -> UserError:
    url = str(store.location)
    if exc.kind == "unreachable":
        failure = StoreUnavailable(f"the results store {url} cannot be reached: {exc}",
                                   f"start its database server, or check the URL's host and port (pg_isready -d "
                                   f"{url}), then run again; rounds measured meanwhile are kept in their "
                                   "results.json files for: accelbench store repair")
        failure.reason = "the database server cannot be reached"
        return failure
    if exc.kind == "login":
        return UserError(f"the results store {url} refused the login: {exc}", PASSWORD_FIX)
    if exc.kind == "locked":
        return StoreUnavailable(f"the results store {url} is locked: another process has held its write lock for "
                                f"more than {store.wait_s:g} s",
                                f"let the other writer finish, then run again; ${WAIT_ENV} sets how long to wait")
    if exc.kind == "newer":
        return UserError(f"{url} is not a store this accelbench reads: {exc}",
                         "upgrade accelbench (git pull in its checkout, then reinstall)")
    return UserError(f"the results store {url} cannot be opened: {exc}",
                     "check the URL's database name (it must exist: createdb), and that its user may create "
                     "tables in it")
