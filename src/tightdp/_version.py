"""The package version (one place; ``tightdp.__version__`` and the CLI read it)."""

__version__ = "0.1.0"
