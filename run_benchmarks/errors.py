"""User-facing errors: printed as one message with a fix, never as a traceback."""
from __future__ import annotations


class UserError(Exception):
    """Bad input caught before anything runs: a name, a file, a key, a value."""

    def __init__(self, message: str, fix: str | None = None):
        super().__init__(message)
        self.message, self.fix = message, fix

    def __str__(self) -> str:
        return self.message if not self.fix else f"{self.message}\n  fix: {self.fix}"


class PreflightError(UserError):
    """A host or its software is not what the plan needs; nothing was started."""
