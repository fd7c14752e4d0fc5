"""The test kind's smi tool: `list` prints its three devices, `query` one CSV line of readings per device
(index, name, utilisation %, memory used MiB, power W), in the shape of nvidia-smi's CSV query output, and
`processes` one line per process on a device (index, pid, utilisation %, memory used MiB), as
nvidia-smi --query-compute-apps does: a process is on the devices its TESTKIND_VISIBLE_DEVICES names (its
utilisation: the share of its life it spent on a CPU, since the stand-in's devices are CPUs)."""
import os
import sys
import time

DEVICES = 3
VISIBLE = b"TESTKIND_VISIBLE_DEVICES="


def processes() -> None:
    print("index, pid, utilization [%], used_memory [MiB]")
    tick, boot = os.sysconf("SC_CLK_TCK"), time.time() - time.monotonic()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                env = f.read().split(b"\0")
            with open(f"/proc/{entry}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        visible = next((item[len(VISIBLE):] for item in env if item.startswith(VISIBLE)), None)
        if visible is None:
            continue
        life = max(time.time() - (boot + int(fields[19]) / tick), 1e-3)
        util = min(100.0, 100.0 * (int(fields[11]) + int(fields[12])) / tick / life)
        for index in visible.decode().split(","):
            if index.strip().isdigit() and int(index) < DEVICES:
                print(f"{int(index)}, {entry}, {util:.0f}, -")


def main(command: str) -> None:
    if command == "list":
        for index in range(DEVICES):
            print(f"DEV {index}: TestKind TK1")
    elif command == "query":
        print("index, name, utilization [%], memory.used [MiB], power [W]")
        for index in range(DEVICES):
            print(f"{index}, tk-{index}, {40 + index}, {1024 * (index + 1)}, {70.5 + index}")
    elif command == "processes":
        processes()
    else:
        sys.exit(f"smi.py: unknown command {command!r}")


if __name__ == "__main__":
    main(sys.argv[1])
