"""PyTorch workloads. Imported only inside a worker process."""
