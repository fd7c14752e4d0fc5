"""Every view of stored rows: the rows summarized per case (summary, facts, footnotes), the run's table and
live progress (terminal, live), show's task figures, compare and its pairing, the report, compare, table and
sweep formats by name (formats, report_formats, table_formats, documents: terminal, Markdown, HTML with its
charts, CSV/JSON export).

Above the figures, the round documents, the breakdown and the store, which it reads; beside tables/ (they import
each other: the table formats render the published tables, which are built of report's summaries). Nothing in
it judges a row against a reference, tracks a workload over time or signs a run: checks/, history/ and
certificate/ sit above it and read its summaries."""
