"""The orchestrator half of accelbench. Imports no torch and no paddle."""
__version__ = "0.1.0"
