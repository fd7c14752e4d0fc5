"""The test kind's smi tool: `list` prints its three devices, `query` one CSV line of readings per device
(index, name, utilisation %, memory used MiB, power W), in the shape of nvidia-smi's CSV query output."""
import sys

DEVICES = 3


def main(command: str) -> None:
    if command == "list":
        for index in range(DEVICES):
            print(f"DEV {index}: TestKind TK1")
    elif command == "query":
        print("index, name, utilization [%], memory.used [MiB], power [W]")
        for index in range(DEVICES):
            print(f"{index}, tk-{index}, {40 + index}, {1024 * (index + 1)}, {70.5 + index}")
    else:
        sys.exit(f"smi.py: unknown command {command!r}")


if __name__ == "__main__":
    main(sys.argv[1])
