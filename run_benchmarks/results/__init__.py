"""What a run leaves, grouped by job, each package in a layer of its own (pyproject.toml's contract "results/
in layers by job"; each package's __init__ says what it owns and may import), top to bottom:

  certificate/ checks/ history/   sign a run; judge rows against references and loss curves; a workload over time
  report/ tables/                 every view of stored rows; the published tables beside ours (they import each other)
  bundle/ importers/              results that come from elsewhere: a run's archive, others' logs
  breakdown/ store/               where the step time went; the store of rows
  rounds/                         what a round ran and came to: workload, record, result
  figures/                        a round's figures, each defined once for runs and imports alike
  worker_logs/                    what the workers left, read

No module sits here beside the packages: a new one joins the package of its job (the contract is exhaustive)."""
