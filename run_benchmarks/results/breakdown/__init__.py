"""Where a step's time went: measured (the workers' breakdown records) beside expected (this machine's own
GEMM peak and bus bandwidth), and the lever, as a round's ``metrics.time_breakdown``. step assembles a
training step's; pipeline adds a pipeline's waiting; layouts prices the collectives a layout runs where no part
was measured; ppo reads an RLHF update's phases as steps; words says it the same way in every view (the lever
line, ``show``, report, compare).

It reads records and figures, never the store: a round's breakdown is made before the round is stored, and
every view above reads it from the stored metrics. It may import, of results/, rounds/ (the metrics' shape),
figures/ and worker_logs/; of the worker half, training.contract."""
