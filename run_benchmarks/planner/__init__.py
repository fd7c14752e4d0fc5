"""From case names and configs to a run plan, checked before any host is touched: layout, per-node launches.
It binds nothing and reads nothing of a host: ``master_port: auto`` is chosen where each round starts."""
