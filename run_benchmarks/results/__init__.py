"""What a run leaves: figures computed once from the workers' logs, the record, the store, bundles, reports and importers of others' logs."""
