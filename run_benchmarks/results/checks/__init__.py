"""Verdicts on results against what they should be: each figure against its references.yaml band
(references), a run's loss curve against the case's loss-curve reference (loss_reference: the file and its
recording; loss_check: the judgement), ``--check``'s verdicts on stored rows, one way for run, sweep and report
(verdicts), and the fairness lint a round's figures get before they are stored (fairness).

Above the report: a reference is matched to a row by the facts and summaries report/ builds of stored rows
(report.facts, report.summary), so checks read those rather than work them out again; no view imports a check
(the CLI prints the verdicts). It may import, of results/, every layer below it (report/ and tables/ down to
worker_logs/), not history/ or certificate/ beside it; of the orchestrator, catalog/ and the shared modules; of
the worker half, training.contract."""
