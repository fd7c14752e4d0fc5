"""Nodes in containers: one per node, on the host's Docker engine, removed by name however the run ends.

A remote host's engine is reached through the host's own SSH connection (the
one whose key was verified): each connection of the Docker SDK becomes an SSH
channel running ``docker system dial-stdio`` there, bridged to a local socket.
Paths are bind-mounted at the same place inside the container, so the
launcher's argv and the logs' paths mean the same inside and out.
"""
from __future__ import annotations

import os
import shutil
import socket
import tempfile
import threading
from functools import partial
from pathlib import Path, PurePosixPath
from typing import Optional, Sequence

from run_benchmarks.backends.hosts.base import VERSION_PROBE, Job
from run_benchmarks.backends.hosts.guard import orchestrator_identity, orchestrator_tag

CONTAINER_PREFIX = "accelbench-"
REMOVED_EXIT_CODE = 137  # what a container removed from under us is reported as (as if killed)
BRIDGE_PREFIX = "accelbench-docker-"
BRIDGE_OWNER = "owner"  # in a bridge's folder: host:pid:start of the orchestrator that made it
# Whose a container is: a later run or `accelbench clean` removes those whose orchestrator is dead.
LABEL_RUN = "accelbench.run"
LABEL_HOST, LABEL_PID, LABEL_START = "accelbench.orchestrator.host", "accelbench.orchestrator.pid", \
    "accelbench.orchestrator.start"
LABEL_LOG = "accelbench.log"  # the node's folder on the orchestrator's machine


def owner_labels(run_id: str = "", log_dir: str = "") -> dict[str, str]:
    me = orchestrator_identity()
    labels = {LABEL_HOST: me["host"], LABEL_PID: str(me["pid"]), LABEL_START: me["start"]}
    if run_id:
        labels[LABEL_RUN] = run_id
    if log_dir:
        labels[LABEL_LOG] = log_dir
    return labels


def container_name(run_id: str, case_slug: str, round_index: int, node_rank: int) -> str:
    raw = f"{CONTAINER_PREFIX}{run_id}-{case_slug}-r{round_index}-n{node_rank}"
    return "".join(c if c.isalnum() or c in "_.-" else "-" for c in raw)


class SshDockerBridge:
    """A local unix socket whose connections are SSH channels to the remote ``docker system dial-stdio``."""

    def __init__(self, ssh_client, docker_host: str):
        self.ssh_client, self.docker_host = ssh_client, docker_host
        # /tmp, not $TMPDIR: a unix socket path must stay under 108 bytes. Removed on close.
        self.dir = tempfile.mkdtemp(prefix=BRIDGE_PREFIX, dir="/tmp" if os.path.isdir("/tmp") else None)
        with open(os.path.join(self.dir, BRIDGE_OWNER), "w", encoding="utf-8") as f:
            f.write(orchestrator_tag())  # a later run removes the folder once this process is gone
        self.path = os.path.join(self.dir, "docker.sock")
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.server.bind(self.path)
        self.server.listen(16)
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            self._connect(conn)

    def _connect(self, conn: socket.socket) -> None:
        """One client connection, pumped both ways through its own SSH channel. Everything here is bound to
        this connection: a pump that ends shuts only its own connection (a closure over the loop's variable
        once shut the newest connection instead, so a request sent as a log stream ended got no answer:
        "Remote end closed connection without response")."""
        import shlex

        try:
            channel = self.ssh_client.get_transport().open_session()
            channel.exec_command(shlex.join(["docker", "-H", self.docker_host, "system", "dial-stdio"]))
        except Exception:  # noqa: BLE001 - the SSH connection is gone or refuses: this client sees a closed socket
            conn.close()
            return
        lock, running = threading.Lock(), [2]

        def pump(read, write, done) -> None:
            _pump(read, write, done)
            with lock:
                running[0] -= 1
                last = running[0] == 0
            if last:  # both directions are over: free the channel and the socket
                for close in (channel.close, conn.close):
                    try:
                        close()
                    except (OSError, EOFError):
                        pass

        threading.Thread(target=pump, args=(conn.recv, channel.sendall, channel.shutdown_write), daemon=True).start()
        threading.Thread(target=pump, args=(channel.recv, conn.sendall, partial(conn.shutdown, socket.SHUT_WR)),
                         daemon=True).start()

    def close(self) -> None:
        self.server.close()
        shutil.rmtree(self.dir, ignore_errors=True)


def _pump(read, write, done) -> None:
    try:
        while True:
            data = read(65536)
            if not data:
                break
            write(data)
    except (OSError, EOFError):  # either end closed: the connection is over
        pass
    finally:
        try:
            done()
        except (OSError, EOFError):
            pass


def docker_client(host):
    """The Docker SDK client for ``host``'s engine (local socket, or bridged over its SSH connection)."""
    import docker

    if host.spec.backend == "ssh":
        bridge = SshDockerBridge(host.client, host.spec.docker_host)
        host.on_close(bridge.close)
        return docker.DockerClient(base_url=f"unix://{bridge.path}", timeout=600)
    return docker.DockerClient(base_url=host.spec.docker_host, timeout=600)


