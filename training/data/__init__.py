"""Training data sources. Datasets are user-supplied paths; nothing is downloaded."""
