"""From case names and configs to a run plan, checked before any host is touched: layout, rendezvous ports, per-node launches."""
