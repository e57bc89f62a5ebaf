"""Tracking evaluation of a trained motion-tracking policy (``unilab-eval``)."""
