"""Sweeps: a grid of points run one after another, the max-batch search, progress and resumable state."""
