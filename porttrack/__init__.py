"""porttrack: follow upstream pull requests into a downstream fork, hunk by hunk, with evidence."""

__version__ = "0.1.0"
