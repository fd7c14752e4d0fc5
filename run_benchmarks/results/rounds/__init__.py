"""What a round ran and what it came to, as documents: the resolved workload, its hash and layout facts
(workload); the typed, versioned round record written to results.json and stored whole (record), with the shape
its metrics must have where views read them (metrics_shape); and the round's outcome as the schedulers return it
to the run (result: status, endings, figures and the record).

Sits above figures/ because a round's result and record are written from its figures (result holds
figures.analyze.RoundMetrics), and below the store, the breakdown, the importers and every view, which read
these documents. It may import, of results/, figures/ and worker_logs/; of the orchestrator, catalog/ (case
names, compliance); of the worker half, training.contract."""
