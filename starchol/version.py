"""The package version: the one home of the number (pyproject.toml repeats it for pip)."""

#: starchol's version, as ``starchol --version`` and every run record print it
VERSION = "0.1.0"
