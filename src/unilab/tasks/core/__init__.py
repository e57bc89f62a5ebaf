"""Machinery every task shares: per-joint settings, actuation set-up."""
