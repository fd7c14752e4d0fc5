"""Training data sources. Datasets are user-supplied paths; nothing is downloaded.

Every source hands out micro-batches by global sample index (``sampling``), so
the data-parallel ranks together see exactly the batch one process would. This
package imports no framework except ``synthetic`` (torch's generator), so a
Paddle image without torch can import the rest (NumPy only). ``batches`` is
the one data side both workers share: which source a spec names, micro-batches
as arrays, padding, and the step's token counts (padded, effective, supervised)
and FLOPs; ``training/torch/data.py`` and ``training/paddle/data.py`` only add
each framework's synthetic source.
"""
