"""A round's figures, each defined once for runs and imports alike: the rates, step time and their spread from
the workers' step records, per rank -> per round -> across rounds (analyze); a task's named figures (task:
PPO phases, a GEMM's TFLOP/s per size); TFLOP/s per device, MFU and the note saying what it divides by
(derive); what no run can measure (impossible); the memory figure a view shows (memory); and how clean the
measurement was: the noise of a rate (noise) and the round's contention verdict against its limits (contention).

Everything above reads these figures; nothing here writes a record or touches the store. It may import, of
results/, only worker_logs/; of the orchestrator, catalog/ (the contention limits); of the worker half,
training.contract (perf records, FLOP units)."""
