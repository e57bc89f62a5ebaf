"""Torque-limited pendulum swing-up on the BatchEnvPool: the task that tests learning."""
