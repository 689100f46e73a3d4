"""Benchmarks, runnable as `python -m benchmarks.<name>` from the repository root."""
