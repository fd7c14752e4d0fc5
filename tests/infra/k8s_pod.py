"""One container's start in the test kubelet (tests/infra/k8s_kubelet.py), run as the first process of the
container's own mount, UTS and PID namespaces inside its node's network namespace. It does what the
container runtime would before the command: /etc as an overlay whose writes stay in the pod's folder (the
pod's hosts file, mount points such as /etc/accelbench), each volume at its mountPath, the pod's host name;
then it execs the container's command with the container's environment, which so becomes PID 1.
No image is run: the root file system is this machine's. Its one argument: the JSON file the kubelet wrote.
"""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys


def _mount(*args: str) -> None:
    subprocess.run(["mount", *args], check=True)


def main(spec_path: str) -> None:
    with open(spec_path, encoding="utf-8") as f:
        spec = json.load(f)
    _mount("-t", "overlay", "overlay", "-o", f"lowerdir=/etc,upperdir={spec['etc_upper']},"
                                             f"workdir={spec['etc_work']}", "/etc")
    with open("/etc/hosts", "w", encoding="utf-8") as f:
        f.write(spec["hosts"])
    with open("/etc/hostname", "w", encoding="utf-8") as f:
        f.write(spec["hostname"] + "\n")
    socket.sethostname(spec["hostname"])
    for volume in sorted(spec["mounts"], key=lambda m: len(m["target"])):  # parents first
        target = volume["target"]
        if volume["kind"] == "tmpfs":
            _mount("-t", "tmpfs", "-o", f"size={volume['size']}", "tmpfs", target)
            continue
        if volume["source"] == target:  # the shared claim: this machine's folder at that very path
            continue
        if os.path.isdir(volume["source"]):
            os.makedirs(target, exist_ok=True)
        elif not os.path.exists(target):
            open(target, "a").close()
        _mount("--bind", volume["source"], target)
        if volume.get("readonly"):
            _mount("-o", "remount,bind,ro", target)
    argv = spec["argv"]
    os.execvpe(argv[0], argv, spec["env"])


if __name__ == "__main__":
    main(sys.argv[1])
