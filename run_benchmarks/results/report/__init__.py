"""Reports of a run: the terminal table and progress now; more formats build on the same results."""
