"""What the workers left, read: where each rank's output lies once its launcher's logs were gathered
(rank_files), the perf records out of a log in bounded memory (perf_reader), and each rank's records and error
lines (rank_logs).

The bottom of results/: it reads files and knows nothing of figures, records or the store, so the launchers
(backends/launchers/) can name the gathered layout without pulling in the analysis. It imports, of the
orchestrator, nothing; of the worker half, training.contract (the perf-record schema)."""
