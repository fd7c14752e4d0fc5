"""The one exception both frameworks' workers raise when the device cannot run what the case asks for.

Framework-neutral (no torch, no paddle), so either worker can raise it and the
entry point (``training/run_pretraining.py``) turns it into exit code 3, which
the orchestrator records as ``unsupported`` instead of ``failed``.
"""


class UnsupportedOnDevice(RuntimeError):
    """This device cannot run what the case asks for; the result says so instead of failing."""
