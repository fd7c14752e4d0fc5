"""One connection to the store, as the store's logic uses it whichever engine holds the rows: ``execute`` with
``?`` markers (put in the engine's style by its dialect), rows read by column name or position, one write
transaction at a time under the store's write lock, and every driver error turned into a ``StoreError``.

Every result is read whole before ``execute`` returns: a driver error met while reading rows (SQLite reads a
damaged page only when a row on it is fetched) is then raised here, as a StoreError, never later by a loop
outside the store. The store reads its rows whole anyway (reports, repair)."""
from __future__ import annotations

from typing import Any, Iterator, Optional, Sequence

from run_benchmarks.results.store.dialect import Dialect
from run_benchmarks.results.store.faults import StoreError


class Result:
    def __init__(self, rows: list, lastrowid: Optional[int] = None):
        self.rows, self.lastrowid = rows, lastrowid

    def fetchone(self) -> Any:
        return self.rows[0] if self.rows else None

    def fetchall(self) -> list:
        return list(self.rows)

    def __iter__(self) -> Iterator:
        return iter(self.rows)


class Connection:
    """The engine-neutral part; an engine gives ``_execute`` (its driver's call, rows read whole),
    ``_error`` (its driver's error as a StoreError), ``_begin`` (its write lock) and ``close``."""

    dialect: Dialect
    where: str  # the store, as messages name it (a path, or a URL without its password)
    wait_s: float  # how long opening waits for another writer's lock

    def __init__(self) -> None:
        self.in_transaction = False

    def execute(self, sql: str, params: Sequence = ()) -> Result:
        try:
            return self._execute(self.dialect.sql(sql) if params else sql, tuple(params) if params else None)
        except StoreError:
            raise
        except Exception as exc:
            error = self._error(exc)
            if error is None:
                raise
            raise error from exc

    def begin_write(self, wait_s: float) -> None:
        """Open a write transaction under the store's write lock, waiting up to ``wait_s`` for another writer."""
        try:
            self._begin(max(0.0, wait_s))
        except StoreError:
            self.rollback()
            raise
        except Exception as exc:
            self.rollback()
            error = self._error(exc)
            if error is None:
                raise
            raise error from exc
        self.in_transaction = True

    def commit(self) -> None:
        self.execute("COMMIT")
        self.in_transaction = False

    def rollback(self) -> None:
        """Give the transaction back (nothing of it is kept); a connection already lost has nothing to give."""
        self.in_transaction = False
        try:
            self._execute("ROLLBACK", None)
        except Exception:
            pass

    def column_names(self, table: str) -> list[str]:
        return [row[0] for row in self.execute(self.dialect.columns_sql, (table,))]

    def names(self) -> set[str]:
        """The store's tables and indexes that exist."""
        return {row[0] for row in self.execute(self.dialect.tables_sql)}

    # an engine's own
    def _execute(self, sql: str, params: Optional[tuple]) -> Result:
        raise NotImplementedError

    def _error(self, exc: Exception) -> Optional[StoreError]:
        raise NotImplementedError

    def _begin(self, wait_s: float) -> None:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError
