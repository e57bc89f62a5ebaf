"""Torque-limited pendulum swing-up on a physics pool: the task that tests learning."""
