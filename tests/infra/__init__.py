"""Real test hosts started on this machine: sshd daemons on 127.0.0.x, a Docker engine, a base image."""
