"""Where a results store lives, from what a user writes as ``--db`` (or test_conf's ``db:``): a file path (SQLite,
the default), ``sqlite:///PATH``, or a ``postgresql://`` / ``postgres://`` URL (a team's shared store).

A URL of any other scheme is refused, naming the ones accelbench serves: before this, a URL was taken as a
file name and the runs "succeeded" into a file ``postgresql:/user@host:5432/db`` under the current folder.
A PostgreSQL URL may not hold a password: it would show in ``ps``, in shell history and in every run's stored
command line. libpq reads it from ``$PGPASSWORD`` or a ``.pgpass`` file (``$PGPASSFILE``) instead. Pure: no
driver is imported here.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Optional
from urllib.parse import parse_qsl, urlsplit

SCHEMES = ("sqlite", "postgresql", "postgres")
SCHEMES_SAID = ("a file path or sqlite:///PATH (SQLite, the default), postgresql://USER@HOST:PORT/DATABASE or "
                "postgres://... (PostgreSQL)")
# Connection parameters of libpq that are secrets: refused in a URL's query as a password in its user part is.
SECRET_PARAMS = ("password", "sslpassword", "sslkey_password")
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]*)://")
_MANGLED = re.compile(r"^(postgres(ql)?|sqlite):/(?!/)", re.IGNORECASE)  # what pathlib makes of a URL


class LocationError(ValueError):
    """A ``--db`` that names no store accelbench can serve: ``fix`` says what to write instead."""

    def __init__(self, message: str, fix: str):
        super().__init__(message)
        self.message, self.fix = message, fix


@dataclass(frozen=True)
class StoreLocation:
    """``path``: the SQLite file; ``url``: the PostgreSQL URL (never with a password, see parse)."""

    path: Optional[Path] = None
    url: Optional[str] = None

    @property
    def engine(self) -> str:
        return "postgresql" if self.url else "sqlite"

    def __str__(self) -> str:
        return self.url or str(self.path)

    def resolved(self) -> "StoreLocation":
        return self if self.url else StoreLocation(path=Path(self.path).resolve())

    def exists(self) -> bool:
        """Whether there is something to open now: a file (or link) at the path; a server always (it is asked)."""
        return bool(self.url) or Path(self.path).is_symlink() or Path(self.path).exists()


def file(path: Path) -> StoreLocation:
    return StoreLocation(path=Path(path))


def parse(text: str, base: Optional[Path] = None) -> StoreLocation:
    """``text`` as written after ``--db``; a relative file path is taken relative to ``base`` when given (test_conf:
    the checkout) and to the current folder otherwise. Raises LocationError."""
    text = str(text).strip()
    if not text:
        raise LocationError("--db is empty", f"write {SCHEMES_SAID}")
    if _MANGLED.match(text):
        raise LocationError(f"{text[:200]!r} looks like a URL missing a slash after its scheme",
                            f"write {SCHEMES_SAID}")
    match = _SCHEME.match(text)
    if match is None:
        path = Path(text).expanduser()
        return file(path if path.is_absolute() or base is None else base / path)
    scheme = match.group(1).lower()
    if scheme not in SCHEMES:
        raise LocationError(f"{_shown(text)}: accelbench cannot store results through {scheme}://",
                            f"write {SCHEMES_SAID}")
    if scheme == "sqlite":
        rest = text[len(match.group(0)):]  # SQLAlchemy's form: sqlite:///relative.db, sqlite:////absolute.db
        if not rest.startswith("/") or rest == "/":
            raise LocationError(f"{text[:200]!r} names no file (an in-memory store would keep nothing)",
                                "write sqlite:///relative/results.db or sqlite:////absolute/results.db (or the path "
                                f"alone); accelbench serves {SCHEMES_SAID}")
        return parse(rest[1:], base)
    return StoreLocation(url=_postgres_url(text))


def _postgres_url(text: str) -> str:
    try:
        parts = urlsplit(text)
        parts.port  # noqa: B018 - parses the port: a bad one raises here, not at connect
    except ValueError as exc:
        raise LocationError(f"{_shown(text)} is not a valid URL: {exc}",
                            "write postgresql://USER@HOST:PORT/DATABASE") from None
    if parts.password is not None or ":" in (parts.netloc.rpartition("@")[0] if "@" in parts.netloc else ""):
        raise LocationError(f"{_shown(text)} holds a password: it would show in `ps`, in shell history and in the "
                            "command line stored with every run",
                            "drop it from the URL and give it to libpq instead: export PGPASSWORD=..., or a line "
                            "HOST:PORT:DATABASE:USER:PASSWORD in ~/.pgpass (chmod 600; or $PGPASSFILE)")
    secrets = [key for key, _ in parse_qsl(parts.query, keep_blank_values=True) if key.lower() in SECRET_PARAMS]
    if secrets:
        raise LocationError(f"{_shown(text)} holds a secret in its {secrets[0]!r} parameter",
                            "drop it from the URL: libpq reads a password from $PGPASSWORD or ~/.pgpass")
    if parts.fragment:
        raise LocationError(f"{_shown(text)} has a #fragment, which names nothing in a database URL",
                            "write postgresql://USER@HOST:PORT/DATABASE")
    return text


def _shown(text: str) -> str:
    """``text`` for an error line: a URL with its password (user part and secret parameters) masked."""
    text = re.sub(r"(://[^/@:]*):[^/@]*@", r"\1:***@", text[:300])
    return re.sub(rf"(?i)\b({'|'.join(SECRET_PARAMS)})=[^&]*", r"\1=***", text)
