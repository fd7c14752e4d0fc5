"""Running a plan: preflight, launching rounds on every node, watching them, signals and cleanup, collecting logs, and each round's outcome."""
