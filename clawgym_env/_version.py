"""The package version, importable from any layer without loading the package face (which registers the Gym ids)."""

__version__ = "0.1.0"
