"""Benchmarks for membot: `make bench` (python -m bench)."""
