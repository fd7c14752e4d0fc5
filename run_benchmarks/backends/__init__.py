"""How a run reaches its nodes: hosts (local, SSH), runtimes (a process, a container), schedulers (the host
list, Slurm), code sync, parallel fan-out and the cleanup of leftovers. Each kind registers in its base module
and is chosen by name; none imports its peers."""
