"""A workload's figures over time (``accelbench history``): its points (one per run, series.py), the change points
in them and the points that are outliers (changes.py, by ruptures with a threshold from a significance level), what
changed in the runs' stored environment at each change point (explain.py), the nightly verdict (analysis.py) and
its views (terminal, Markdown, JSON, the HTML page and its charts). Reads the store only through its API.

At the top of results/ beside checks/ and certificate/: it reads report's facts and compare, the rounds' workload
and the figures' noise and contention verdicts, and nothing imports it but the CLI."""
