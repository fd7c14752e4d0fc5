"""A remote machine over SSH (paramiko): host keys verified, never added; key authentication only.

Commands cross as argv lists, each word ``shlex.quote``d into the one string SSH
carries, so a case name, path or host with shell metacharacters stays data.
Files move over SFTP.
"""
from __future__ import annotations

import logging
import os
import shlex
import socket
import stat
import threading
import time
import uuid
from pathlib import Path, PurePosixPath
from typing import Mapping, Optional, Sequence

import paramiko

from run_benchmarks.catalog.config_files import HostSpec
from run_benchmarks.errors import PreflightError
from run_benchmarks import signals
from run_benchmarks.backends.hosts import reaper
from run_benchmarks.backends.hosts.base import VERSION_PROBE, CommandResult, Host, Job
from run_benchmarks.backends.hosts.guard import (DEATH_GRACE_S, DISARM, ENV_ORCHESTRATOR, ENV_TAG, guard_argv, orchestrator_tag)



def remote_command(argv: Sequence[str], env: Mapping[str, str] | None = None, cwd: str | None = None) -> str:
    """The shell line SSH needs, every word quoted: ``cd CWD && exec env K=V ... ARGV``."""
    words = ["env", *(f"{k}={v}" for k, v in (env or {}).items()), *argv] if env else list(argv)
    line = "exec " + shlex.join(words)
    return f"cd {shlex.quote(cwd)} && {line}" if cwd else line


def open_client(spec: HostSpec) -> paramiko.SSHClient:
    """An authenticated connection, or a ``PreflightError`` that says what is wrong and how to fix it."""
    where = f"host {spec.name} ({spec.address}:{spec.port})"
    known_hosts = Path(os.path.expanduser(spec.known_hosts))
    client = paramiko.SSHClient()
    if not known_hosts.is_file():
        raise PreflightError(f"{where}: known_hosts file {known_hosts} not found; accelbench never trusts an "
                             "unknown host key",
                             f"check the host's key fingerprint, then: ssh-keyscan -p {spec.port} {spec.address} "
                             f">> {known_hosts}")
    client.load_host_keys(str(known_hosts))
    client.set_missing_host_key_policy(paramiko.RejectPolicy())
    key_file = os.path.expanduser(spec.identity_file) if spec.identity_file else None
    if key_file is not None and not os.path.isfile(key_file):
        raise PreflightError(f"{where}: identity_file {key_file} not found",
                             "fix identity_file in the cluster config (the private key's path on this machine), "
                             "or remove it to use the SSH agent and ~/.ssh keys")
    # paramiko logs a failed handshake's traceback from its transport thread; the error below says it all.
    if not logging.getLogger("paramiko").handlers:
        logging.getLogger("paramiko").addHandler(logging.NullHandler())
    try:
        client.connect(spec.address, port=spec.port, username=spec.user or None, key_filename=key_file,
                       look_for_keys=key_file is None, allow_agent=key_file is None,
                       timeout=spec.connect_timeout_s, banner_timeout=spec.connect_timeout_s,
                       auth_timeout=spec.connect_timeout_s)
    except paramiko.BadHostKeyException as exc:
        raise PreflightError(f"{where}: its host key ({exc.key.get_name()} {exc.key.get_fingerprint().hex()}) "
                             f"does not match the one in {known_hosts}; refusing to connect (the host was "
                             "reinstalled, or someone is in between)",
                             f"verify the new key out of band, then replace its line in {known_hosts}") from None
    except paramiko.SSHException as exc:
        transport = client.get_transport()
        if "protocol banner" in str(exc) or (transport is not None and not transport.remote_version):
            raise PreflightError(f"{where}: no SSH banner within {spec.connect_timeout_s:g} s: is sshd running on "
                                 "that port?", "check the port (something else accepts connections there), or "
                                               "raise connect_timeout_s") from None
        if "not found in known_hosts" in str(exc):
            raise PreflightError(f"{where}: not in {known_hosts}; accelbench never trusts an unknown host key",
                                 f"check the host's key fingerprint, then: ssh-keyscan -p {spec.port} "
                                 f"{spec.address} >> {known_hosts}") from None
        raise PreflightError(f"{where}: SSH failed: {exc}",
                             "check user and identity_file in the cluster config, and that the key is in the "
                             "host's authorized_keys") from None
    except (socket.timeout, TimeoutError):
        raise PreflightError(f"{where}: no answer within {spec.connect_timeout_s:g} s",
                             "check the address, port and that sshd runs; or raise connect_timeout_s") from None
    except OSError as exc:
        raise PreflightError(f"{where}: unreachable: {exc.strerror or exc}",
                             "check the address and port, and that sshd runs there") from None
    return client


