"""Exit statuses of the accelbench command (README, "Exit status"); 128 + N is a run stopped by signal N."""

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130
# The run measured something it could not record: an attempt the store did not take (locked past the retry
# budget, full), a results.json that could not be written (disk full: the run stops there). Apart from 1
# (the benchmark failed) and 3 (a regression), which are judged from what is recorded; it wins over both.
EXIT_NOT_RECORDED = 4
EXIT_REGRESSION = 3  # --check (run, sweep, report): a figure below its reference
# --check found no reference entry for any row: nothing was checked (unless --no-reference-expected).
EXIT_NOTHING_CHECKED = 5
# --check (run, sweep, report): a loss curve outside its loss reference's band (cases/<case>/loss_reference.yaml):
# the run did not train the same model. It wins over 3: a throughput is worth nothing for another training.
EXIT_CONVERGENCE = 6
# --check (run, sweep, report): a row that had a reference was not judged, because a round of it was contended
# (others used the run's cores or devices past test_conf's contention limits). A regression (3), a loss outside
# its band (6) or a failure (1) found in the rows that were judged wins; it wins over 5 (nothing checked).
EXIT_CONTENDED = 7
