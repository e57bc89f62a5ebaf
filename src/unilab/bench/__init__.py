"""Benchmarks shipped with unilab (also run as scripts/benchmark/env/*.py and `unilab-bench`)."""
