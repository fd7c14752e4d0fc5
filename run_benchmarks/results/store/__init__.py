"""The results store: typed rows, one schema and its migrations, on SQLite (a file, the default) or PostgreSQL
(a team's server): location (what --db names), dialect (what differs in SQL), one engine module each; fault
injection for tests, recovery, copying between stores. Only this package talks to a database.

Above rounds/ (a row holds the round record whole, in the shape metrics_shape checks) and beside breakdown/;
everything that reads rows (bundle, views, checks, history, certificates) sits above it."""
