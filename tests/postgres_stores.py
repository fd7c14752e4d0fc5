"""What the PostgreSQL store tests share: a database of the test's own on the private server (tests/infra/postgres.py),
the password in the environment as a user gives it, and the rows read back with psycopg itself (not through the
store under test)."""
from __future__ import annotations

import re

import psycopg
import pytest

from run_benchmarks.results.store import location
from run_benchmarks.results.store.location import StoreLocation


@pytest.fixture
def pg(postgres, request, monkeypatch) -> StoreLocation:
    """A new empty database for this test on the session's server; PGPASSWORD set as a user would."""
    name = re.sub(r"[^a-z0-9_]", "_", request.node.name.lower())[:50] + f"_{id(request) % 10000}"
    monkeypatch.setenv("PGPASSWORD", postgres.password)
    return location.parse(postgres.database(name))


def fetch(where: StoreLocation, sql: str, password: str) -> list[dict]:
    with psycopg.connect(where.url, password=password, row_factory=psycopg.rows.dict_row) as conn:
        return conn.execute(sql).fetchall()


def every_text(where: StoreLocation, password: str) -> str:
    """Every value of every row of the store's tables, as text: where a secret must not be."""
    return "\n".join(str(row) for table in ("meta", "runs", "attempts")
                     for row in fetch(where, f"SELECT * FROM {table}", password))
