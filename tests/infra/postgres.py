"""A private PostgreSQL server for the tests: Debian's postgresql (``./dev test`` installs it), one cluster in a
scratch folder, listening on a free loopback port and on a socket in that folder, nothing shared with a system
cluster. ``initdb`` refuses root, so as root the folder is given to the ``postgres`` user and the server runs
as that user (``subprocess``'s ``user=``, no shell).

Logins over TCP need a password (scram-sha-256), as a team's server would: tests give it as ``PGPASSWORD`` or
in a ``.pgpass`` file, never in the URL. Each test gets a database of its own (``PostgresServer.database``).

``postgres`` is the session fixture (registered in tests/conftest.py): started once, when a test first asks for
it, and stopped at the end of the session. ``stop``/``start`` keep its port and data: a test that stops the
server starts it again before it ends (``down``).
"""
from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator, Optional

import pytest

USER = "bench"  # the role accelbench logs in as


def binaries() -> Optional[Path]:
    """The newest installed server's bin folder (Debian keeps them under /usr/lib/postgresql/<version>/bin)."""
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"), key=lambda p: int(p.parts[-3]))
    if found:
        return found[-1].parent
    initdb = shutil.which("initdb")
    return Path(initdb).parent if initdb else None


def _free_port() -> int:
    """Outside the kernel's ephemeral range (training/contract/ports.py): bind(0)'s port lies where every outgoing
    connection draws its own, and the other lanes' could take it during initdb, before the server listens."""
    from training.contract import ports

    return ports.free_ports(1)[0]


@dataclass
class PostgresServer:
    root: Path
    bin: Path
    port: int = 0
    password: str = field(default_factory=lambda: secrets.token_hex(12))

    @property
    def data(self) -> Path:
        return self.root / "data"

    @property
    def socket_dir(self) -> Path:
        return self.root / "socket"

    def _as_owner(self, argv: list, check: bool = True, timeout: float = 60) -> subprocess.CompletedProcess:
        user = "postgres" if os.geteuid() == 0 else None
        return subprocess.run(argv, user=user, capture_output=True, text=True, check=check, timeout=timeout,
                              cwd=self.root)

    def init(self) -> "PostgresServer":
        self.root.mkdir(parents=True, exist_ok=True)
        self.socket_dir.mkdir(exist_ok=True)
        if os.geteuid() == 0:
            shutil.chown(self.root, "postgres", "postgres")
            shutil.chown(self.socket_dir, "postgres", "postgres")
        self.port = self.port or _free_port()
        self._as_owner([str(self.bin / "initdb"), "-D", str(self.data), "-U", "postgres", "--auth-local=trust",
                        "--auth-host=scram-sha-256", "-E", "UTF8", "--no-instructions"])
        with open(self.data / "postgresql.conf", "a") as conf:  # written by us, read by the server (its user)
            conf.write(f"\nport = {self.port}\nlisten_addresses = '127.0.0.1'\n"
                       f"unix_socket_directories = '{self.socket_dir}'\nfsync = off\nmax_connections = 60\n")
        return self

    def start(self) -> None:
        self._as_owner([str(self.bin / "pg_ctl"), "-D", str(self.data), "-l", str(self.root / "server.log"), "-w",
                        "-t", "60", "start"])

    def stop(self) -> None:
        """Fast shutdown: the server ends every session at once, as a crash or a maintenance stop would."""
        self._as_owner([str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", "fast", "-w", "stop"], check=False)

    @contextlib.contextmanager
    def down(self) -> Iterator[None]:
        """The server stopped for the block, started again after it (also when the block fails)."""
        self.stop()
        try:
            yield
        finally:
            self.start()

    def psql(self, sql: str, database: str = "postgres") -> str:
        """``sql`` as the superuser over the private socket (trust); the output, unaligned."""
        done = self._as_owner([str(self.bin / "psql"), "-h", str(self.socket_dir), "-p", str(self.port), "-U",
                               "postgres", "-d", database, "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-c", sql])
        return done.stdout

    def create_user(self) -> None:
        self.psql(f"CREATE ROLE {USER} LOGIN PASSWORD '{self.password}'")

    def database(self, name: str) -> str:
        """A new empty database owned by the test role; its URL (no password: that is ``env``'s)."""
        self.psql(f'CREATE DATABASE "{name}" OWNER {USER}')
        return self.url(name)

    def url(self, name: str) -> str:
        return f"postgresql://{USER}@127.0.0.1:{self.port}/{name}"

    @property
    def env(self) -> dict[str, str]:
        """What a client needs to log in: the password as libpq reads it."""
        return {"PGPASSWORD": self.password}


def start_postgres(root: Path) -> PostgresServer:
    where = binaries()
    if where is None:
        pytest.skip("needs PostgreSQL: no initdb under /usr/lib/postgresql (./dev test installs Debian's postgresql)")
    server = PostgresServer(root, where).init()
    server.start()
    server.create_user()
    return server


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresServer]:
    """The private server, once per session (in one lane: tests/conftest.py). Its folder is a temporary folder
    of its own, not under pytest's (which is root's, mode 0700: the postgres user could not reach it)."""
    root = Path(tempfile.mkdtemp(prefix="accelbench-postgres-"))
    try:
        server = start_postgres(root)
        try:
            yield server
        finally:
            server.stop()
    finally:
        shutil.rmtree(root, ignore_errors=True)