class SshJob(Job):
    """A remote command whose output is copied into a local file as it comes."""

    def __init__(self, channel: paramiko.Channel, output: Path, on_stop, host_name: str = "the host"):
        self.channel, self.on_stop, self.host_name = channel, on_stop, host_name
        self._pump = threading.Thread(target=self._copy, args=(output,), daemon=True)
        self._pump.start()

    def _copy(self, output: Path) -> None:
        with open(output, "ab") as sink:
            while True:
                data = self.channel.recv(65536)
                if not data:
                    return
                sink.write(data)
                sink.flush()

    def poll(self) -> Optional[int]:
        try:
            if not self.channel.exit_status_ready():
                return None
            self._pump.join(timeout=5)
            return self.channel.recv_exit_status()
        except (OSError, EOFError, paramiko.SSHException):  # the connection died under it: no status will come
            return -1

    def ending(self) -> Optional[str]:
        """paramiko reports -1 both for a remote process ended by a signal and for a connection that died;
        a transport that is no longer active tells the second apart."""
        transport = self.channel.get_transport()
        if self.poll() == -1 and (transport is None or not transport.is_active()):
            return f"connection to {self.host_name} lost"
        return None

    def stop(self, grace_s: float = 10.0) -> None:
        try:
            self.on_stop(1.0 if signals.hurried() else grace_s)
        except (paramiko.SSHException, EOFError, OSError):
            pass  # the connection is gone: the job's watchdog there ends it (its stdin hit EOF)
        self.channel.close()

    def close(self) -> None:
        self.channel.close()  # the remote watchdog's stdin ends: it sweeps what is left of the tag


class SshGuard:
    """A remote watchdog with no command of its own: runs ``cleanup`` there when the connection drops."""

    def __init__(self, channel: paramiko.Channel):
        self.channel = channel

    def close(self, disarm: bool = False) -> None:
        try:
            if disarm:
                self.channel.sendall(DISARM)
            self.channel.shutdown_write()
        except (OSError, EOFError, paramiko.SSHException):
            pass
        self.channel.close()


