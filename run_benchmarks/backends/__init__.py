"""How a run reaches its nodes: hosts (local, SSH), runtimes (a process, a container), launchers (torchrun,
paddle.distributed.launch), schedulers (the host list, Slurm, Kubernetes), code sync, parallel fan-out and the
cleanup of leftovers. Each axis has one registry, its built-ins registered by path in its package, and is
chosen by name."""
