"""A run's results as one archive a vendor can hand to someone else, and the way back into another store:
archive writes and imports ``<run_id>.accelbench.tar.gz``; received holds what a bundle someone else made must
be beyond its format (sizes read from the headers first, no impossible figure stored ok, an unreadable
summary judged aborted) before anything of it is stored.

Beside the importers (both bring others' results into a store) and below certificate/, which hashes a bundle's
files. It may import, of results/, the layers below it (store/, breakdown/, rounds/, figures/, worker_logs/),
not importers/ beside it; of the orchestrator, catalog/ and the shared modules (limits, errors, pathnames)."""