class SshHost(Host):
    def __init__(self, spec: HostSpec):
        super().__init__(spec)
        self.client = open_client(spec)
        self._sftp: Optional[paramiko.SFTPClient] = None
        self._lock = threading.Lock()

    @property
    def sftp(self) -> paramiko.SFTPClient:
        with self._lock:
            if self._sftp is None:
                self._sftp = self.client.open_sftp()
            return self._sftp

    def start(self, argv: Sequence[str], env: Mapping[str, str], cwd: Path, output: Path) -> Job:
        """Every process the command starts carries a tag in its environment, by which ``stop`` finds them
        all: launchers put workers in sessions of their own, out of reach of a process-group signal."""
        output.parent.mkdir(parents=True, exist_ok=True)
        tag = f"accelbench-{uuid.uuid4().hex}"
        channel = self.client.get_transport().open_session()
        channel.set_combine_stderr(True)
        # Under a watchdog that reads the channel's stdin: without a pty sshd sends no SIGHUP when the
        # connection drops, but the stdin ends, and the watchdog then kills every process of the tag.
        watched = guard_argv("python3", tag, DEATH_GRACE_S, (), argv)
        channel.exec_command(remote_command(watched, {**env, ENV_TAG: tag}, str(cwd)))
        return SshJob(channel, output, lambda grace_s: self._kill_tagged(tag, grace_s), self.name)

    def start_guard(self, cleanup: Sequence[str]) -> SshGuard:
        channel = self.client.get_transport().open_session()
        channel.exec_command(remote_command(guard_argv("python3", f"accelbench-guard-{uuid.uuid4().hex}",
                                                       DEATH_GRACE_S, cleanup),
                                            {ENV_ORCHESTRATOR: orchestrator_tag()}))
        return SshGuard(channel)

    def _kill_tagged(self, tag: str, grace_s: float) -> None:
        """The reaper's stop there (TERM, ``grace_s``, KILL), watched from here: a second signal while it
        waits (signals.hurried) sends a stop with no grace beside it, which kills what is left at once, as
        a local stop cuts its grace short."""
        channel = self.client.get_transport().open_session(timeout=30)
        channel.exec_command(remote_command(reaper.stop_argv("python3", tag, grace_s)))
        deadline, hurried = time.monotonic() + grace_s + 30, grace_s <= 0
        try:
            while not channel.exit_status_ready() and time.monotonic() < deadline:
                if not hurried and signals.hurried():
                    hurried = True
                    self.run(reaper.stop_argv("python3", tag, 0), timeout_s=30)
                time.sleep(0.05)
        finally:
            channel.close()

    def run(self, argv: Sequence[str], timeout_s: float = 60.0) -> CommandResult:
        channel = self.client.get_transport().open_session(timeout=timeout_s)
        channel.settimeout(timeout_s)
        channel.exec_command(remote_command(argv))
        stdout, stderr = channel.makefile("rb"), channel.makefile_stderr("rb")
        out, err = stdout.read().decode(errors="replace"), stderr.read().decode(errors="replace")
        return CommandResult(channel.recv_exit_status(), out, err)

    def distribution_version(self, python: str, distributions: Sequence[str]) -> Optional[str]:
        result = self.run([python, "-c", VERSION_PROBE, *distributions])
        return result.stdout.strip() or None

    def exists(self, remote: PurePosixPath) -> bool:
        try:
            self.sftp.stat(str(remote))
            return True
        except FileNotFoundError:
            return False

    def write_text(self, remote: PurePosixPath, text: str) -> None:
        self.makedirs(PurePosixPath(remote).parent)
        with self.sftp.open(str(remote), "w") as f:
            f.write(text)

    def makedirs(self, remote: PurePosixPath) -> None:
        missing = []
        path = PurePosixPath(remote)
        while str(path) not in ("/", "."):
            try:
                self.sftp.stat(str(path))
                break
            except FileNotFoundError:
                missing.append(path)
                path = path.parent
        for folder in reversed(missing):
            try:
                self.sftp.mkdir(str(folder))
            except OSError:
                if not self.exists(folder):  # made meanwhile by another writer is fine
                    raise

    def put(self, local: Path, remote: Path) -> None:
        """Whole or not at all: written beside the target, then renamed over it."""
        self.makedirs(PurePosixPath(remote).parent)
        partial = f"{remote}.partial-{uuid.uuid4().hex[:8]}"
        self.sftp.put(str(local), partial)
        self.sftp.posix_rename(partial, str(remote))

    def get(self, remote: Path, local: Path) -> None:
        """A file, or a folder with everything under it."""
        local = Path(local)
        attrs = self.sftp.stat(str(remote))
        if not stat.S_ISDIR(attrs.st_mode):
            local.parent.mkdir(parents=True, exist_ok=True)
            self.sftp.get(str(remote), str(local))
            return
        local.mkdir(parents=True, exist_ok=True)
        for entry in self.sftp.listdir_attr(str(remote)):
            self.get(PurePosixPath(remote) / entry.filename, local / entry.filename)

    def close(self) -> None:
        super().close()
        if self._sftp is not None:
            self._sftp.close()
        self.client.close()