class ContainerJob(Job):
    """A node's container: its output streamed to the node's launcher log, removed by name when stopped."""

    def __init__(self, client, container, output: Path, guard=None):
        self.client, self.container, self.name, self.guard = client, container, container.name, guard
        self._pump = threading.Thread(target=self._copy, args=(output,), daemon=True)
        self._pump.start()
        self._code: Optional[int] = None

    def _copy(self, output: Path) -> None:
        with open(output, "ab") as sink:
            try:
                for chunk in self.container.logs(stream=True, follow=True):
                    sink.write(chunk)
                    sink.flush()
            except Exception:  # noqa: BLE001 - the container went away; its exit code tells why
                pass

    def poll(self) -> Optional[int]:
        import docker

        if self._code is None:
            try:
                self.container.reload()
            except docker.errors.NotFound:  # removed by someone else: it is not running
                self._code = REMOVED_EXIT_CODE
                return self._code
            if self.container.status in ("exited", "dead"):
                self._code = int(self.container.attrs["State"]["ExitCode"])
                self._pump.join(timeout=5)
        return self._code

    def stop(self, grace_s: float = 10.0) -> None:
        """Stop (SIGTERM, then SIGKILL after ``grace_s``), keep the exit code, remove."""
        import docker

        from run_benchmarks import signals

        grace_s = 0 if signals.hurried() else grace_s
        try:
            self.container.stop(timeout=int(grace_s))
        except docker.errors.NotFound:
            pass
        self.poll()
        remove_container(self.client, self.name, grace_s)

    def close(self) -> None:
        """The container is removed (by ``stop`` or the runtime's cleanup): its guard has nothing to do."""
        if self.guard is not None:
            self.guard.close(disarm=True)
            self.guard = None


def remove_container(client, name: str, grace_s: float = 10.0) -> None:
    import docker

    try:
        container = client.containers.get(name)
        if container.status == "running":
            container.stop(timeout=int(grace_s))
        container.remove(force=True)
    except docker.errors.NotFound:
        pass


def run_node(client, image: str, name: str, argv: list[str], env: dict, workdir: str,
             mounts: dict[str, str], options, output: Path, labels: Optional[dict] = None,
             guard_factory=None) -> ContainerJob:
    """``mounts``: host path -> 'ro' or 'rw', mounted at the same path inside. ``labels``: more labels
    (whose the container is); ``guard_factory``: starts what removes it if the orchestrator dies first."""
    import docker

    remove_container(client, name)  # a leftover of an earlier, killed run of the same name
    requests = [docker.types.DeviceRequest(count=-1, capabilities=[["gpu"]])] if options.gpus else None
    guard = guard_factory() if guard_factory is not None else None  # armed before the container exists
    try:
        container = _run(client, image, name, argv, env, workdir, mounts, options, requests, labels)
    except BaseException:
        if guard is not None:
            guard.close(disarm=True)
        raise
    output.parent.mkdir(parents=True, exist_ok=True)
    return ContainerJob(client, container, output, guard)


def _run(client, image, name, argv, env, workdir, mounts, options, requests, labels):
    return client.containers.run(
        image, argv, name=name, detach=True, network_mode="host", environment=env, working_dir=workdir,
        volumes={path: {"bind": path, "mode": mode} for path, mode in mounts.items()},
        shm_size=options.shm_size, ipc_mode=options.ipc_mode, devices=options.devices or None,
        device_requests=requests, labels={"accelbench": "node", **(labels or {})}, **privileges(options),
    )


def privileges(options) -> dict:
    """Least privilege unless the vendor asks otherwise: no capabilities but those it names, no
    privilege escalation; ``privileged`` only when set explicitly in its vendor.yaml."""
    import docker

    ulimits = [docker.types.Ulimit(name=name, soft=value, hard=value) for name, value in options.ulimits.items()]
    if options.privileged:
        return {"privileged": True, "ulimits": ulimits or None}
    return {"cap_drop": ["ALL"], "cap_add": list(options.cap_add) or None, "security_opt": ["no-new-privileges"],
            "ulimits": ulimits or None}


def mounts_for(code_root: PurePosixPath | Path, round_dir: PurePosixPath | Path, cache_dir, data_root) -> dict:
    mounts = {str(code_root): "ro", str(round_dir): "rw", str(cache_dir): "rw"}
    if data_root:
        mounts[str(data_root)] = "ro"
    return mounts




def distribution_version(client, image: str, python: str, distributions: Sequence[str]) -> Optional[str]:
    """The version of the first of ``distributions`` installed for ``python`` inside ``image``, or None."""
    container = client.containers.create(image, [python, "-c", VERSION_PROBE, *distributions], network_mode="none",
                                         labels={"accelbench": "probe", **owner_labels()})
    try:  # removed however it ends (``run(remove=True)`` leaves a container that failed to start)
        container.start()
        code = container.wait(timeout=120)["StatusCode"]
        output = container.logs(stdout=True, stderr=False).decode().strip()
        if code:
            raise RuntimeError(f"exit code {code}: {container.logs(stdout=False, stderr=True).decode()[-300:]}")
        return output or None
    finally:
        container.remove(force=True)
