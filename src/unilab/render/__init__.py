"""Offscreen rendering of simulation states (play videos)."""
