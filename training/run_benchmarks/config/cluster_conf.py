'''Cluster configs of FlagPerf's run.py, read without running them (README, "FlagPerf's run.py").'''

# The nodes' hosts, in node order: 127.0.0.1 is this machine (local processes); any other is reached over SSH,
# its host key checked against ~/.ssh/known_hosts and never added.
HOSTS = ["127.0.0.1"]

# Ignored: the ports of FlagPerf's TensorFlow workers.
HOSTS_PORTS = ["2222"]

# The rendezvous port of every round; leave it out for a free port per round.
# MASTER_PORT = "29501"

# The SSH port of every host but this machine.
SSH_PORT = "22"
