"""The results store: one SQLite file of typed rows, its schema and migrations, fault injection for tests and recovery."""
