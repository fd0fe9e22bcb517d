"""Stand-in for a Triton whose compile hooks cannot be found (see ../../README.md)."""

__version__ = "9.9.9-standin"
