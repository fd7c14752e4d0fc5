"""Training data sources. Datasets are user-supplied paths; nothing is downloaded.

Every source hands out micro-batches by global sample index (``sampling``), so
the data-parallel ranks together see exactly the batch one process would. This
package imports no framework, so a Paddle image without torch can import
``sampling`` and ``token_file`` (NumPy only); ``synthetic`` and ``instruction``
build torch tensors. Each framework turns sources into its batches:
``training/torch/data.py``, ``training/paddle/data.py``.
"""
