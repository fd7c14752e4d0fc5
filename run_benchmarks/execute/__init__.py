"""Running a plan: preflight, launching rounds on every node, following and stopping them, monitoring, and
each round's outcome (classified, written to results.json and the store)."""
