"""``python -m run_benchmarks.cli``: the same entry point as ``accelbench``."""
from run_benchmarks.cli.main import main

raise SystemExit(main())
