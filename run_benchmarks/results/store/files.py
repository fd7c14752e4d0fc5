"""The store's file on disk before SQLite opens it: refused when it is not a regular file or an empty one no
process is making, and why this process could not write it (read-only media, permissions, folder)."""
from __future__ import annotations

import os
import sqlite3
import stat
from pathlib import Path
from typing import Optional
from urllib.parse import quote

from run_benchmarks.errors import UserError
from run_benchmarks.results.store.faults import StoreCorrupt, is_locked

_KINDS = ((stat.S_ISDIR, "a folder"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISFIFO, "a named pipe (FIFO)"), (stat.S_ISSOCK, "a socket"))


def file_size(path: Path) -> Optional[int]:
    """The size of the store file, None when there is none yet; anything but a regular file (``--db
    /dev/null``, a folder, a pipe, a broken link) is refused: SQLite would fail on it in ways that read as
    something else (a device reads as a store locked for the whole wait)."""
    try:
        info = os.stat(path)
    except FileNotFoundError:
        if os.path.islink(path):
            raise UserError(f"the results store {path} is a symbolic link to {os.readlink(path)}, which does not "
                            "exist", "point --db at the store itself, or remove the link to start a new store "
                                     "there") from None
        return None
    except OSError as exc:
        raise UserError(f"the results store {path} cannot be looked at: {exc.strerror or exc}",
                        "point --db (or --log-root) at a file you can read") from None
    if stat.S_ISREG(info.st_mode):
        return info.st_size
    what = next((words for test, words in _KINDS if test(info.st_mode)), "not a file")
    raise UserError(f"the results store {path} is {what}, not a regular file: a results store is an SQLite file",
                    "point --db at a file (made if missing), e.g. --db ./results.db; leave --db out to use "
                    "<log root>/results.db")


def empty_file_error(path: Path, reader: bool) -> UserError:
    """An empty file no process holds is never a store: a new store is made whole, then linked into place
    (sqlite_file._create), so an empty file where one should be was emptied or copied wrong. Reading commands
    are refused; writing ones too (StoreCorrupt, so ``store repair`` moves it aside and rebuilds the store from
    results.json). One another process holds a lock on is being made: opened, and waited for as a lock."""
    if reader:
        return UserError(f"{path} is an empty file (0 bytes), not a results store",
                         "point --db (or --log-root) at the store itself; an empty file is what a copy or a "
                         "download that failed leaves, or a shell redirection (> file)")
    return StoreCorrupt(f"the results store {path} is an empty file (0 bytes), not a results store: accelbench "
                        "never leaves one empty, so it was emptied or copied wrong",
                        f"remove it (rm {path}) to start a new store there, or rebuild it from the runs' "
                        f"results.json files: accelbench store repair --db {path} --log-root {path.parent} (it "
                        "moves the empty file aside first); or point --db at another file")


def held_by_another(path: Path) -> bool:
    """Whether another process holds an SQLite lock on the file: an empty file it holds is a store being made
    (by an older accelbench or an sqlite3 shell, which make the file before they write it), not an empty one."""
    try:
        conn = sqlite3.connect(f"file:{quote(str(Path(path).resolve()))}?mode=rw", uri=True, timeout=0,
                               isolation_level=None)
    except sqlite3.Error:
        return False
    try:
        conn.execute("BEGIN IMMEDIATE")  # takes the write lock, writes nothing: given back at once
        conn.execute("ROLLBACK")
        return False
    except sqlite3.Error as exc:
        return is_locked(exc)
    finally:
        conn.close()


def write_blocked(path: Path) -> Optional[str]:
    """Why this process cannot write the store (None when it can): read-only media, a file it may not write,
    or a folder where SQLite cannot make the store's -wal and -shm files."""
    try:
        if os.statvfs(path).f_flag & os.ST_RDONLY:
            return "it is on a read-only file system"
    except OSError:
        pass
    if not os.access(path, os.W_OK):
        return "this process may not write the file (its permissions, or an immutable file)"
    if not os.access(path.parent, os.W_OK | os.X_OK):
        beside = [Path(f"{path}{suffix}") for suffix in ("-wal", "-shm")]
        if not all(p.is_file() and os.access(p, os.W_OK) for p in beside):
            return "its folder is not writable, so SQLite cannot make its -wal and -shm files"
    return None
