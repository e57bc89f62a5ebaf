"""Evaluation of a trained policy (``unilab-eval``): motion tracking per clip, locomotion per command bin."""
