"""SSH test hosts: one ``sshd -D`` per loopback address (127.0.0.2, .3, ...), each its own host key.

Key-only authentication for one generated client key; the known_hosts file is
written from the hosts' real public keys, so clients verify them strictly,
exactly as against remote machines.
"""
from __future__ import annotations

import shutil
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

SSHD = shutil.which("sshd") or "/usr/sbin/sshd"


@dataclass(frozen=True)
class SshTestHost:
    name: str
    address: str
    port: int
    host_key_pub: Path


@dataclass
class SshdCluster:
    root: Path
    hosts: list[SshTestHost]
    client_key: Path
    known_hosts: Path
    user: str
    processes: list[subprocess.Popen]

    def stop(self) -> None:
        for process in self.processes:
            process.terminate()
        for process in self.processes:
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()

    def cluster_yaml(self, count: int | None = None, **host_extra) -> str:
        """A ``configs/cluster.yaml`` naming the first ``count`` of these hosts (all by default); extra keys
        apply to every host."""
        lines = ["hosts:"]
        for host in self.hosts[:count]:
            lines += [f"  - name: {host.name}", "    backend: ssh", f"    address: {host.address}",
                      f"    port: {host.port}", f"    user: {self.user}", f"    identity_file: {self.client_key}",
                      f"    known_hosts: {self.known_hosts}"]
            lines += [f"    {key}: {value}" for key, value in host_extra.items()]
        return "\n".join(lines) + "\n"


def _keygen(path: Path) -> None:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)], check=True)


def _wait_listening(address: str, port: int, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            with socket.create_connection((address, port), timeout=0.5) as s:
                if s.recv(4).startswith(b"SSH-"):
                    return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"sshd on {address}:{port} did not come up")


def start_sshd_cluster(root: Path, count: int, port: int = 2222, first_octet: int = 2,
                       user: str = "root", env: dict[str, str] | None = None) -> SshdCluster:
    """``env``: more variables of every session on every host (e.g. ``PATH`` to put stand-in tools on a host's
    PATH, as a vendor's tools are on a real host's). Every session has ``OMP_NUM_THREADS=1``, as the suite's lanes
    have (tests/lanes.py): a node of one rank would start an OpenMP thread per core, spinning on the cores the
    lanes share; no test reads a thread count of a host's ranks. And ``SHLVL=1``: sshd runs each command with the
    account's shell, and bash sources ``~/.bashrc`` for a command from sshd only as a top-level shell (SHLVL
    below 2 once it has counted itself); the hosts share this machine's account, whose ``~/.bashrc`` may be a
    developer's (here pyenv's init: 0.15 s of CPU per SSH command, 0.3 s with ``python3`` through pyenv's shim,
    against 0.005 and 0.02 s without; a container run makes ~100 SSH commands, one per Docker connection). A
    session gets sshd's own PATH instead: Debian's python3 and docker, which is what the hosts' commands need."""
    session_env = {"OMP_NUM_THREADS": "1", "SHLVL": "1", **(env or {})}
    root.mkdir(parents=True, exist_ok=True)
    Path("/run/sshd").mkdir(parents=True, exist_ok=True)  # sshd's privilege-separation directory
    client_key = root / "client_ed25519"
    if not client_key.exists():
        _keygen(client_key)
    authorized = root / "authorized_keys"
    authorized.write_text(client_key.with_suffix(".pub").read_text())
    authorized.chmod(0o600)
    hosts, processes, known = [], [], []
    for i in range(count):
        name, address = f"h{i}", f"127.0.0.{first_octet + i}"
        host_dir = root / name
        host_dir.mkdir(exist_ok=True)
        host_key = host_dir / "ssh_host_ed25519_key"
        if not host_key.exists():
            _keygen(host_key)
        config = host_dir / "sshd_config"
        config.write_text("\n".join([
            f"ListenAddress {address}:{port}",
            f"HostKey {host_key}",
            f"PidFile {host_dir / 'sshd.pid'}",
            f"AuthorizedKeysFile {authorized}",
            "AuthenticationMethods publickey", "PubkeyAuthentication yes", "PasswordAuthentication no",
            "KbdInteractiveAuthentication no", "PermitRootLogin prohibit-password", "UsePAM no",
            "StrictModes no",  # the test's temp dirs are not root-owned 0755 all the way up
            "Subsystem sftp internal-sftp", "MaxSessions 64", "MaxStartups 64:30:128", "LogLevel ERROR",
            # one SetEnv line: sshd takes the first and ignores later ones
            "SetEnv " + " ".join(f"{key}={value}" for key, value in session_env.items()), "",
        ]))
        processes.append(subprocess.Popen([SSHD, "-D", "-e", "-f", str(config)], stdout=subprocess.DEVNULL,
                                          stderr=open(host_dir / "sshd.log", "ab")))
        public = host_key.with_suffix(".pub")
        known.append(f"[{address}]:{port} " + " ".join(public.read_text().split()[:2]))
        hosts.append(SshTestHost(name, address, port, public))
    known_hosts = root / "known_hosts"
    known_hosts.write_text("\n".join(known) + "\n")
    cluster = SshdCluster(root, hosts, client_key, known_hosts, user, processes)
    try:
        for host in hosts:
            _wait_listening(host.address, host.port)
    except RuntimeError:
        cluster.stop()
        raise
    return cluster
