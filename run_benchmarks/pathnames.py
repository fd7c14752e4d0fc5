"""Names that become paths, and files a command is told to write: the one place both are checked.

Run ids, case and hardware names, vendor names, sweep points and bundle members all end up as a folder or
file name. Some come from people (``--run-id``), some from files someone else wrote (a bundle's manifest),
so each goes through ``component`` before it touches the filesystem: one path component, no separators,
no ``..``, nothing hidden or option-like, no control characters, and short enough for any filesystem.
``output_target`` is the same care for ``-o FILE``: only a regular file (or nothing) is replaced.
"""
from __future__ import annotations

import os
import re
import secrets
import stat
import unicodedata
from pathlib import Path

from run_benchmarks.errors import UserError

MAX_COMPONENT = 128  # characters; far under NAME_MAX (255 bytes) so suffixes like .accelbench.tar.gz still fit


def component_problem(value: str) -> str:
    """Why ``value`` cannot be one path component, or '' when it can."""
    if not value:
        return "it is empty"
    if len(value) > MAX_COMPONENT or len(value.encode("utf-8", "surrogatepass")) > 2 * MAX_COMPONENT:
        return f"it is {len(value)} characters long, over {MAX_COMPONENT}"
    if "/" in value or "\\" in value:
        return "it holds a path separator"
    if value in (".", "..") or value.startswith("."):
        return "it starts with '.' (a hidden name, or the folder above)"
    if value.startswith("-"):
        return "it starts with '-' (a command would read it as an option)"
    bad = next((c for c in value if unicodedata.category(c) in ("Cc", "Cf", "Cs", "Zl", "Zp")), None)
    if bad is not None:
        return f"it holds the control character U+{ord(bad):04X}"
    return ""


def component(value: str, what: str, fix: str) -> str:
    """``value`` if it can be a single file or folder name; else a UserError naming ``what`` and ``fix``."""
    problem = component_problem(value)
    if problem:
        shown = value if len(value) <= 60 else value[:57] + "..."
        raise UserError(f"{what} {shown!r} cannot be a file name: {problem}", fix)
    return value


RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+\-]*")


def run_id(value: str, what: str, fix: str) -> str:
    """A run id: a file name (``component``) of letters, digits and ``_ . + -`` only, since it is also
    printed into reports, HTML and the commands accelbench suggests."""
    component(value, what, fix)
    if not RUN_ID.fullmatch(value):
        bad = next(c for c in value if not (c.isascii() and (c.isalnum() or c in "_.+-")))
        raise UserError(f"{what} {value!r} holds {bad!r}: a run id is letters, digits, '_', '.', '+' and '-'", fix)
    return value


def output_target(path: Path, what: str = "-o") -> Path:
    """``path`` if a command may write it: absent, or a regular file (replaced by a rename of a finished
    file beside it). A device, FIFO, socket, folder or link is refused: renaming over it would replace
    the node itself (as root, ``-o /dev/full`` would have turned the device into a file)."""
    path = Path(path)
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        if not path.parent.is_dir():
            raise UserError(f"{what} {path}: no folder {path.parent}",
                            "create it first, or write somewhere else") from None
        return path
    except OSError as exc:
        raise UserError(f"{what} {path}: cannot be checked: {exc.strerror or exc}", "write somewhere else") from None
    if not stat.S_ISREG(mode):
        kind = ("a link" if stat.S_ISLNK(mode) else "a folder" if stat.S_ISDIR(mode) else
                "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "a FIFO" if stat.S_ISFIFO(mode)
                else "a socket" if stat.S_ISSOCK(mode) else "not a regular file")
        raise UserError(f"{what} {path} is {kind}; accelbench replaces only a regular file",
                        "name a new file, or a regular file to replace")
    return path


def write_text_file(path: Path, text: str, what: str = "-o") -> Path:
    """``text`` into a file a user named, whole (``write_text_atomically``), only where ``output_target``
    allows; a failure is a UserError."""
    path = output_target(path, what)
    try:
        write_text_atomically(path, text)
    except OSError as exc:
        raise UserError(f"{what} {path}: cannot be written: {exc.strerror or exc}",
                        "free space there, or write somewhere else") from None
    return path


def write_text_atomically(path: Path, text: str) -> None:
    """``path`` holds ``text`` whole, or stays as it was: written to a temporary file beside it, flushed to the
    disk (fsync), renamed over it, and the folder flushed. A full disk leaves neither an empty nor a half file
    (the temporary one is removed) and raises the OSError. For summary.json and results.json: a reader (the
    store's recovery among them) never takes an empty file for a run's end."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}-{secrets.token_hex(4)}.tmp")
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            tmp.unlink(missing_ok=True)
        except OSError:
            pass
        raise
    fsync_folder(path.parent)


def fsync_folder(folder: Path) -> None:
    """A rename or a link is on the disk only once its folder is (best effort: not every system allows it)."""
    try:
        fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)

